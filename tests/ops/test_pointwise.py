"""jaxdev/ops/pointwise.py: unary elementwise ops against CPU."""

from __future__ import annotations

import math

import pytest
import torch
from closeness import three_way
from jaxdev_testing import JAX, assert_same, on_both

INF, NAN = float("inf"), float("nan")


@pytest.mark.parametrize("dtype", [torch.complex64, torch.complex128])
def test_complex_abs_follows_hypot_at_infinities(dtype):
    """|inf + nan j| is inf on CPU (std::abs, C99's hypot); XLA's complex abs gave NaN (found by OpInfo's
    reference inputs). Large parts stay finite without overflow, tiny ones without underflow."""
    values = [complex(INF, NAN), complex(NAN, -INF), complex(-INF, 0), complex(NAN, 1), complex(3e38, 3e38)]
    values += [complex(1e-30, 1e-30), complex(1e38, 0), complex(-2, 0)]
    z = torch.tensor(values, dtype=dtype)
    assert_same(z.to(JAX).abs(), z.abs())
    assert_same(torch.abs(z.to(JAX), out=torch.empty(0, dtype=dtype.to_real(), device=JAX)), z.abs())


_EXTREMES = [0.0, -0.0, 0.5, -2.0, 1.0, 1e-30, -1e30, INF, -INF, NAN]
_BRANCHED = ["sqrt", "asin", "acos", "acosh", "atan", "asinh", "atanh", "log", "exp"]


def _same_with_signs(got, want):
    """Values equal (NaN where NaN), and the signs of zero and infinite parts equal (a NaN's sign is
    free, as C leaves it)."""
    close = torch.isclose(got, want, equal_nan=True)
    for part in ("real", "imag"):
        g, w = getattr(got, part), getattr(want, part)
        close &= w.isnan() | (torch.signbit(g) == torch.signbit(w))
    return close


@pytest.mark.parametrize("dtype", [torch.complex64, torch.complex128])
@pytest.mark.parametrize("name", _BRANCHED)
def test_complex_branch_cuts_and_special_values_as_cpu(name, dtype):
    """The sign of a zero part picks the side of a branch cut (sqrt(-2 - 0j) = -1.414j on CPU; jax gave
    +1.414j), and infinities and NaNs get CPU's C-library answers (jaxdev/ops/kit/complex_c99.py)."""
    z = torch.tensor([complex(a, b) for a in _EXTREMES for b in _EXTREMES], dtype=dtype)
    want = getattr(torch, name)(z)
    got = getattr(torch, name)(z.to(JAX)).cpu()
    bad = ~_same_with_signs(got, want)
    assert not bad.any(), [(z[i].item(), want[i].item(), got[i].item()) for i in bad.nonzero().flatten()[:4]]


@pytest.mark.parametrize("name", _BRANCHED)
def test_complex_functions_of_finite_values_as_cpu(name):
    g = torch.Generator().manual_seed(0)
    scale = torch.exp(torch.empty(4000, dtype=torch.float64).uniform_(-6, 6, generator=g))
    z = (
        torch.complex(
            torch.randn(4000, dtype=torch.float64, generator=g), torch.randn(4000, dtype=torch.float64, generator=g)
        )
        * scale
    )
    for dtype, rtol in ((torch.complex64, 2e-6), (torch.complex128, 1e-12)):
        x = z.to(dtype)
        # atol: below the smallest normal number XLA's CPU backend flushes to zero where CPU keeps
        # subnormals (exp of large negative parts); a known difference, not a wrong value
        atol = torch.finfo(dtype.to_real()).tiny
        got, want = getattr(torch, name)(x.to(JAX)).cpu(), getattr(torch, name)(x)
        # part by part: a complex difference of equal infinite parts is NaN
        torch.testing.assert_close(torch.view_as_real(got), torch.view_as_real(want), rtol=rtol, atol=atol)


@pytest.mark.usefixtures("no_fallback")
def test_atanh_complex64_backward_near_the_poles():
    # 1 / (1 - z^2) near z = +-1 amplifies the error of z^2 (pow(z, 2) on complex)
    gen = torch.Generator().manual_seed(4)
    z = torch.randn(20, 20, dtype=torch.complex64, generator=gen) * 3
    z[0, :10] = torch.tensor(
        [
            1 + 1e-3j,
            -1 + 2e-3j,
            0.999 + 0j,
            1.001 - 1e-3j,
            1e-3j + 1,
            0.998 + 1e-3j,
            -0.999j - 1,
            2j,
            1.0005 + 0.0002j,
            -1.0003 - 0.0001j,
        ]
    )
    three_way(torch.atanh, [z], torch.complex64, backward=True)
    three_way(torch.atanh, [z], torch.complex64, backward=False)


# --- erfinv: CPU's calc_erfinv (rational guess + two Newton steps), not JAX's polynomial ---


