"""The orthogonal polynomials of torch.special (Chebyshev T/U/V/W and shifted forms, Hermite H/He,
Laguerre L, Legendre P) on the device against CPU PyTorch, with JAXDEV_FALLBACK=error so a kernel that
quietly fell back to CPU fails: every overload (Tensor/Tensor, Scalar x, Scalar n, out=), degrees
from negative through the closed-form and recurrence ranges to the Hermite limits and beyond int64,
x inside and outside the interval, at its ends, infinities and NaN, integer and bool inputs, errors,
and torch.compile."""

from __future__ import annotations

import math
import warnings

import pytest
import torch
from jaxdev_testing import JAX, assert_same, on_both

from jaxdev.graphs.program import EagerGraphWarning

S = torch.special


pytestmark = pytest.mark.usefixtures("no_fallback")  # tests/conftest.py


# name -> (shifted; the degree above which CPU switches to a closed form inside the interval, None
# when it never does; whether CPU's result is undefined at x = NaN, n >= 2: its loop stops before the
# first step and returns a variable it never initialised).
POLYNOMIALS = {
    "chebyshev_polynomial_t": (False, 6, False),
    "chebyshev_polynomial_u": (False, 8, True),
    "chebyshev_polynomial_v": (False, 8, True),
    "chebyshev_polynomial_w": (False, 8, True),
    "shifted_chebyshev_polynomial_t": (True, 6, True),
    "shifted_chebyshev_polynomial_u": (True, 6, True),
    "shifted_chebyshev_polynomial_v": (True, 6, True),
    "shifted_chebyshev_polynomial_w": (True, 4, True),
    "hermite_polynomial_h": (False, None, False),
    "hermite_polynomial_he": (False, None, False),
    "laguerre_polynomial_l": (False, None, True),
    "legendre_polynomial_p": (False, None, True),
}

NAN, INF = float("nan"), float("inf")
XS = [0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 0.3, 0.25, 0.75, 0.1, 0.9, 0.999, -0.999, 1e-8, 1 - 1e-7, 0.99999994]
XS += [1.0001, -1.0001, 1.5, -1.5, 2.0, -3.0, 10.0, -7.25, 1e3, INF, -INF, NAN]
NS = list(range(-3, 33)) + [40, 50, 64, 100, 127, 128, 129, 200, 300, 511, 512, 513]
NS += [NAN, INF, -INF, 1e30, -1e30, 2**63, -(2**63), 2.5, 7.9, -0.5, 0.99]


def _grid(dtype):
    x = torch.tensor(XS, dtype=dtype)[:, None].expand(len(XS), len(NS)).contiguous()
    n = torch.tensor(NS, dtype=dtype)[None, :].expand(len(XS), len(NS)).contiguous()
    return x, n


def _close(actual, expected, tol):
    """Per element: both NaN, equal, or within tol (infinities must be equal)."""
    a = actual.cpu()
    both_nan = a.isnan() & expected.isnan()
    err = (a - expected).abs()
    ok = both_nan | (a == expected) | (expected.isfinite() & (err <= tol))
    return ok


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["float32", "float64"])
@pytest.mark.parametrize("name", list(POLYNOMIALS))
def test_values_like_cpu(name, dtype):
    """A grid of x and n against CPU: where CPU runs its recurrence or returns a special value the
    result is the same to a few ulps (it is bit-equal on x86 with XLA's CPU backend); where CPU
    uses its closed form (cos(n acos x) and kin), libm's acos error, amplified by n, is allowed."""
    shifted, threshold, undefined_at_nan = POLYNOMIALS[name]
    fn = getattr(S, name)
    x, n = _grid(dtype)
    expected = fn(x, n)
    actual = fn(x.to(JAX), n.to(JAX))
    assert actual.device.type == "jax" and actual.dtype == expected.dtype and actual.shape == expected.shape

    eps = torch.finfo(dtype).eps
    degree = n.nan_to_num(0, 0, 0).clamp(-1, 1e4)
    tol = 8 * eps * expected.abs().nan_to_num(0, 0, 0)
    if threshold is not None:
        y = 2 * x - 1 if shifted else x
        closed = (degree > threshold) & (y.abs() < 1)
        # acos loses its relative accuracy near the interval's ends: 1 / sin(acos y) amplifies it.
        edge = (1 - y * y).clamp_min(eps).sqrt()
        tol = torch.where(closed, tol + 64 * eps * (degree + 1) ** 2 / edge, tol)
    else:
        # Recurrences without a closed form accumulate an ulp or so per step.
        tol = tol * (1 + degree.clamp_min(0))
    undefined = x.isnan() & (n >= 2) & (n < 2**63) if undefined_at_nan else torch.zeros_like(x, dtype=torch.bool)
    ok = _close(actual, expected, tol) | undefined
    # Zeros keep CPU's sign (T_1(-0) = -0, the special values are +0).
    got = actual.cpu()
    ok &= ~((got == 0) & (expected == 0) & (got.signbit() != expected.signbit()))
    bad = (~ok).nonzero().tolist()
    assert not bad, [(XS[i], NS[j], expected[i, j].item(), actual[i, j].item()) for i, j in bad[:8]]


