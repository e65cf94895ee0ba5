"""Complex reciprocal, rsqrt, sigmoid, expm1, exp2 and log1p as CPU's kernels compute them: c10's complex
arithmetic and formulas over the C library's exp, log and sqrt, special values (infinite, NaN and
zero parts) included.

* reciprocal is c10::complex's division 1 / z (Smith's: the smaller part over the larger, and a zero
  divisor giving inf + i NaN). XLA's division gave 0 for 1 / (inf + inf i), where the ratio of the
  infinities makes CPU's NaN + i NaN. Smith's here is CPU's bit for bit (200,000 values of each
  complex dtype, 1e-8..1e8: all equal, XLA's 74 %), so it replaces XLA's outright.
* rsqrt is 1 / csqrt(z) by that division; sigmoid 1 / (1 + cexp(-z)); expm1 c10's
  expm1(x) cos y - 2 sin^2(y / 2) + i e^x sin y; log1p c10's (after numpy). For these the computed
  values stay where z's parts are finite and non-zero (CPU's formulas agree with XLA's on 13-95 % of
  such values but would lose 0.3-0.5 % of the ones they match), and the special ones are CPU's, stated
  in closed form: a few selects, and for rsqrt one real sqrt and division.
* exp2 is cexp(ln 2 x + i ln 2 y), each part scaled alone (XLA's complex product by ln 2 + 0i made
  0 * inf = NaN parts): the same bits as XLA's exp2 for finite parts.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np

from jaxdev.ops.kit import complex_sqrt, cpu_numerics
from jaxdev.ops.kit import transcendentals as tm
from jaxdev.ops.kit import transcendentals_complex as tc
from jaxdev.ops.kit.division import divide


def _plus_zero(v):
    """v + 0 as IEEE adds it (-0 becomes +0): XLA's simplifier folds a literal v + 0 to v."""
    return jnp.where(v == 0, jnp.zeros_like(v), v)


def reciprocal(z):
    """1 / z as c10::complex's operator/ computes it (Smith's, numpy's algorithm) with 1 + 0i for the
    dividend: the ratio of the smaller part to the larger, and a zero divisor giving inf + i NaN."""
    c, d = z.real, z.imag
    abs_c, abs_d = jnp.abs(c), jnp.abs(d)
    wide = abs_c >= abs_d  # False beside a NaN, as C's comparison
    rat = jnp.where(wide, divide(d, c), divide(c, d))  # IEEE's quotients where the platform's are not
    scl = divide(jnp.ones_like(c), jnp.where(wide, c + d * rat, d + c * rat))
    # wide: ((1 + 0 rat) scl, (0 - rat) scl); narrow: ((rat + 0) scl, (0 rat - 1) scl)
    re = jnp.where(wide, scl, _plus_zero(rat) * scl)
    im = jnp.where(wide, _plus_zero(-rat) * scl, -scl)
    zero = (abs_c == 0) & (abs_d == 0)  # 1 / |c| and 0 / |d|
    nan = jnp.full_like(c, jnp.nan)
    return jax.lax.complex(jnp.where(zero, jnp.full_like(c, jnp.inf), re), jnp.where(zero, nan, im))


def rsqrt(z):
    """CPU's 1 / csqrt(z): XLA's rsqrt for finite non-zero parts; where a part is zero, csqrt is
    (sqrt x, +-0), (+0, +-sqrt(-x)) or (r, +-r) with r = sqrt(|y| / 2) (glibc), and its reciprocal
    by Smith's division (1 / sqrt x + 0i, +-0 -+ i / sqrt(-x), (1 -+ i) / 2r); inf + i NaN at 0."""
    w = reciprocal(complex_sqrt.complex_sqrt(z)) if tc.own(z) else jax.lax.rsqrt(z)
    x, y = z.real, z.imag
    zero_x, zero_y = x == 0, y == 0
    t = cpu_numerics.sqrt(jnp.where(zero_x, jnp.abs(y) * 0.5, jnp.abs(x)))  # IEEE's where the platform's is not
    inv = divide(jnp.ones_like(t), jnp.where(zero_x, t + t, t))
    positive = zero_x | (x > 0)
    signed_zero = jnp.copysign(jnp.zeros_like(y), y)
    re = jnp.where(positive, inv, signed_zero)
    im = jnp.where(zero_y & (x > 0), jnp.zeros_like(y), -jnp.copysign(inv, y))
    nan = jnp.full_like(x, jnp.nan)
    # infinite and NaN parts: csqrt is (+inf, +-0) at x = +inf, (+0, +-inf) at x = -inf, each with a
    # finite y, whose reciprocals are 0 + 0i and +-0 -+ 0i; inf +- inf i and NaNs give NaN + i NaN
    re = jnp.where(jnp.isposinf(x), jnp.zeros_like(x), jnp.where(jnp.isneginf(x), signed_zero, re))
    im = jnp.where(jnp.isposinf(x), jnp.zeros_like(x), jnp.where(jnp.isneginf(x), -signed_zero, im))
    edge = zero_x | zero_y | jnp.isinf(x)
    out = jnp.where(edge, jax.lax.complex(re, im), w)
    both_zero = zero_x & zero_y
    out = jnp.where(both_zero, jax.lax.complex(jnp.full_like(x, jnp.inf), nan), out)
    unanswered = jnp.isnan(x) | ~jnp.isfinite(y)
    return jnp.where(unanswered, jax.lax.complex(nan, nan), out)


