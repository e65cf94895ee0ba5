"""Ops whose kernel the platform's XLA lacks for a dtype (jaxdev/ops/capabilities.py): served by CPU
PyTorch through the fallback, counted and warned, or refused in one sentence, never a raw JAX error.
XLA's CPU backend lacks none, so these tests pretend it does (as a TPU lacks float64 LU and FFT)."""

from __future__ import annotations

import warnings

import jax
import pytest
import torch
from jaxdev_testing import JAX

import jaxdev
from jaxdev.fallback import FallbackError
from jaxdev.ops import capabilities
from jaxdev.ops.linalg import decompositions
from jaxdev.ops.registry import KERNELS
from jaxdev.ops.toolkit import jitted

F64 = torch.float64


@pytest.fixture
def lacking(monkeypatch, fallback_mode):
    """pretend(family, status="confirmed", dtypes=(float64,)): this platform lacks `family` for them."""
    fallback_mode("warn")
    monkeypatch.setattr(capabilities, "learned", set())

    def pretend(family, status="confirmed", dtypes=(F64,)):
        gap = capabilities.Gap(frozenset(dtypes), status, "pretended")
        monkeypatch.setitem(capabilities.GAPS, capabilities.platform(), {family: gap})

    return pretend


def _matrix(dtype=F64, n=4):
    g = torch.Generator().manual_seed(0)
    return torch.randn(n, n, generator=g, dtype=dtype) + n * torch.eye(n, dtype=dtype)


@pytest.mark.parametrize(
    "fn",
    [torch.linalg.inv, torch.linalg.slogdet, torch.linalg.det, lambda a: torch.linalg.solve(a, a[:, :2])],
    ids=["inv", "slogdet", "det", "solve"],
)
def test_a_missing_float64_lu_is_served_on_cpu_counted_and_warned(lacking, fn):
    lacking("lu")
    a = _matrix()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = fn(a.to(JAX))
    expected = fn(a)
    for g, e in zip(
        got if isinstance(got, tuple) else (got,), expected if isinstance(expected, tuple) else (expected,)
    ):
        assert g.device.type == "jax" and torch.equal(g.cpu(), e)
    counts = jaxdev.fallback_counts()
    assert sum(n for op, n in counts.items() if "linalg" in op) >= 1, counts
    said = [str(w.message) for w in caught if "float64 kernel" in str(w.message)]
    assert said and "XLA's CPU backend has no float64 LU decomposition" in said[0], said


def test_other_dtypes_keep_their_jax_kernel(lacking):
    lacking("lu")
    torch.linalg.inv(_matrix(torch.float32).to(JAX))
    assert jaxdev.fallback_counts() == {}


def test_a_missing_float64_fft_is_served_on_cpu(lacking):
    lacking("fft", dtypes=(F64, torch.complex128))
    x = torch.randn(16, dtype=F64)
    got = torch.fft.fft(x.to(JAX))
    assert got.dtype == torch.complex128 and torch.equal(got.cpu(), torch.fft.fft(x))
    assert any("fft" in op for op in jaxdev.fallback_counts())


def test_where_the_fallback_is_forbidden_the_refusal_names_the_gap(lacking, fallback_mode):
    lacking("lu")
    fallback_mode("error")
    with pytest.raises(FallbackError, match=r"has no float64 kernel on CPU \(XLA's CPU backend has no float64 LU"):
        torch.linalg.inv(_matrix().to(JAX))


def test_a_suspected_gap_is_learned_from_the_platforms_refusal(lacking):
    """A kernel the platform refuses to compile (UNIMPLEMENTED) is served on CPU, and so is every later
    call of that family and dtype, without trying the kernel again."""
    lacking("svd", status="suspected")
    op = torch.ops.aten._linalg_svd.default
    tried = []

    def refused(*args, **kwargs):
        tried.append(1)
        raise jax.errors.JaxRuntimeError("UNIMPLEMENTED: no F64 SVD here")

    kernel = capabilities.served(op, refused)
    a = _matrix()
    for _ in range(2):
        s = kernel(a.to(JAX), False)[1]
        assert torch.equal(s.cpu(), op(a, False)[1])
    assert tried == [1] and ("cpu", "svd", F64) in capabilities.learned


def test_other_errors_pass_through(lacking):
    lacking("svd", status="suspected")

    def broken(*args, **kwargs):
        raise jax.errors.JaxRuntimeError("RESOURCE_EXHAUSTED: out of memory")

    with pytest.raises(jax.errors.JaxRuntimeError, match="RESOURCE_EXHAUSTED"):
        capabilities.served(torch.ops.aten._linalg_svd.default, broken)(_matrix().to(JAX), False)
    assert capabilities.learned == set()


def test_float32_decompositions_stay_float32_where_float64_is_missing(lacking):
    """SVD and eigh widen float32 to float64 for accuracy, where the platform has the float64 kernel."""
    x = jax.numpy.ones((3, 3), jax.numpy.float32)
    body = decompositions._svd_body.__wrapped__(False, True, True)
    assert "f64[3,3]" in str(jax.make_jaxpr(body)(x))  # the matrix widened
    lacking("svd")
    assert "f64[3,3]" not in str(jax.make_jaxpr(lambda v: body(v))(x))  # traced anew


def test_every_op_in_the_table_has_a_kernel_and_every_gap_a_family():
    registered = {name.split(".")[0] for name in KERNELS}
    assert set(capabilities.FAMILIES) <= registered, set(capabilities.FAMILIES) - registered
    for gaps in capabilities.GAPS.values():
        for family, gap in gaps.items():
            assert family in {*capabilities.FAMILIES.values(), *capabilities.DTYPE_GAPS}, family
            assert gap.status in ("confirmed", "suspected")


def test_without_complex128_python_complex_numbers_enter_programs_as_complex64(lacking):
    """Where the platform has no complex128 (suspected on a TPU: pytest aborted in its compiler on
    complex64 values beside Python complex numbers), jitted kernel bodies take them as complex64."""

    def body_factory():
        return lambda number, x: (x * number, jax.numpy.asarray(number))

    x = jax.numpy.ones(2, jax.numpy.complex64)
    product, number = jitted(body_factory)()(1 + 2j, x)
    assert number.dtype == jax.numpy.complex128  # here: a complex128 parameter
    lacking("complex128", dtypes=(torch.complex128,))
    product, number = jitted(body_factory)()(1 + 2j, x)
    assert number.dtype == jax.numpy.complex64 and product.dtype == jax.numpy.complex64
    assert product.tolist() == [1 + 2j, 1 + 2j]
    assert "complex<f64>" not in jitted(body_factory)().lower(1 + 2j, x).as_text()