@pytest.mark.parametrize("name", [k for k, v in POLYNOMIALS.items() if v[2]])
def test_nan_x_where_cpu_is_undefined(name):
    """x = NaN with n >= 2: CPU's loop never runs and returns an uninitialised variable (whatever
    was in the register: 0 or NaN, depending on the neighbouring elements); the device gives NaN,
    the value the recurrence carries. n < 2 is defined and matches CPU."""
    fn = getattr(S, name)
    n = torch.tensor([-2.0, 0.0, 1.0, 2.0, 3.0, 9.0, 30.0])
    got = fn(torch.full((7,), NAN, device=JAX), n.to(JAX)).cpu()
    assert_same(got[:3].to(JAX), fn(torch.full((3,), NAN), n[:3]))
    assert got[3:].isnan().all(), got


@pytest.mark.parametrize("name", list(POLYNOMIALS))
def test_recurrence_is_exact_outside_closed_forms(name):
    """|x| > 1 (no closed form), ordinary degrees: the recurrence, with CPU's fused multiply-add
    and a true division (XLA turns division by a broadcast scalar into a reciprocal multiply),
    matches CPU to the ulp."""
    fn = getattr(S, name)
    x = torch.tensor([1.25, -1.75, 2.5, -3.5, 1.1], dtype=torch.float64)[:, None]
    n = torch.arange(0, 25, dtype=torch.float64)
    for dtype in (torch.float32, torch.float64):
        expected = fn(x.to(dtype), n.to(dtype))
        ulps = 4 * torch.finfo(dtype).eps * expected.abs()
        actual = fn(x.to(dtype).to(JAX), n.to(dtype).to(JAX)).cpu()
        assert actual.dtype == dtype
        assert ((actual - expected).abs() <= ulps).all() or torch.equal(actual, expected)


def _small_ints(dtype):
    if dtype == torch.bool:
        return torch.tensor([True, False, True, False, True, False])
    values = [0, 1, 2, 3, 5, 7, 9, 12] if not dtype.is_signed else [-3, -1, 0, 1, 2, 5, 9, 12]
    return torch.tensor(values, dtype=dtype)


INT_DTYPES = [torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64]
INT_DTYPES += [torch.uint16, torch.uint32, torch.uint64]


@pytest.mark.parametrize("dtype", INT_DTYPES, ids=str)
@pytest.mark.parametrize("name", list(POLYNOMIALS))
def test_integer_and_bool_inputs(name, dtype):
    """Integers and bool compute in the default float dtype and return it, as CPU does."""
    fn = getattr(S, name)
    a = _small_ints(dtype)
    on_both(lambda d: fn(a.to(d)[:, None], a.to(d)[None, :]), rtol=1e-5, atol=1e-4)
    # An integer degree with a float x: x's dtype; float64 x and int n: float64.
    on_both(lambda d: fn(torch.linspace(-1.5, 1.5, 7, device=d)[:, None], a.to(d)), rtol=1e-5, atol=1e-4)
    on_both(lambda d: fn(a.to(d)[:, None], torch.tensor([0.0, 3.0, 11.0], dtype=torch.float64, device=d)), rtol=1e-12)