def sigmoid(z):
    """CPU's 1 / (1 + cexp(-z)) (Smith's division): XLA's for finite parts short of exp's overflow; 1 + 0i
    at x = +inf (cexp is a zero there, whatever y); 0 + 0i at -inf +- 0i (1 / (inf + 0i)); NaN + i NaN for
    every other infinite or NaN part (an infinite divisor beside a non-zero part, or NaNs); and past
    the overflow, _overflowed's."""
    # XLA's, but for complex64 where jaxdev's functions are chosen (a TPU): 1 / (1 + exp(-z)) on them
    w = reciprocal(1 + tc.exp(-z)) if tc.own(z) else tm.sigmoid(z)
    x, y = z.real, z.imag
    zero, one, nan = jnp.zeros_like(x), jnp.ones_like(x), jnp.full_like(x, jnp.nan)
    finite = jnp.isfinite(x) & jnp.isfinite(y)
    out = jnp.where(finite, _overflowed(x, y, w), jax.lax.complex(nan, nan))
    out = jnp.where(jnp.isneginf(x) & (y == 0), jax.lax.complex(zero, zero), out)
    return jnp.where(jnp.isposinf(x), jax.lax.complex(one, zero), out)


def _overflowed(x, y, w):
    """sigmoid(x + iy) where e^-x overflows beside a non-zero y (XLA's w elsewhere): glibc's cexp(-z)
    has parts e^-x cos y and -e^-x sin y, each infinite or not (scaled so as to be finite while it
    can); both infinite give NaN + i NaN, one infinite part p +-0 -+ 0i signed as p (Smith's division),
    neither XLA's (then a zero, as CPU's subnormal result flushed)."""
    finite_exp = _EXP_FINITE[x.dtype]
    past = (-x > finite_exp) & (y != 0)
    # |p| = |t| e^(-x - finite_exp) e^finite_exp > max: |t| e^(-x - finite_exp) > max / e^finite_exp
    scale = tm.exp(jnp.minimum(-x - finite_exp, finite_exp))
    limit = jnp.asarray(_MAX_OVER_EXP[x.dtype], x.dtype)
    cos_y, minus_sin_y = tm.cos(y), -tm.sin(y)
    over_re = jnp.abs(cos_y) * scale > limit
    over_im = jnp.abs(minus_sin_y) * scale > limit
    zero = jnp.zeros_like(x)
    re_zero = jnp.copysign(zero, cos_y)  # 1 / (inf + i finite): both parts signed as the inf
    im_zero = jnp.copysign(zero, minus_sin_y)  # 1 / (finite + i inf): +-0 -+ 0i
    nan = jnp.full_like(x, jnp.nan)
    re = jnp.where(over_re & over_im, nan, jnp.where(over_re, re_zero, im_zero))
    im = jnp.where(over_re & over_im, nan, jnp.where(over_re, re_zero, -im_zero))
    return jnp.where(past & (over_re | over_im), jax.lax.complex(re, im), w)


# the largest x whose exp does not overflow: float32's and float64's (glibc's expf and exp, as CPU's
# complex expm1 reads them: found on CPU)
_EXP_FINITE = {
    np.dtype(np.float32): float.fromhex("0x1.62e42ep+6"),
    np.dtype(np.float64): float.fromhex("0x1.62e42fefa39efp+9"),
}
# max / e^that: |t| e^u past it overflows where |t| e^(u - that) exceeds this
_MAX_OVER_EXP = {t: float(np.finfo(t).max) / math.exp(x) for t, x in _EXP_FINITE.items()}


