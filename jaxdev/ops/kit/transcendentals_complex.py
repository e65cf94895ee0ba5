"""complex64 exp, log, sin, cos, sinh and cosh from jaxdev's float32 functions (transcendentals.py,
transcendentals_trig.py), where transcendentals.own() holds for float32 (a TPU): XLA's complex
functions are built on its real exp, log, sin and cos, which a TPU computes 40-3,000 ulps from CPU's
(complex64 sin was 2.8x OpInfo's tolerance off on the chip, logcumsumexp's complex path 5.8e-5
relative). Elsewhere, and for complex128, these are XLA's (jnp's), so the CPU backend's programs and
bits are unchanged. Real values go to transcendentals.py's functions.

The formulas are C99's (Annex G), as CPU's C library (cexpf, clogf, csinf ...) computes them:
exp(a + ib) = e^a (cos b + i sin b); log z = log|z| + i atan2(b, a), |z| never formed (log of the
larger part plus log1p of the ratio squared, or log1p(m^2 + n^2 - 1) / 2 near |z| = 1, its squares as exact pairs);
sinh(a + ib) = sinh a cos b + i cosh a sin b, cosh(a + ib) = cosh a cos b + i sinh a sin b,
sin z = -i sinh(iz), cos z = cosh(iz). A zero part multiplies nothing (exp(inf + 0i) = inf + 0i, not
inf + NaN i), and past exp's overflow e^a is applied in two halves. The special values that
complex_c99.py's rules fix for exp and log are fixed there, after these.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np

from jaxdev.ops.kit import transcendentals as tm
from jaxdev.ops.kit import transcendentals_atan as ta
from jaxdev.ops.kit import transcendentals_gamma as tg
from jaxdev.ops.kit import transcendentals_trig as trig
from jaxdev.ops.kit.division import divide


def own(z) -> bool:
    """Whether z's complex functions are these: complex64 where float32's are jaxdev's."""
    return jnp.dtype(getattr(z, "dtype", z)) == jnp.complex64 and tm.own(jnp.float32)


def _exp_times(a, cos_b, sin_b, b):
    """e^a (cos b, sin b), e^a in two halves where it alone overflows; a zero b gives (e^a, b)."""
    big = a > 88.0
    e = tm.exp(jnp.where(big, a / 2, a))
    re, im = e * cos_b, e * sin_b
    re, im = jnp.where(big, re * e, re), jnp.where(big, im * e, im)
    return jnp.where(b == 0, jnp.where(big, e * e, e), re), jnp.where(b == 0, b, im)


def _exp(z):
    a, b = z.real, z.imag
    s, c = trig.sin_cos32(b)
    re, im = _exp_times(a, c, s, b)
    return jax.lax.complex(re, im)


def _squares_minus_one(m, n):
    """m^2 + n^2 - 1 for m in (0.6, 1.41), n <= m, to ~2^-36 absolute (C's clog near |z| = 1: the
    log's real part there is this value's own size, 1e-3 and less, where m^2 and n^2 rounded would
    leave 2^-24 of 1): both squares as exact pairs (FMA-proof), the sums error-free."""
    m_hi, m_lo = tg.two_product(m, m)
    n_hi, n_lo = tg.two_product(n, n)
    d, d_err = trig.two_sum(m_hi, -1.0)
    s, e = trig.two_sum(d, n_hi)
    return s + (e + (d_err + (m_lo + n_lo)))


