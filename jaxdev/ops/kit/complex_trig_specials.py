"""Complex sin, cos, tan, sinh, cosh and tanh with CPU's special values: glibc's csin, ccos, ctan, csinh,
ccosh and ctanh, which CPU's kernels call (c10's std::sin on a complex is the C library's).

transcendentals_complex.py computes the values (XLA's functions, or jaxdev's own complex64 formulas
where those are chosen, a TPU). XLA's give NaN for most infinite or NaN parts where glibc has an
answer (tan(inf + 0i) is NaN + 0i, sinh(0 + inf i) is 0 + NaN i) and +0 for zeros glibc signs
(sinh(-0 + 1i) = -0 + 0.84i, tanh(1 - 0i) = 0.76 - 0i). Here glibc's branches are applied over those
values by class of z's parts (zero, finite, infinite, NaN): a few selects an element, and no further
function. Finite non-zero parts keep their values, bit for bit, as do glibc's branches for an
infinite part beside a finite non-zero one (copysign(inf, cos y) ...), which both formulas give.

Two zeros take their sign from a cosine or sine: sinh(+-0 + iy) = +-0 cos y + i sin y and
cosh(+-0 + iy) = cos y + i (+-0) sin y. XLA's sinh and cosh are exp(z + log 1/2) -+ exp(log 1/2 - z)
(chlo's decomposition): written out here with the same bits (tests/ops/test_complex_specials.py
holds them to jnp.sinh's and jnp.cosh's), so that the first exp's parts, e^(x - log 2) (cos y, sin y),
carry those signs. The own formulas get both zeros right, as do XLA's and the own sin and cos at
y = +-0 (glibc's sin(x +- 0i) = sin x +- 0 cos x i).
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp

from jaxdev.ops.kit import transcendentals as tm
from jaxdev.ops.kit import transcendentals_complex as tc
from jaxdev.ops.kit.complex_c10 import for_complex


def _full(like, value):
    return jnp.full_like(like, value)


def _sinh_parts(x, y, re, im, cos_carrier):
    """csinh's branches over (re, im), the computed sinh(x + iy); cos_carrier a value of cos y's sign
    (XLA's), or None where the computed re is signed at x = +-0 already (the own formulas)."""
    fx, fy, zero_y = jnp.isfinite(x), jnp.isfinite(y), y == 0
    nan, inf = _full(x, jnp.nan), _full(x, jnp.inf)
    finite = fx & fy
    if cos_carrier is not None:
        re = jnp.where(finite & (x == 0), x * cos_carrier, re)  # sinh(+-0) cos y: signed by both
    im = jnp.where(finite & zero_y, y, im)  # cosh x * (+-0)
    # a finite x beside an infinite or NaN y: +-0 + i NaN at x = +-0, else NaN + i NaN
    re = jnp.where(fx & ~fy, jnp.where(x == 0, x, nan), re)
    im = jnp.where(fx & ~fy, nan, im)
    # an infinite x: x + iy at y = +-0; +inf + i NaN beside an infinite or NaN y
    edge = jnp.isinf(x) & (zero_y | ~fy)
    re = jnp.where(edge, jnp.where(zero_y, x, inf), re)
    im = jnp.where(edge, jnp.where(zero_y, y, nan), im)
    # a NaN x: NaN +- 0i at y = +-0, else NaN + i NaN
    re = jnp.where(jnp.isnan(x), nan, re)
    return re, jnp.where(jnp.isnan(x), jnp.where(zero_y, y, nan), im)


def _cosh_parts(x, y, re, im, sin_carrier):
    """ccosh's branches over (re, im), the computed cosh(x + iy); sin_carrier a value of sin y's sign
    (XLA's), or None where the computed im is signed at x = +-0 already (the own formulas, and ccos's
    use of these, whose x = +-0 is XLA's sin and cos at y = +-0)."""
    fx, fy, zero_y = jnp.isfinite(x), jnp.isfinite(y), y == 0
    nan, inf = _full(x, jnp.nan), _full(x, jnp.inf)
    finite = fx & fy
    # sinh x sin y: at y = +-0 glibc's sine is y itself (x * y carries both signs), at x = +-0 sin y's
    if sin_carrier is not None:
        im = jnp.where(finite & (x == 0), x * sin_carrier, im)
    im = jnp.where(finite & zero_y, x * y, im)
    # a finite x beside an infinite or NaN y: NaN + 0i at x = +-0 (an unsigned +0), else NaN + i NaN
    re = jnp.where(fx & ~fy, nan, re)
    im = jnp.where(fx & ~fy, jnp.where(x == 0, jnp.zeros_like(x), nan), im)
    # an infinite x: +inf + i y sign(x) at y = +-0; +inf + i NaN beside an infinite or NaN y
    edge = jnp.isinf(x) & (zero_y | ~fy)
    re = jnp.where(edge, inf, re)
    im = jnp.where(edge, jnp.where(zero_y, jnp.where(jnp.signbit(x), -y, y), nan), im)
    re = jnp.where(jnp.isnan(x), nan, re)
    return re, jnp.where(jnp.isnan(x), jnp.where(zero_y, y, nan), im)


def _sin_parts(x, y, re, im):
    """csin's branches over (re, im), the computed sin(x + iy). glibc's csin is its own function, not
    -i csinh(iz): sin(inf + inf i) is NaN + inf i (csinh's identity would give NaN - inf i)."""
    fx, fy, zero_x = jnp.isfinite(x), jnp.isfinite(y), x == 0
    nan, inf = _full(x, jnp.nan), _full(x, jnp.inf)
    re = jnp.where(fx & fy & zero_x, x, re)  # cosh y * (+-0)
    # an infinite or NaN x beside a finite y: NaN +- 0i at y = +-0, else NaN + i NaN
    re = jnp.where(~fx & fy, nan, re)
    im = jnp.where(~fx & fy, jnp.where(y == 0, y, nan), im)
    # an infinite y: +-0 + iy at x = +-0; NaN + inf i beside an infinite or NaN x
    edge = jnp.isinf(y) & (zero_x | ~fx)
    re = jnp.where(edge, jnp.where(zero_x, x, nan), re)
    im = jnp.where(edge, jnp.where(zero_x, y, inf), im)
    # a NaN y: +-0 + i NaN at x = +-0, else NaN + i NaN
    re = jnp.where(jnp.isnan(y), jnp.where(zero_x, x, nan), re)
    return re, jnp.where(jnp.isnan(y), nan, im)


def _tanh_parts(x, y, re, im):
    """ctanh's branches over (re, im), the computed tanh(x + iy)."""
    fx, fy = jnp.isfinite(x), jnp.isfinite(y)
    finite = fx & fy
    re = jnp.where(finite & (x == 0), x, re)
    im = jnp.where(finite & (y == 0), y, im)
    # an infinite x: +-1 + i0, the zero signed as sin y cos y for a finite |y| > 1 (the computed
    # part's sign: both formulas have it), as y otherwise (NaN's sign included)
    inf_x = jnp.isinf(x)
    re = jnp.where(inf_x, jnp.copysign(jnp.ones_like(x), x), re)
    im = jnp.where(inf_x, jnp.copysign(jnp.zeros_like(x), jnp.where(fy & (jnp.abs(y) > 1), im, y)), im)
    # the rest (a NaN x, a finite x beside an infinite or NaN y): z itself at y = +-0 (NaN +- 0i);
    # +-0 + i NaN at x = +-0; else NaN + i NaN
    rest = ~inf_x & ~finite
    nan = _full(x, jnp.nan)
    re = jnp.where(rest, jnp.where((y == 0) | (x == 0), x, nan), re)
    return re, jnp.where(rest, jnp.where(y == 0, y, nan), im)


def _tan_parts(x, y, re, im):
    """ctan's branches over (re, im), the computed tan(x + iy): ctanh's with the parts' roles swapped
    (glibc's ctan is its own function, and this is its table)."""
    fx, fy = jnp.isfinite(x), jnp.isfinite(y)
    finite = fx & fy
    re = jnp.where(finite & (x == 0), x, re)
    im = jnp.where(finite & (y == 0), y, im)
    inf_y = jnp.isinf(y)
    re = jnp.where(inf_y, jnp.copysign(jnp.zeros_like(x), jnp.where(fx & (jnp.abs(x) > 1), re, x)), re)
    im = jnp.where(inf_y, jnp.copysign(jnp.ones_like(y), y), im)
    # the rest (an infinite or NaN x, a finite x beside a NaN y): z itself at x = +-0 (+-0 + i NaN);
    # NaN +- 0i at y = +-0; else NaN + i NaN
    rest = ~inf_y & ~finite
    nan = _full(x, jnp.nan)
    re = jnp.where(rest, jnp.where(x == 0, x, nan), re)
    return re, jnp.where(rest, jnp.where((y == 0) | (x == 0), y, nan), im)


def xla_exps(z):
    """(exp(z + log 1/2), exp(log 1/2 - z)): XLA's complex sinh and cosh are their difference and sum."""
    half = jnp.asarray(complex(math.log(0.5), 0), z.dtype)
    return tm.exp(z + half), tm.exp(half - z)  # a complex exp is XLA's on every platform


def _sinh(z):
    if tc.own(z):
        w, carrier = tc.sinh(z), None
    else:
        up, down = xla_exps(z)
        w, carrier = up - down, up.real  # e^(x - log 2) cos y
    return jax.lax.complex(*_sinh_parts(z.real, z.imag, w.real, w.imag, carrier))


def _cosh(z):
    if tc.own(z):
        w, carrier = tc.cosh(z), None
    else:
        up, down = xla_exps(z)
        w, carrier = up + down, up.imag  # e^(x - log 2) sin y
    return jax.lax.complex(*_cosh_parts(z.real, z.imag, w.real, w.imag, carrier))


def _sin(z):
    w = tc.sin(z)
    return jax.lax.complex(*_sin_parts(z.real, z.imag, w.real, w.imag))


def _cos(z):
    """glibc's ccos is ccosh(-y + ix), branches included."""
    w = tc.cos(z)
    return jax.lax.complex(*_cosh_parts(-z.imag, z.real, w.real, w.imag, None))


def _tanh(z):
    w = tc.tanh(z)
    return jax.lax.complex(*_tanh_parts(z.real, z.imag, w.real, w.imag))


def _tan(z):
    w = tc.tan(z)
    return jax.lax.complex(*_tan_parts(z.real, z.imag, w.real, w.imag))


sinh = for_complex(_sinh, tc.sinh)
cosh = for_complex(_cosh, tc.cosh)
sin = for_complex(_sin, tc.sin)
cos = for_complex(_cos, tc.cos)
tanh = for_complex(_tanh, tc.tanh)
tan = for_complex(_tan, tc.tan)