def _expm1_c10(z):
    """c10's formula on jaxdev's float32 functions (a TPU's XLA complex expm1 reaches its own exp, sin
    and cos): finite parts only matter, expm1's selects replace the rest."""
    x, y = z.real, z.imag
    a = tm.sin(y * 0.5)
    return jax.lax.complex(tm.expm1(x) * tm.cos(y) - 2 * a * a, tm.exp(x) * tm.sin(y))


def expm1(z):
    """c10's expm1(x) cos y - 2 sin^2(y / 2) + i e^x sin y: XLA's where y is finite and non-zero; at
    y = +-0 expm1(x) (its zero's sign kept) + i e^x (+-0), a NaN where e^x overflows or x is NaN;
    an infinite or NaN y gives NaN + i NaN, as any NaN x."""
    w = _expm1_c10(z) if tc.own(z) else tm.expm1(z)  # XLA's but where jaxdev's functions are chosen
    x, y = z.real, z.imag
    nan = jnp.full_like(x, jnp.nan)
    zero_y = y == 0
    # expm1(+-0) cos y - 2 sin^2(y / 2) is x itself where the square is zero (y = +-0, or a tiny y's
    # underflowed): XLA's gave +0
    re = jnp.where((x == 0) & (zero_y | (w.real == 0)), x, w.real)
    im = jnp.where(zero_y, jnp.where(x > _EXP_FINITE[x.dtype], nan, y), w.imag)
    unanswered = jnp.isnan(x) | ~jnp.isfinite(y)
    return jax.lax.complex(jnp.where(unanswered, nan, re), jnp.where(unanswered, nan, im))


def exp2(z):
    """cexp(ln 2 x + i ln 2 y): XLA's exp of the scaled parts, and glibc's cexp where XLA's differs: an
    infinite x beside an infinite or NaN y (+inf + i NaN, +0 + i copysign(0, y)), y = +-0 (x + i y's
    zero). complex_c99.exp's rules, applied without its half-plane reduction, which doubles its time."""
    ln2 = jnp.asarray(math.log(2), z.real.dtype)
    x, y = ln2 * z.real, ln2 * z.imag
    w = tc.exp(jax.lax.complex(x, y))  # XLA's, or complex64 on jaxdev's functions where those are chosen
    zero, inf, nan = jnp.zeros_like(x), jnp.full_like(x, jnp.inf), jnp.full_like(x, jnp.nan)
    edge = jnp.isinf(x) & ~jnp.isfinite(y)
    out = jax.lax.complex(jnp.where(x > 0, inf, zero), jnp.where(x > 0, nan, jnp.copysign(zero, y)))
    w = jax.lax.complex(w.real, jnp.where(y == 0, y, w.imag))  # XLA's exp gives +0 for y = -0 too
    return jnp.where(edge, out, w)


def log1p(z):
    """c10's log1p (CPU's, after numpy): u = 1 + z; z itself where u == 1; log u where u - 1 == z
    exactly; else log u * (z / (u - 1)). transcendentals_complex.log1p's values, and where they part:
    z at u == 1 (x + 1 == 1 beside y = +-0: -0 + 0i stays -0 + 0i); log u's +0 real part for
    x = +-0 beside a y whose log|u| underflows (log1p(-0 - 1e-30i) is 0 - 1e-30i: u - 1 == z, -0 == +0);
    NaN + i NaN for an infinite y beside a finite x that 1 + x - 1 does not give back exactly
    ((x + inf i) / (x' + inf i) is NaN), which u - 1 == z sends through the product."""
    w = tc.log1p(z)
    x, y = z.real, z.imag
    re = jnp.where((x == 0) & (y != 0) & (w.real == 0), jnp.zeros_like(x), w.real)
    w = jax.lax.complex(re, w.imag)
    nan = jnp.full_like(x, jnp.nan)
    u = cpu_numerics.opaque(x + 1)  # XLA's simplifier folds (x + 1) - 1 to x
    inexact = jnp.isinf(y) & jnp.isfinite(x) & (u - 1 != x)
    w = jnp.where(inexact, jax.lax.complex(nan, nan), w)
    return jnp.where((u == 1) & (y == 0), z, w)


def for_complex(complex_fn, real_fn):
    """complex_fn (complex only: one of these, or complex_trig_specials') for a complex array, real_fn
    for the rest; named as real_fn, the op's function."""

    def run(x):
        x = jnp.asarray(x)
        return complex_fn(x) if jnp.iscomplexobj(x) else real_fn(x)

    run.__name__ = run.__qualname__ = real_fn.__name__
    return run
