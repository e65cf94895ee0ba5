"""float32 asin, acos, asinh, acosh, atanh and exp2 on jaxdev's own functions (transcendentals.py's exp,
log, log1p; transcendentals_atan.py's atan2; cpu_numerics.divide), for the kernels where those are
chosen (a TPU); elsewhere, and for other dtypes, XLA's (jnp's), so XLA's CPU backend keeps its programs.

Why. XLA's inverse trigonometric and hyperbolic functions are built on its own log, log1p, atan2 and
sqrt, which a TPU computes far from CPU's (its log 3,084 ulps, tanh 678); benchmarks/tpu_emulated_ulps.py
found asin, acos, asinh, acosh, atanh and exp2 (through jnp.ldexp's 2 ** e, XLA's pow) still reaching
them where every other part of the op was jaxdev's.

How (fdlibm's reductions, C's special values):
  asin x = atan2(x, sqrt((1 - x)(1 + x))), acos x = atan2(sqrt((1 - x)(1 + x)), x): 1 - x or 1 + x is
    exact where it is small (Sterbenz), so the root is accurate where the result hangs on it;
  asinh |x| = log1p(|x| + x^2 / (1 + sqrt(1 + x^2))) up to 2, log(2|x| + 1 / (sqrt(x^2 + 1) + |x|))
    up to 2^28, log|x| + log 2 past it; acosh x likewise (log1p(t + sqrt(2t + t^2)), t = x - 1 exact,
    up to 2); atanh |x| = log1p(2|x| + 2|x| |x| / (1 - |x|)) / 2 below 1/2, log1p(2|x| / (1 - |x|)) / 2
    from there; odd ones take x's sign last;
  exp2 x = 2^n exp(f log 2), n = round(x), f = x - n exact, f log 2 as an exact product plus a
    correction (integers give exact powers of two).
Measured here against torch's float32 (tests/ops/test_transcendentals_inverse.py).
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np

from jaxdev.ops.kit import complex_sqrt, cpu_numerics
from jaxdev.ops.kit import transcendentals as tm
from jaxdev.ops.kit import transcendentals_atan as ta
from jaxdev.ops.kit import transcendentals_complex as tc
from jaxdev.ops.kit import transcendentals_gamma as tg

_F = np.float32
_LN2 = _F(math.log(2))
_LN2_LO = _F(math.log(2) - float(_LN2))
_BIG = _F(2.0**28)


def _root_of_one_minus_square(x):
    """sqrt((1 - x)(1 + x)): NaN past |x| = 1; the root IEEE's where the platform's is not (a TPU's 2 ulps
    had asin and acos 3 ulps from CPU's)."""
    return cpu_numerics.sqrt((1 - x) * (1 + x))


def asin32(x):
    a = jnp.abs(x)
    return jnp.copysign(ta.atan2_32(a, _root_of_one_minus_square(a)), x)


def acos32(x):
    return ta.atan2_32(_root_of_one_minus_square(x), x)


def asinh32(x):
    a = jnp.abs(x)
    square = a * a
    small = tm.log1p(a + cpu_numerics.divide(square, 1 + cpu_numerics.sqrt(1 + square)))
    middle = tm.log(2 * a + cpu_numerics.divide(_F(1), cpu_numerics.sqrt(square + 1) + a))
    big = tm.log(a) + _LN2
    out = jnp.where(a > _BIG, big, jnp.where(a > 2, middle, small))
    return jnp.copysign(jnp.where(a < _F(2.0**-28), a, out), x)


def acosh32(x):
    t = x - 1
    small = tm.log1p(t + cpu_numerics.sqrt(2 * t + t * t))
    middle = tm.log(2 * x - cpu_numerics.divide(_F(1), x + cpu_numerics.sqrt(x * x - 1)))
    big = tm.log(x) + _LN2
    out = jnp.where(x > _BIG, big, jnp.where(x > 2, middle, small))
    return jnp.where(x < 1, _F(jnp.nan), out)


def atanh32(x):
    a = jnp.abs(x)
    twice = a + a
    small = tm.log1p(twice + cpu_numerics.divide(twice * a, 1 - a))
    large = tm.log1p(cpu_numerics.divide(twice, 1 - a))
    return jnp.copysign(_F(0.5) * jnp.where(a < 0.5, small, large), x)


def exp2_32(x):
    finite = jnp.isfinite(x)
    n = jnp.round(jnp.clip(jnp.where(finite, x, 0), -151, 129))
    f = jnp.where(finite, x - n, 0)  # exact: |f| <= 1/2
    t, t_err = tg.two_product(f, _LN2)
    e = tm.exp(t)
    out = tm.scaled(e + e * (t_err + f * _LN2_LO), n.astype(jnp.int32))
    out = jnp.where(x >= 128, _F(jnp.inf), jnp.where(x < -150, _F(0), out))
    return jnp.where(finite, out, jnp.where(jnp.isnan(x), x, jnp.where(x > 0, x, _F(0))))


# JAX's derivative rules, on these values
asin = tm.chosen(tm.with_jvp(asin32, lambda x, y, g: g / _root_of_one_minus_square(x)), jnp.arcsin)
acos = tm.chosen(tm.with_jvp(acos32, lambda x, y, g: -g / _root_of_one_minus_square(x)), jnp.arccos)
asinh = tm.chosen(tm.with_jvp(asinh32, lambda x, y, g: g / jnp.sqrt(x * x + 1)), jnp.arcsinh)
acosh = tm.chosen(tm.with_jvp(acosh32, lambda x, y, g: g / jnp.sqrt((x - 1) * (x + 1))), jnp.arccosh)
atanh = tm.chosen(tm.with_jvp(atanh32, lambda x, y, g: g / ((1 - x) * (1 + x))), jnp.arctanh)
exp2 = tm.chosen(tm.with_jvp(exp2_32, lambda x, y, g: g * y * _LN2), jnp.exp2)


_HALF_PI = np.float32(math.pi / 2)


def complex_atanh_first_quadrant(z):
    """catanh of a finite complex64 z with x, y >= 0 (complex_c99 moves z there and applies Annex G's
    special values), on jaxdev's float32 functions: real 1/4 log1p(4x / ((1 - x)^2 + y^2)), imaginary
    1/2 atan2(2y, (1 - x)(1 + x) - y^2); past |z| = 2^30, where the 1's no longer count, x / |z|^2
    (scaled by the larger part) and pi/2. For a TPU, where XLA's complex atanh reaches its own log."""
    x, y = jnp.real(z), jnp.imag(z)
    m = jnp.maximum(x, y)
    big = m > np.float32(2.0**30)
    safe_m = jnp.where(big, m, 1)
    xs, ys = cpu_numerics.divide(x, safe_m), cpu_numerics.divide(y, safe_m)
    real_big = cpu_numerics.divide(cpu_numerics.divide(xs, xs * xs + ys * ys), safe_m)
    xx, yy = jnp.where(big, 0, x), jnp.where(big, 0, y)
    den = (1 - xx) * (1 - xx) + yy * yy
    real = np.float32(0.25) * tm.log1p(cpu_numerics.divide(4 * xx, jnp.where(den == 0, 1, den)))
    # next to z = 1 the denominator underflows (1 + 1e-30j: y^2 is 0): its log as 2 log(max) + the rest
    near = den < np.float32(2.0**-60)
    u = jnp.abs(1 - xx)
    hi, lo = jnp.maximum(u, yy), jnp.minimum(u, yy)
    hi = jnp.where(near & (hi > 0), hi, 1)
    ratio = cpu_numerics.divide(lo, hi)
    log_den = 2 * tm.log(hi) + tm.log1p(ratio * ratio)
    real_near = np.float32(0.25) * (tm.log(jnp.where(near, 4 * xx, 1)) - log_den)
    real = jnp.where(near, real_near, real)
    imag = np.float32(0.5) * ta.atan2(2 * yy, (1 - xx) * (1 + xx) - yy * yy)
    return jax.lax.complex(jnp.where(big, real_big, real), jnp.where(big, _HALF_PI, imag))


_TINY = _F(2.0**-60)  # below it a square flushes (float32's normal range ends at 2^-126)
_UNFLUSHED = _F(2.0**64)  # and 1 / it: exact


def _asinh_real_part(x, y):
    """Re casinh(x + iy) for 0 <= x, y <= 2^30, as Hull, Fairgrieve and Tang's casin has it (its imaginary
    part): acosh A, A = (r + s) / 2 with r = |(y + 1) + ix|, s = |(y - 1) + ix|, as log1p(A - 1 +
    sqrt((A - 1)(A + 1))) below A = 3/2 with A - 1 taken without cancellation; x / sqrt(1 - y^2) where x^2
    flushes; the real asinh on the real axis. log|z + sqrt(z^2 + 1)| cancelled next to the imaginary
    axis: asinh(0.5j) had real part -1.3e-8 (CPU's 0), asinh(1e-5 + 0.3j) 3e-4 relative off."""
    r = cpu_numerics.sqrt((y + 1) * (y + 1) + x * x)
    d = jnp.abs(y - 1)
    both_tiny = jnp.maximum(d, x) < _TINY  # scaled by a power of two (exact) lest their squares flush
    scale = jnp.where(both_tiny, _UNFLUSHED, _F(1))
    s = cpu_numerics.sqrt((d * scale) * (d * scale) + (x * scale) * (x * scale)) * jnp.where(
        both_tiny, 1 / _UNFLUSHED, _F(1)
    )
    a = _F(0.5) * (r + s)
    square = x * x
    first = cpu_numerics.divide(square, r + y + 1)
    below = _F(0.5) * (first + cpu_numerics.divide(square, s + (1 - y)))  # A - 1 for y < 1
    above = _F(0.5) * (first + (s + (y - 1)))
    a_1 = jnp.where(y < 1, below, above)
    near = tm.log1p(a_1 + cpu_numerics.sqrt(a_1 * (a + 1)))
    far = tm.log(a + cpu_numerics.sqrt((a - 1) * (a + 1)))
    flushed = (x < _TINY) & (y < 1)
    tiny = cpu_numerics.divide(x, _root_of_one_minus_square(y))
    out = jnp.where(flushed, tiny, jnp.where(a < 1.5, near, far))
    return jnp.where(y == 0, asinh32(x), out)


def complex_asinh_first_quadrant(z):
    """casinh of a finite complex64 z with x, y >= 0 (complex_c99 moves z there and applies Annex G's
    special values), on jaxdev's functions: log(z + sqrt(z^2 + 1)), as log1p(z + z^2 / (1 + sqrt(z^2 + 1)))
    for |z| < 1/2, z^2 + 1's real part as (1 - y)(1 + y) + x^2 (no cancellation next to z = i), and
    log(2) + log(z) past |z| = 2^30; the real part below that as _asinh_real_part's. For a TPU, where
    XLA's complex asinh reaches its own log."""
    x, y = jnp.real(z), jnp.imag(z)
    m = jnp.maximum(x, y)
    big = m > np.float32(2.0**30)
    xs, ys = jnp.where(big, 0, x), jnp.where(big, 0, y)
    zs = jax.lax.complex(xs, ys)
    root = complex_sqrt.complex_sqrt(jax.lax.complex((1 - ys) * (1 + ys) + xs * xs, 2 * xs * ys))
    small = tc.log1p(zs + zs * zs / (1 + root))
    ordinary = tc.log(zs + root)
    far = tc.log(z) + _LN2
    near = jnp.where(m < 0.5, small, ordinary)
    near = jax.lax.complex(_asinh_real_part(xs, ys), jnp.imag(near))
    return jnp.where(big, far, near)
