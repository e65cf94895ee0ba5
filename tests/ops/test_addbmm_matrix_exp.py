"""addbmm and matrix_exp on the device, and the traced tensor overloads of linspace/logspace, each
against CPU PyTorch with JAXDEV_FALLBACK=error (a kernel that quietly fell back to CPU fails)."""

from __future__ import annotations

import warnings

import pytest
import torch
from jaxdev_testing import CPU, JAX, assert_same, check

from jaxdev.compiler.program import EagerGraphWarning

pytestmark = pytest.mark.usefixtures("no_fallback")  # tests/conftest.py


def _gen(seed=0):
    return torch.Generator().manual_seed(seed)


def _same_outcome(fn, *, rtol=1e-5, atol=1e-5):
    """fn(device) on CPU and on jax: the same values (dtype, shape) or the same exception and message."""
    try:
        expected = fn(CPU)
    except Exception as cpu_err:
        with pytest.raises(type(cpu_err)) as jax_err:
            fn(JAX)
        assert str(jax_err.value).splitlines()[0] == str(cpu_err).splitlines()[0]
        return None
    got = fn(JAX)
    assert_same(got, expected, rtol=rtol, atol=atol)
    return got


# --- addbmm ----------------------------------------------------------------------------------------

S, B1, B2 = (torch.randn(*shape, generator=_gen(i)) for i, shape in enumerate(((3, 4), (2, 3, 5), (2, 5, 4))))
NAN = torch.full((3, 4), float("nan"))


def _on(device, *ts, dtype=None):
    return [t.to(device) if dtype is None else t.to(device, dtype) for t in ts]