@pytest.mark.usefixtures("no_fallback")
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_erfinv_follows_cpu_newton_refinement(dtype):
    y = (torch.rand(20000, generator=torch.Generator().manual_seed(0), dtype=torch.float64) * 2 - 1).to(dtype)
    # float32 within 1.3e-6 relative (libm's erff rounding decides the last Newton step's ulp; JAX's
    # erfinv was 5.6e-6 away); float64: near +-1, where erf' is tiny, an ulp of erf moves the root
    rtol = 1.3e-6 if dtype == torch.float32 else 1e-11
    on_both(lambda d: torch.erfinv(y.to(d)), rtol=rtol)
    edges = torch.tensor([0.0, -0.0, 1.0, -1.0, 1.5, -2.0, float("nan"), 0.7, -0.7, 1e-30, 0.5], dtype=dtype)
    on_both(lambda d: torch.erfinv(edges.to(d)), rtol=rtol)
    g = torch.linspace(-0.99, 0.99, 1981, dtype=dtype)

    def grad(d):
        t = g.to(d).requires_grad_()
        return torch.autograd.grad(torch.erfinv(t).sum(), t)

    on_both(grad, rtol=rtol)


@pytest.mark.usefixtures("no_fallback")
@pytest.mark.parametrize("fn", [torch.tanh, torch.sigmoid, torch.nn.functional.tanhshrink])
def test_complex_gradients_take_the_conjugate_slope(fn):
    """PyTorch's complex gradients are conjugate derivatives: grad * conj(f'(x)) (was grad * f'(x))."""
    g = torch.Generator().manual_seed(0)
    x, seed = torch.randn(6, dtype=torch.complex128, generator=g), torch.randn(6, dtype=torch.complex128, generator=g)
    grads = []
    for device in ("cpu", "jax"):
        a = x.to(device, copy=True).requires_grad_()
        fn(a).backward(seed.to(device))
        grads.append(a.grad.cpu())
    torch.testing.assert_close(grads[1], grads[0])


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.int64, torch.int16])
def test_exp2_of_integers_is_an_exact_power_of_two(dtype):
    # XLA's exp(x * ln 2) gave 2^-3 = 0.12500000000000003 (float64) and was 4e-6 off in float32
    x = torch.arange(-100, 101).to(dtype) if dtype.is_floating_point else torch.arange(-100, 101, dtype=dtype)
    assert torch.equal(torch.exp2(x.to(JAX)).cpu(), torch.exp2(x))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_exp2_of_fractions_and_special_values_as_cpu(dtype):
    x = torch.cat(
        [torch.linspace(-120, 120, 2001, dtype=dtype), torch.tensor([INF, -INF, NAN, -0.0, 1e-30, 0.5], dtype=dtype)]
    )
    rtol = 2.5e-7 if dtype == torch.float32 else 5e-16  # within 2 ulps of CPU (XLA's: 34 and 44)
    torch.testing.assert_close(torch.exp2(x.to(JAX)).cpu(), torch.exp2(x), rtol=rtol, atol=0, equal_nan=True)


def _libm(fn, v: float) -> float:
    """fn(v) from the C library, infinite (with the result's sign) where it overflows."""
    try:
        return fn(v)
    except OverflowError:
        return math.copysign(math.inf, v) if fn is math.sinh else math.inf


@pytest.mark.parametrize("fn", [torch.sinh, torch.cosh])
@pytest.mark.parametrize("dtype", [torch.int32, torch.float32, torch.float64])
def test_sinh_cosh_within_two_ulps_of_cpu(fn, dtype):
    # XLA's float32 sinh/cosh were 24 ulps off (exp(|x| + log(1/2))): sinh(9) of an int32 tensor
    # gave 4051.5400, CPU 4051.5420; float64 ~10 ulps. Float32 stops at 88: past exp's overflow CPU's
    # vector lanes give inf (Sleef), its scalar ones and jax the finite value
    if dtype.is_floating_point:
        x = torch.cat(
            [
                torch.linspace(-88, 88, 1999, dtype=dtype),
                torch.tensor([0.0, -0.0, 0.3, -1e-5, INF, -INF, NAN], dtype=dtype),
            ]
        )
        if dtype == torch.float64:
            x = torch.cat([x, torch.tensor([709.9, -710.4, 711.0, 300.0])])
    else:
        x = torch.arange(-88, 89, dtype=dtype)
    rtol = 2.5e-7 if fn(x).dtype == torch.float32 else 5e-16
    actual, expected = fn(x.to(JAX)).cpu(), fn(x)
    if dtype == torch.float64:  # past ~709.78 torch's AVX2 kernel overflows (exp(x) / 2), its AVX512 one does not
        exact = torch.tensor([_libm(getattr(math, fn.__name__), v) for v in x.tolist()], dtype=torch.float64)
        expected = torch.where(expected.isinf() & exact.isfinite(), exact, expected)
    torch.testing.assert_close(actual, expected, rtol=rtol, atol=0, equal_nan=True)
    assert torch.equal(actual.signbit() | actual.isnan(), expected.signbit() | actual.isnan())


@pytest.mark.parametrize("fn", [torch.sign, torch.sgn])
@pytest.mark.parametrize(
    "dtype", [torch.float64, torch.float32, torch.float16, torch.bfloat16, torch.int8, torch.uint8]
)
def test_sign_of_nan_and_negative_zero_as_cpu(fn, dtype):
    # CPU's (0 < x) - (x < 0): sign(NaN) is 0 and sign(-0.0) is +0.0 (jnp.sign: NaN, -0.0)
    if dtype.is_floating_point:
        x = torch.tensor([NAN, -NAN, -0.0, 0.0, INF, -INF, -2.5, 3.0, 1e-30], dtype=dtype)
    else:
        x = torch.tensor([0, 1, 7, 100], dtype=dtype)
    got, want = fn(x.to(JAX)).cpu(), fn(x)
    assert torch.equal(got, want) and torch.equal(got.signbit(), want.signbit())