def _log(z):
    a, b = z.real, z.imag
    m, n = jnp.maximum(jnp.abs(a), jnp.abs(b)), jnp.minimum(jnp.abs(a), jnp.abs(b))
    safe_m = jnp.where(m == 0, 1, m)
    ratio = divide(n, safe_m)  # the chip's quotient by a divisor past ~2^115 was garbage
    far = tm.log(safe_m) + 0.5 * tm.log1p(ratio * ratio)
    near_one = 0.5 * tm.log1p(_squares_minus_one(m, n))
    modulus = jnp.where((m > 0.6) & (m < 1.41), near_one, far)
    modulus = jnp.where(m == 0, -jnp.inf, modulus)
    modulus = jnp.where(jnp.isinf(m), jnp.inf, modulus)  # an infinite part: inf, even beside a NaN
    modulus = jnp.where(jnp.isnan(a) | jnp.isnan(b), jnp.where(jnp.isinf(m), jnp.inf, jnp.nan), modulus)
    return jax.lax.complex(modulus.astype(jnp.float32), ta.atan2(b, a))


def _cosh_sinh(a):
    """(cosh a, sinh a) for real float32 a from one exp (sinh of |a| < 1 from expm1, within 2 ulps),
    e^|a| / 2 in two halves past exp's overflow; sinh keeps a zero's sign."""
    x = jnp.abs(a)
    e = tm.exp(jnp.minimum(x, 88.0))
    half = tm.exp(x / 2)
    big = x > 88.0
    cosh = jnp.where(big, (half / 2) * half, (e + 1 / e) / 2)
    u = tm.expm1(x)
    small = (u + u / (u + 1)) / 2
    sinh = jnp.where(x < 1, small, jnp.where(big, (half / 2) * half, (e - 1 / e) / 2))
    return cosh, jnp.where(a == 0, a, jnp.copysign(sinh, a))


def _sinh_cosh(z, cosine: bool):
    """sinh z (cosine False) or cosh z: their real and imaginary parts, a zero factor's product
    its own zero (C99: sinh(x + 0i) = sinh x + 0i, cosh(0 + iy) = cos y + 0i ...)."""
    a, b = z.real, z.imag
    cosh_a, sinh_a = _cosh_sinh(a)
    sin_b, cos_b = trig.sin_cos32(b)
    if cosine:  # sinh a sin b: an infinite a beside b = 0 gives that zero, signed as sinh a's
        re, im = cosh_a * cos_b, jnp.where(b == 0, jnp.where(jnp.signbit(a), -b, b), sinh_a * sin_b)
    else:
        re, im = sinh_a * cos_b, jnp.where(b == 0, b, cosh_a * sin_b)
    return jax.lax.complex(re, im)


def _i_times(z):
    return jax.lax.complex(-z.imag, z.real)


def _sinh(z):
    return _sinh_cosh(z, False)


def _cosh(z):
    return _sinh_cosh(z, True)


def _sin(z):
    """sin z = -i sinh(iz)."""
    w = _sinh(_i_times(z))
    return jax.lax.complex(w.imag, -w.real)


def _cos(z):
    """cos z = cosh(iz)."""
    return _cosh(_i_times(z))


def _chosen(ours, real, xla):
    def run(x):
        x = jnp.asarray(x)
        if not jnp.iscomplexobj(x):
            return real(x)
        return ours(x) if own(x) else xla(x)

    run.__name__ = run.__qualname__ = xla.__name__
    return run


exp = _chosen(_exp, tm.exp, jnp.exp)
log = _chosen(_log, tm.log, jnp.log)
sin = _chosen(_sin, tm.sin, jnp.sin)
cos = _chosen(_cos, tm.cos, jnp.cos)
sinh = _chosen(_sinh, jnp.sinh, jnp.sinh)
cosh = _chosen(_cosh, jnp.cosh, jnp.cosh)


def pow(base, exponent):  # the kit's name for it, as transcendentals_gamma.pow
    """base ** exponent: for complex64 where these functions are chosen, the C library's cpowf,
    exp(exponent * log(base)), on them (XLA's complex pow on a TPU reaches its own exp and log: 2.2e-4
    relative on the chip, 166x OpInfo's tolerance), a zero base as jnp.power has it; otherwise
    transcendentals_gamma.pow (jnp.power, or jaxdev's float32 pow)."""
    base, exponent = jnp.asarray(base), jnp.asarray(exponent)
    dt = jnp.result_type(base, exponent)
    if not (jnp.issubdtype(dt, jnp.complexfloating) and own(dt)):
        return tg.pow(base, exponent)
    base, exponent = base.astype(dt), exponent.astype(dt)
    return jnp.where(base == 0, jnp.power(base, exponent), _exp(exponent * _log(base)))