ADDBMM_CASES = {
    "plain": lambda d: torch.addbmm(*_on(d, S, B1, B2)),
    "beta alpha": lambda d: torch.addbmm(*_on(d, S, B1, B2), beta=0.5, alpha=-2),
    "broadcast row": lambda d: torch.addbmm(*_on(d, S[0], B1, B2)),
    "broadcast column": lambda d: torch.addbmm(*_on(d, S[:, :1], B1, B2)),
    "broadcast 0-dim": lambda d: torch.addbmm(*_on(d, S[0, 0], B1, B2), beta=3),
    "float64": lambda d: torch.addbmm(*_on(d, S, B1, B2, dtype=torch.float64), beta=0.25, alpha=1.5),
    "complex64": lambda d: torch.addbmm(
        *_on(d, S * 1j, B1, B2 * 1j + 1, dtype=torch.complex64), beta=1 - 1j, alpha=0.5j
    ),
    "complex128": lambda d: torch.addbmm(*_on(d, S * 1j, B1 + 2j, B2, dtype=torch.complex128), alpha=2 + 1j),
    "beta 0 ignores NaN in self": lambda d: torch.addbmm(*_on(d, NAN, B1, B2), beta=0),
    "beta 1 keeps NaN in self": lambda d: torch.addbmm(*_on(d, NAN, B1, B2)),
    "inf in batches": lambda d: torch.addbmm(*_on(d, S, B1.index_fill(1, torch.tensor([0]), float("inf")), B2)),
    "non-contiguous": lambda d: torch.addbmm(*_on(d, S.t().contiguous().t(), B1.mT.contiguous().mT, B2[:, :, :])),
    # no batches, or an empty inner dim: beta * self (alpha never multiplies anything, inf included)
    "no batches": lambda d: torch.addbmm(*_on(d, S, B1[:0], B2[:0]), beta=3, alpha=float("inf")),
    "no batches beta 0": lambda d: torch.addbmm(*_on(d, NAN, B1[:0], B2[:0]), beta=0),
    "no batches other dtype": lambda d: torch.addbmm(*_on(d, S.double(), B1[:0], B2[:0]), beta=2),
    "no batches int float beta": lambda d: torch.addbmm(*_on(d, S.long(), B1[:0].long(), B2[:0].long()), beta=0.5),
    "no batches bool int beta": lambda d: torch.addbmm(*_on(d, S.bool(), B1[:0].bool(), B2[:0].bool()), beta=2),
    "empty inner dim": lambda d: torch.addbmm(*_on(d, S, B1[:, :, :0], B2[:, :0]), beta=3, alpha=float("inf")),
    "empty inner dim bool": lambda d: torch.addbmm(*_on(d, S.bool(), B1[:, :, :0].bool(), B2[:, :0].bool())),
    "empty result": lambda d: torch.addbmm(*_on(d, S[:0], B1[:, :0], B2)),
    # integers: products wrap in the dtype, beta and alpha converted to it (truncated) as CPU does
    "int32 float scalars": lambda d: torch.addbmm(
        *_on(d, S * 10, B1 * 5, B2 * 5, dtype=torch.int32), beta=0.5, alpha=-2.7
    ),
    "int8 wraps": lambda d: torch.addbmm(*_on(d, S * 10, B1 * 9, B2 * 9, dtype=torch.int8), beta=3, alpha=7),
    "uint8": lambda d: torch.addbmm(*_on(d, S.abs() * 10, B1.abs() * 9, B2.abs() * 9, dtype=torch.uint8), alpha=7),
    "int64": lambda d: torch.addbmm(*_on(d, S * 100, B1 * 100, B2 * 100, dtype=torch.int64), beta=-1, alpha=3),
    # CPU's errors, in CPU's order
    "self dtype": lambda d: torch.addbmm(*_on(d, S.double(), B1, B2)),
    "batch1 dtype": lambda d: torch.addbmm(*_on(d, S, B1.double(), B2)),
    "batch2 dtype": lambda d: torch.addbmm(*_on(d, S, B1, B2.half())),
    "batch1 2-D": lambda d: torch.addbmm(*_on(d, S, B1[0], B2)),
    "batch2 2-D": lambda d: torch.addbmm(*_on(d, S, B1, B2[0])),
    "batch1 4-D": lambda d: torch.addbmm(*_on(d, S, B1[None], B2)),
    "batch counts": lambda d: torch.addbmm(*_on(d, S, B1[:1], B2)),
    "inner sizes": lambda d: torch.addbmm(*_on(d, S, B1, B2[:, :4])),
    "self shape": lambda d: torch.addbmm(*_on(d, torch.ones(4, 4), B1, B2)),
    "self 3-D": lambda d: torch.addbmm(*_on(d, torch.ones(2, 3, 4), B1, B2)),
    "bool": lambda d: torch.addbmm(*_on(d, S, B1, B2, dtype=torch.bool)),
    "float beta overflows float32": lambda d: torch.addbmm(*_on(d, S, B1, B2), beta=1e300),
    "complex alpha on float": lambda d: torch.addbmm(*_on(d, S, B1, B2), alpha=1j),
    "complex alpha with zero imaginary part": lambda d: torch.addbmm(*_on(d, S, B1, B2), alpha=2 + 0j),
    "int8 alpha overflows": lambda d: torch.addbmm(*_on(d, S, B1, B2, dtype=torch.int8), alpha=1000),
    "int complex alpha": lambda d: torch.addbmm(*_on(d, S, B1, B2, dtype=torch.int32), alpha=1j),
    # out= takes its dtype from out (CPU's addmm_ checks it against the batches) and self is cast in
    "out wrong dtype": lambda d: torch.addbmm(*_on(d, S, B1, B2), out=torch.empty(3, 4, dtype=torch.float64, device=d)),
    "out int dtype": lambda d: torch.addbmm(*_on(d, S, B1, B2), out=torch.empty(3, 4, dtype=torch.int64, device=d)),
    "out self float64": lambda d: torch.addbmm(*_on(d, S.double(), B1, B2), out=torch.empty(3, 4, device=d)),
    "out resized": lambda d: torch.addbmm(*_on(d, S, B1, B2), out=torch.empty(0, device=d)),
    "in-place": lambda d: _on(d, S.clone())[0].addbmm_(*_on(d, B1, B2), alpha=0.5),
    "in-place dtype": lambda d: _on(d, S.double())[0].addbmm_(*_on(d, B1.double(), B2)),
}


@pytest.mark.parametrize("case", list(ADDBMM_CASES))
def test_addbmm_like_cpu(case):
    _same_outcome(ADDBMM_CASES[case])


def test_addbmm_out_writes_through_out():
    out = torch.full((3, 4), 7.0, device=JAX)
    alias = out.view(12)
    result = torch.addbmm(*_on(JAX, S, B1, B2), out=out)
    assert result is out
    assert_same(alias, torch.addbmm(S, B1, B2).view(12), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.complex64])
def test_addbmm_gradients_like_cpu(dtype):
    check(lambda s, a, b: torch.addbmm(s, a, b, beta=0.5, alpha=2), S[0].to(dtype), B1.to(dtype), B2.to(dtype))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32])
