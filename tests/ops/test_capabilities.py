"""Ops whose kernel the platform's XLA lacks for a dtype (jaxdev/ops/kit/capabilities.py): served by CPU
PyTorch through the fallback, counted and warned, or refused in one sentence, never a raw JAX error.
XLA's CPU backend lacks none, so these tests pretend it does (as a TPU lacks float64 LU and FFT)."""

from __future__ import annotations

import warnings

import jax
import pytest
import torch
from jaxdev_testing import JAX

import jaxdev
from jaxdev.audit.deviceless import forget_platform
from jaxdev.fallback import FallbackError
from jaxdev.ops.kit import capabilities
from jaxdev.ops.linalg import decompositions
from jaxdev.ops.registry import KERNELS

F64 = torch.float64
HERE = capabilities.platform().upper()  # the platform a refusal or warning names (CPU here, TPU on a chip)


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
    assert said and f"XLA's {HERE} backend has no float64 LU decomposition" in said[0], said


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
    with pytest.raises(
        FallbackError, match=rf"has no float64 kernel on {HERE} \(XLA's {HERE} backend has no float64 LU"
    ):
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
    assert tried == [1] and (capabilities.platform(), "svd", F64) in capabilities.learned


def test_other_errors_pass_through(lacking):
    lacking("svd", status="suspected")

    def broken(*args, **kwargs):
        raise jax.errors.JaxRuntimeError("RESOURCE_EXHAUSTED: out of memory")

    with pytest.raises(jax.errors.JaxRuntimeError, match="RESOURCE_EXHAUSTED"):
        capabilities.served(torch.ops.aten._linalg_svd.default, broken)(_matrix().to(JAX), False)
    assert capabilities.learned == set()


def test_float32_decompositions_stay_float32_where_float64_is_missing(lacking):
    """SVD and eigh widen float32 to float64 for accuracy, where the platform has the float64 kernel."""
    if capabilities.fact("float64_emulated"):
        pytest.skip("float64 is float32 pairs on this platform (a TPU): float32 is never widened there")
    x = jax.numpy.ones((3, 3), jax.numpy.float32)
    body = decompositions._svd_body.__wrapped__(False, True, True)
    assert "f64[3,3]" in str(jax.make_jaxpr(body)(x))  # the matrix widened
    lacking("svd")
    assert "f64[3,3]" not in str(jax.make_jaxpr(lambda v: body(v))(x))  # traced anew


@pytest.mark.tpu_fact("float64 is emulated: no closer than float32 there, and SVD aborted a TPU's compiler")
def test_float32_decompositions_stay_float32_where_float64_is_emulated(monkeypatch):
    """SVD and eigh widen float32 to float64 only where float64 is hardware (not a TPU)."""
    x = jax.numpy.eye(3, dtype=jax.numpy.float32)
    bodies = (decompositions._svd_body.__wrapped__(False, True, True), decompositions._eigh_body.__wrapped__(True))
    monkeypatch.setitem(capabilities.PROGRAM_FACTS, capabilities.platform(), {"float64_emulated": "pretended"})
    for body in bodies:
        assert "f64[3,3]" not in str(jax.make_jaxpr(lambda v, body=body: body(v))(x))


def test_kernels_that_aborted_a_tpu_are_confirmed_gaps_there():
    """A process killed inside XLA cannot learn a suspected gap: those must be served on CPU from the start."""
    tpu = capabilities.GAPS["tpu"]
    assert {torch.float32, torch.complex64, F64, torch.complex128} <= tpu["svd"].dtypes
    for family in ("svd", "qr", "triangular_solve", "cholesky"):
        assert tpu[family].status == "confirmed" and torch.complex128 in tpu[family].dtypes, family


def test_every_op_in_the_table_has_a_kernel_and_every_gap_a_family():
    registered = {name.split(".")[0] for name in KERNELS}
    assert set(capabilities.FAMILIES) <= registered, set(capabilities.FAMILIES) - registered
    for gaps in capabilities.GAPS.values():
        for family, gap in gaps.items():
            assert family in capabilities.FAMILIES.values(), family
            assert gap.status in ("confirmed", "suspected")


@pytest.mark.tpu_fact("complex128 programs abort or are refused by XLA's TPU compiler")
def test_a_dtype_the_platform_refuses_is_one_sentence_wherever_it_would_arrive(monkeypatch):
    from jaxdev import dtypes

    why = capabilities.REFUSED_DTYPES["tpu"][torch.complex128]
    monkeypatch.setitem(dtypes.PLATFORM_REFUSALS, capabilities.platform(), {torch.complex128: why})
    forget_platform()  # kernels an earlier test traced for complex128 results would skip the refusal
    try:
        x = torch.randn(3, dtype=torch.float64).to(JAX)
        arrivals = {
            "to": lambda: torch.randn(3, dtype=torch.complex128).to(JAX),
            "factory": lambda: torch.zeros(3, dtype=torch.complex128, device=JAX),
            "cast": lambda: x.to(torch.complex128),
            "promotion": lambda: x * 2j,
            "view_as_complex, used": lambda: torch.view_as_complex(x.reshape(-1, 1).repeat(1, 2)).abs(),
            "view, read": lambda: x.repeat(2).view(torch.complex128).cpu(),
        }
        for name, arrive in arrivals.items():
            with pytest.raises(jaxdev.PlatformDtypeError) as caught:
                arrive()
            assert str(caught.value) == why, name
        assert (x.to(torch.complex64) * 2j).cpu().dtype == torch.complex64  # complex64 as before
    finally:
        monkeypatch.undo()
        forget_platform()
    assert torch.zeros(1, dtype=torch.complex128, device=JAX).cpu().item() == 0


@pytest.mark.tpu_fact("XLA's TPU compiler has no int64 dot or convolution (UNIMPLEMENTED X64 rewriting)")
def test_int64_products_and_convolutions_are_served_on_cpu_where_the_platform_lacks_them(lacking):
    """Found by the sweep on the stand-in (deviceless.py): int64 mm, bmm, mv, dot, matmul, inner,
    multi_dot, bilinear and every convolution raised UNIMPLEMENTED in XLA's TPU compiler."""
    lacking("integer_product", dtypes=(torch.int64, torch.uint64))
    g = torch.Generator().manual_seed(0)
    a, b = torch.randint(-50, 50, (3, 4), generator=g), torch.randint(-50, 50, (4, 2), generator=g)
    w = torch.randint(-3, 3, (2, 3, 2), generator=g)
    cases = {
        "mm": lambda x, y, k: x @ y,
        "mv": lambda x, y, k: x @ y[:, 0],
        "dot": lambda x, y, k: x[0] @ y[:, 0],
        "bmm": lambda x, y, k: torch.bmm(x[None], y[None]),
        "addmm": lambda x, y, k: torch.addmm(y[:3, :2] * 0 + 7, x, y),
        "einsum": lambda x, y, k: torch.einsum("ij,jk->ik", x, y),
        "conv1d": lambda x, y, k: torch.nn.functional.conv1d(x[None], k),
    }
    for name, fn in cases.items():
        assert torch.equal(fn(a.to(JAX), b.to(JAX), w.to(JAX)).cpu(), fn(a, b, w)), name
    counts = jaxdev.fallback_counts()
    assert {"aten::mm", "aten::mv", "aten::dot", "aten::bmm", "aten::addmm", "aten::convolution"} <= set(counts), counts
    jaxdev.reset_fallback_counts()
    assert torch.equal((a.int().to(JAX) @ b.int().to(JAX)).cpu(), a.int() @ b.int())  # int32 keeps its kernel
    assert not jaxdev.fallback_counts()