def test_mixed_dtypes_promote_like_cpu():
    f = S.chebyshev_polynomial_t
    x32 = torch.linspace(-2, 2, 9)
    n64 = torch.tensor([0.0, 1.0, 5.0, 9.0], dtype=torch.float64)
    on_both(lambda d: f(x32.to(d)[:, None], n64.to(d)), rtol=1e-12)
    on_both(lambda d: f(x32.to(d)[:, None], torch.tensor([3, 8], device=d)), rtol=1e-6)
    # Unsigned 16/32/64-bit types do not promote with each other: CPU's RuntimeError.
    u64, u32 = torch.tensor([1, 2], dtype=torch.uint64), torch.tensor([1, 2], dtype=torch.uint32)
    on_both(lambda d: f(u64.to(d), u32.to(d)), match="Promotion for uint16, uint32, uint64 types is not supported")


def test_degree_is_cast_through_the_compute_dtype():
    """CPU casts n to the common float dtype before truncating it to int64: in float32 the odd
    degree 2**24 + 1 becomes the even 2**24, so T(-1, n) is +1; float64 keeps it odd."""
    n = torch.tensor([2**24 + 1, 2**53 + 1, 2**62, 2**63 - 1], dtype=torch.int64)
    for name in ("chebyshev_polynomial_t", "chebyshev_polynomial_u", "chebyshev_polynomial_v", "legendre_polynomial_p"):
        fn = getattr(S, name)
        for x in (torch.tensor([-1.0]), torch.tensor([-1.0], dtype=torch.float64)):
            on_both(lambda d, fn=fn, x=x: fn(x.to(d), n.to(d)))


@pytest.mark.parametrize("name", list(POLYNOMIALS))
def test_scalar_overloads(name):
    fn = getattr(S, name)
    n = torch.tensor([-1, 0, 1, 2, 3, 7, 10, 15])
    x = torch.tensor([-1.5, -1.0, -0.3, 0.0, 0.2, 0.5, 1.0, 2.0])
    for scalar_x in (0.3, -1.0, 2, 0, True, 1.5):
        on_both(lambda d, s=scalar_x: fn(s, n.to(d)), rtol=1e-5, atol=1e-5)
        on_both(lambda d, s=scalar_x: fn(s, n.to(d).double()), rtol=1e-12, atol=1e-12)
    for scalar_n in (0, 1, 3, 7, 10, -2, 2.5, 9.99):
        on_both(lambda d, s=scalar_n: fn(x.to(d), s), rtol=1e-5, atol=1e-5)
        on_both(lambda d, s=scalar_n: fn(x.to(d).double(), s), rtol=1e-12, atol=1e-12)
        on_both(lambda d, s=scalar_n: fn(torch.tensor([0, 1, 2, 3], device=d), s), rtol=1e-5, atol=1e-5)
    # A 0-dim CPU degree next to a jax x is taken as a scalar, as CUDA does.
    got = fn(x.to(JAX), torch.tensor(5))
    assert_same(got, fn(x, torch.tensor(5)), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("name", list(POLYNOMIALS))
def test_out_overloads(name):
    op = getattr(torch.ops.aten, "special_" + name)
    x = torch.tensor([-1.5, -1.0, -0.3, 0.0, 0.2, 0.5, 1.0, 2.0])
    n = torch.tensor([-1.0, 0.0, 1.0, 2.0, 3.0, 7.0, 10.0, 15.0])

    def run(d, overload, *args, out_dtype=torch.float32, out_shape=(8,)):
        out = torch.empty(out_shape, dtype=out_dtype, device=d)
        result = overload(*args, out=out)
        assert result is out
        return out

    on_both(lambda d: run(d, op.out, x.to(d), n.to(d)), rtol=1e-5, atol=1e-5)
    on_both(lambda d: run(d, op.out, x.to(d), n.to(d), out_dtype=torch.float64), rtol=1e-5, atol=1e-5)
    on_both(lambda d: run(d, op.out, x.to(d), n.to(d), out_shape=(0,)), rtol=1e-5, atol=1e-5)
    on_both(lambda d: run(d, op.x_scalar_out, 0.5, n.to(d)), rtol=1e-5, atol=1e-5)
    on_both(lambda d: run(d, op.n_scalar_out, x.to(d), 4), rtol=1e-5, atol=1e-5)
    # A float result cannot go into an integer out=: CPU's RuntimeError.
    on_both(lambda d: run(d, op.out, x.to(d), n.to(d), out_dtype=torch.int64), match="can't be cast")
    # Writing through a strided out= reaches the base.
    base = torch.zeros(16, device=JAX)
    op.out(x.to(JAX), n.to(JAX), out=base[::2])
    expected = torch.zeros(16)
    op.out(x, n, out=expected[::2])
    assert_same(base, expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.complex64], ids=str)