def test_addbmm_at_least_as_close_to_float64_as_cpu(dtype):
    """Half inputs accumulate in float32 and round once; float32 sums per-batch dots: both land no
    farther from the float64 result than CPU's addmm_-per-batch order, on these inputs."""
    s, a, b = (torch.randn(*shape, generator=_gen(7 + i)) for i, shape in enumerate(((6, 8), (5, 6, 12), (5, 12, 8))))
    s, a, b = s.to(dtype), a.to(dtype), b.to(dtype)
    exact = torch.addbmm(s.double(), a.double(), b.double(), beta=0.5, alpha=2)
    cpu = torch.addbmm(s, a, b, beta=0.5, alpha=2)
    got = torch.addbmm(*_on(JAX, s, a, b), beta=0.5, alpha=2)
    assert got.dtype == dtype
    assert (got.cpu().double() - exact).abs().max() <= (cpu.double() - exact).abs().max()


# --- matrix_exp ------------------------------------------------------------------------------------


def _wide(dtype):
    return torch.complex128 if dtype.is_complex else torch.float64


@pytest.mark.parametrize("dtype", [torch.float32, torch.complex64])
@pytest.mark.parametrize("scale", [1e-4, 0.05, 0.5, 1.2, 2.5, 8.0, 40.0])
def test_matrix_exp_at_least_as_close_to_float64_as_cpu(dtype, scale):
    """Every degree of the scheme (the 1-norm picks it) and the scaling and squaring past the last:
    jax's float32/complex64 result is no farther from the float64 one than CPU's."""
    x = (torch.randn(6, 5, 5, generator=_gen(int(scale * 1000)), dtype=dtype) * scale / 5).to(dtype)
    exact = torch.linalg.matrix_exp(x.to(_wide(dtype)))
    cpu = torch.linalg.matrix_exp(x)
    got = torch.linalg.matrix_exp(x.to(JAX))
    assert_same(got, cpu, rtol=2e-5, atol=1e-5 * max(1.0, exact.abs().max().item()))
    err = lambda r: ((r.to(_wide(dtype)) - exact).abs() / (1e-5 + 1.3e-6 * exact.abs())).max()
    assert err(got.cpu()) <= err(cpu)


MATRIX_EXP_CASES = {
    "zeros": lambda d: torch.linalg.matrix_exp(torch.zeros(2, 3, 3, device=d)),
    "1x1": lambda d: torch.linalg.matrix_exp(torch.randn(4, 1, 1, generator=_gen(3)).to(d)),
    "0x0": lambda d: torch.linalg.matrix_exp(torch.zeros(2, 0, 0, device=d)),
    "empty batch": lambda d: torch.linalg.matrix_exp(torch.zeros(0, 3, 3, device=d)),
    "NaN entry": lambda d: torch.linalg.matrix_exp(torch.eye(3).index_fill(1, torch.tensor([1]), float("nan")).to(d)),
    "inf entry": lambda d: torch.linalg.matrix_exp(torch.eye(3).index_fill(0, torch.tensor([2]), float("inf")).to(d)),
    "overflow to inf": lambda d: torch.linalg.matrix_exp(torch.tensor([[100.0, 1.0], [0.0, 100.0]], device=d)),
    "decays to zero": lambda d: torch.linalg.matrix_exp(-200 * torch.eye(3, device=d)),
    "rotation": lambda d: torch.linalg.matrix_exp(torch.tensor([[0.0, 60.0], [-60.0, 0.0]], device=d)),
    "complex128": lambda d: torch.linalg.matrix_exp(
        torch.randn(3, 4, 4, generator=_gen(4), dtype=torch.complex128).to(d)
    ),
    "float64": lambda d: torch.linalg.matrix_exp(
        torch.randn(3, 4, 4, generator=_gen(5), dtype=torch.float64).to(d) * 3
    ),
    "integer": lambda d: torch.linalg.matrix_exp(torch.ones(3, 3, dtype=torch.int64, device=d)),
    "not square": lambda d: torch.linalg.matrix_exp(torch.ones(3, 4, device=d)),
    "1-D": lambda d: torch.linalg.matrix_exp(torch.ones(3, device=d)),
}