def log1p_c10(z):
    """c10's log1p for complex: angle atan2(y, 1 + x); modulus through log1p near 0. Where jaxdev's
    complex functions are chosen (complex64 on a TPU) log|1 + z| away from 0 is transcendentals_complex's
    log's real part, |1 + z| never formed: XLA's hypot is a division and a sqrt of the platform's."""
    x, y = jnp.real(z), jnp.imag(z)
    r = x * (2 + x) + y * y
    near = jnp.where(r == 0, x, 0.5 * tm.log1p(r))
    if own(z):
        w = log(jax.lax.complex(x + 1, y))  # its imaginary part is atan2(y, 1 + x)
        return jax.lax.complex(jnp.where(jnp.abs(z) < 0.5, near, w.real), w.imag)
    theta = ta.atan2(y, x + 1)
    real = jnp.where(jnp.abs(z) < 0.5, near, tm.log(jnp.hypot(x + 1, y)))
    return jax.lax.complex(real, theta)


def _log_over(ln_base):
    """c10's log2 / log10 of a complex: log(z) / log(base), each part divided."""

    def run(z):
        w = _log(z)
        return jax.lax.complex(divide(w.real, ln_base), divide(w.imag, ln_base))

    return run


log1p = _chosen(log1p_c10, tm.log1p, jnp.log1p)
log2 = _chosen(_log_over(np.float32(math.log(2))), tm.log2, jnp.log2)
log10 = _chosen(_log_over(np.float32(math.log(10))), tm.log10, jnp.log10)


def _tanh(z):
    """glibc's ctanhf for finite z: (sinh x cosh x + i sin y cos y) / (sinh^2 x + cos^2 y) on the own
    float32 functions; past |x| = 44 (where that would overflow) copysign(1, x) + i 4 sin y cos y
    e^(-2|x|); Annex G's +-1 + i0 for an infinite x and NaN + i0 at NaN + i0; other infinite or NaN
    parts jnp.tanh's."""
    x, y = z.real, z.imag
    s, c = trig.sin_cos32(jnp.where(jnp.isfinite(y), y, 0))
    big = jnp.abs(x) > 44
    cosh, sinh = _cosh_sinh(jnp.where(big, 0, x))
    den = sinh * sinh + c * c
    re = jnp.where(big, jnp.copysign(jnp.float32(1), x), divide(sinh * cosh, den))
    im = jnp.where(big, 4 * s * c * tm.exp(-2 * jnp.abs(x)), divide(s * c, den))
    finite = jnp.isfinite(x) & jnp.isfinite(y)
    # Annex G: tanh(+-inf + iy) = +-1 + i0 sin(2y) for finite y, tanh(NaN + i0) = NaN + i0
    re = jnp.where(jnp.isinf(x) & jnp.isfinite(y), jnp.copysign(jnp.float32(1), x), re)
    im = jnp.where(jnp.isinf(x) & jnp.isfinite(y), jnp.copysign(jnp.float32(0), s * c), im)
    im = jnp.where(jnp.isnan(x) & (y == 0), y, im)
    ours = finite | (jnp.isinf(x) & jnp.isfinite(y)) | (jnp.isnan(x) & (y == 0))
    re = jnp.where(jnp.isnan(x) & (y == 0), x, re)
    return jnp.where(ours, jax.lax.complex(re, im), jnp.tanh(z))


def _tan(z):
    """tan z = -i tanh(i z)."""
    w = _tanh(_i_times(z))
    return jax.lax.complex(w.imag, -w.real)


tanh = _chosen(_tanh, tm.tanh, jnp.tanh)
tan = _chosen(_tan, tm.tan, jnp.tan)