def test_unsupported_dtypes_raise_like_cpu(dtype):
    for name in POLYNOMIALS:
        fn = getattr(S, name)
        on_both(
            lambda d, fn=fn: fn(torch.ones(3, dtype=dtype, device=d), torch.ones(3, device=d)),
            match="not implemented for",
        )
        on_both(lambda d, fn=fn: fn(torch.ones(3, dtype=dtype, device=d), 2), match=f'"{name}_cpu" not implemented for')


def test_broadcasting_and_empty():
    x = torch.linspace(-1.2, 1.2, 6)
    for name in POLYNOMIALS:
        fn = getattr(S, name)
        on_both(
            lambda d, fn=fn: fn(x.to(d)[:, None, None], torch.arange(4.0, device=d)[None, :, None]),
            rtol=1e-5,
            atol=1e-5,
        )
        on_both(lambda d, fn=fn: fn(torch.empty(0, 3, device=d), torch.ones(3, device=d)))
        on_both(lambda d, fn=fn: fn(torch.tensor(0.4, device=d), torch.tensor(12.0, device=d)), rtol=1e-5, atol=1e-5)


def test_huge_degree_stops_where_cpu_does():
    """A huge n with |x| > 1 overflows to inf within a few hundred steps and the next step is NaN,
    where CPU's loop stops; the device loop stops there too rather than counting to n."""
    n = torch.tensor([10.0**9, 10.0**12, 3.0, 4.0])
    for name in ("chebyshev_polynomial_t", "chebyshev_polynomial_u", "shifted_chebyshev_polynomial_w"):
        fn = getattr(S, name)
        on_both(lambda d, fn=fn: fn(torch.tensor([2.0, -3.0, 0.5, 1.5], device=d), n.to(d)), rtol=1e-5)
    # Laguerre at x < 0 grows without bound and overflows too.
    on_both(lambda d: S.laguerre_polynomial_l(torch.tensor([-50.0, -80.0], device=d), torch.full((2,), 1e9, device=d)))


def test_hermite_limits():
    """CPU returns NaN beyond degree 128 (float32) / 512 (float64) without evaluating; the
    recurrence would overflow to NaN there anyway, but a degree of a million must not take a
    million steps."""
    for name in ("hermite_polynomial_h", "hermite_polynomial_he"):
        fn = getattr(S, name)
        for dtype, limit in ((torch.float32, 128), (torch.float64, 512)):
            n = torch.tensor([limit - 1, limit, limit + 1, 10**6], dtype=dtype)
            x = torch.tensor([0.5, -0.25, 0.0, 1.0], dtype=dtype)
            got = on_both(
                lambda d, fn=fn, x=x, n=n: fn(x.to(d), n.to(d)), rtol=1e-6 if dtype == torch.float32 else 1e-13
            )
            assert math.isnan(got[2].item()) and math.isnan(got[3].item())


@pytest.mark.parametrize("name", list(POLYNOMIALS))
def test_compiled_graph_traces(name):
    """The recurrence's loop bound comes from the device, so the kernel traces inside a compiled
    program: the whole graph is one XLA program (no op-by-op fallback) and matches eager CPU."""
    fn = getattr(S, name)

    def f(x, n):
        return fn(x * 1.0, n) + fn(x, 3)

    torch._dynamo.reset()
    x = torch.tensor([-1.5, -1.0, -0.3, 0.0, 0.2, 0.5, 1.0, 2.0])
    n = torch.tensor([-1.0, 0.0, 1.0, 2.0, 3.0, 7.0, 12.0, 30.0])
    with warnings.catch_warnings():
        warnings.simplefilter("error", EagerGraphWarning)
        got = torch.compile(f, backend="jax", fullgraph=True)(x.to(JAX), n.to(JAX))
    torch._dynamo.reset()
    assert_same(got, f(x, n), rtol=1e-5, atol=1e-4)