@pytest.mark.parametrize("case", list(MATRIX_EXP_CASES))
def test_matrix_exp_like_cpu(case):
    got = _same_outcome(MATRIX_EXP_CASES[case], rtol=1e-5, atol=2e-5)
    if got is not None:
        assert got.stride() == MATRIX_EXP_CASES[case](CPU).stride()


@pytest.mark.parametrize("dtype", [torch.float32, torch.complex64, torch.float64])
def test_matrix_exp_gradients_like_cpu(dtype):
    # PyTorch's formula: matrix_exp of the block matrix [[A^H, G], [0, A^H]]
    x = torch.randn(2, 4, 4, generator=_gen(11), dtype=dtype) * 0.7
    check(torch.linalg.matrix_exp, x, rtol=1e-4, atol=1e-5)


# --- linspace / logspace with 0-dim tensor ends, traced under torch.compile --------------------------

RANGE_CASES = [
    # (start, end, steps, dtype)
    (torch.tensor(-3.7), torch.tensor(12.2), 10, None),
    (torch.tensor(2.5, dtype=torch.float64), 7.0, 7, torch.float32),
    (-1.0, torch.tensor(4, dtype=torch.int64), 5, torch.float64),
    (torch.tensor(-1), torch.tensor(300), 9, torch.int64),
    (torch.tensor(-1), torch.tensor(30), 4, torch.uint8),  # -1 wraps to 255 in uint8
    (torch.tensor(-3.7), torch.tensor(12.2), 10, torch.float16),
    (torch.tensor(0.5), torch.tensor(2.0), 6, torch.bfloat16),
    (torch.tensor(1 + 2j), torch.tensor(-3.0 + 0j), 5, None),
    (torch.tensor(True), torch.tensor(False), 3, torch.float32),
    (torch.tensor(3.0), torch.tensor(1.0), 1, torch.int8),
    (torch.tensor(3.0), torch.tensor(1.0), 0, None),
    (torch.tensor(float("nan")), torch.tensor(1.0), 4, None),
]


@pytest.mark.parametrize("op", [torch.linspace, torch.logspace])
@pytest.mark.parametrize("case", range(len(RANGE_CASES)))
def test_tensor_ends_trace_like_cpu(op, case):
    start, end, steps, dtype = RANGE_CASES[case]
    kwargs = {} if dtype is None else {"dtype": dtype}
    if op is torch.logspace:
        kwargs["base"] = 2.0
    expected = op(start, end, steps, **kwargs)
    on_jax = [v.to(JAX) if isinstance(v, torch.Tensor) else v for v in (start, end)]
    with warnings.catch_warnings():
        warnings.simplefilter("error", EagerGraphWarning)  # one XLA program, no op-by-op run
        compiled = torch.compile(lambda a, b: op(a, b, steps, device=JAX, **kwargs) * 1, backend="jax")
        got = compiled(*on_jax)
    assert_same(got, expected * 1, rtol=1e-2 if dtype in (torch.float16, torch.bfloat16) else 1e-6, atol=1e-6)
    assert_same(op(*on_jax, steps, device=JAX, **kwargs), expected, rtol=1e-2, atol=1e-6)  # eager, same path as before


def test_tensor_ends_value_checks_under_compile():
    """A traced end that does not fit the dtype raises CPU's error when the result is read."""
    compiled = torch.compile(lambda a, b: torch.linspace(a, b, 4, dtype=torch.int8, device=JAX) * 1, backend="jax")
    with pytest.raises(RuntimeError, match="value cannot be converted to type int8_t without overflow"):
        torch.linspace(torch.tensor(1000.0), torch.tensor(1.0), 4, dtype=torch.int8)
    with pytest.raises(RuntimeError, match="value cannot be converted to type int8_t without overflow"):
        compiled(torch.tensor(1000.0, device=JAX), torch.tensor(1.0, device=JAX)).cpu()
    assert compiled(torch.tensor(-5.0, device=JAX), torch.tensor(1.0, device=JAX)).cpu().tolist() == [-5, -3, -1, 1]


def test_tensor_ends_must_be_0_dim():
    for op in (torch.linspace, torch.logspace):
        _same_outcome(lambda d, op=op: op(torch.ones(1, device=d), torch.tensor(1.0, device=d), 3, device=d))
        _same_outcome(lambda d, op=op: op(torch.tensor(0.0, device=d), torch.ones(2, device=d), 3, device=d))
        _same_outcome(lambda d, op=op: op(torch.ones(1, device=d), 1.0, 3, device=d))
