"""Complex pow with CPU's special values: std::pow of two complex numbers is the C library's cpow,
cexp(y * clog(x)), the product C99's (GCC's __mulsc3, which recovers infinities a plain product makes
NaN), and cexp's and clog's special values glibc's.

transcendentals_complex.pow computes the values: XLA's complex pow, or jaxdev's own cpowf where its
complex64 functions are chosen (a TPU). XLA's rules for a zero or infinite base differ from C's
(0^(2 + i) was NaN, CPU's 0 - 0i; 0^0 was 1, CPU's NaN: clog(0) = -inf times 0 is NaN; inf^2 was
inf + 0i, CPU's inf + i NaN). Where the base is zero or has an infinite or NaN part, or the exponent
has an infinite or NaN part, the result is taken here from y * clog(x); finite values elsewhere stay
the computed ones, bit for bit, but for the sign of a zero imaginary part (that of the product's).

On that set y * clog(x) has both parts non-finite: a non-finite factor (clog's -inf, +inf or NaN real
part, or y's own) meets every term of both parts, and 0 * inf is NaN. So only the classes of its
parts matter, which stand-ins for clog's parts give (_log_classes: no log computed, which had made
pow 2.7x slower), and cexp needs only its table for non-finite parts (glibc's):
  cexp(+inf + i(+-inf or NaN)) = +inf + i NaN
  cexp(-inf + i(+-inf or NaN)) = +0 + i copysign(0, imaginary part)
  cexp(NaN + i anything non-finite) = NaN + i NaN
The NaN beside a -inf real part is always made by the product (0 * inf, inf - inf), never passed on
from a NaN operand (one would make the real part NaN too), and a NaN x86 makes has its sign bit set:
CPU's 0^(1 + 0i) is 0 - 0i.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from jaxdev.ops.kit import transcendentals_complex as tc


def _box(v):
    """__mulsc3's boxing of an infinite factor: +-1 for an infinity, +-0 for the rest."""
    return jnp.copysign(jnp.where(jnp.isinf(v), jnp.ones_like(v), jnp.zeros_like(v)), v)


def _unnan(v):
    return jnp.where(jnp.isnan(v), jnp.copysign(jnp.zeros_like(v), v), v)


def c99_times(a, b, c, d):
    """(a + ib)(c + id) as GCC's __mulsc3 (C99 Annex G): the plain product, and where both of its
    parts are NaN, the infinities recovered (an infinite factor boxed to +-1 and +-0, NaNs in the
    other set to signed zeros; or, with no infinite factor but an overflowed product, every NaN zeroed)
    and the product taken again, times inf. Returns (re, im)."""
    ac, bd, ad, bc = a * c, b * d, a * d, b * c
    re, im = ac - bd, ad + bc
    z_inf = jnp.isinf(a) | jnp.isinf(b)
    a1, b1 = jnp.where(z_inf, _box(a), a), jnp.where(z_inf, _box(b), b)
    c1, d1 = jnp.where(z_inf, _unnan(c), c), jnp.where(z_inf, _unnan(d), d)
    w_inf = jnp.isinf(c1) | jnp.isinf(d1)
    c2, d2 = jnp.where(w_inf, _box(c1), c1), jnp.where(w_inf, _box(d1), d1)
    a2, b2 = jnp.where(w_inf, _unnan(a1), a1), jnp.where(w_inf, _unnan(b1), b1)
    overflowed = ~(z_inf | w_inf) & (jnp.isinf(ac) | jnp.isinf(bd) | jnp.isinf(ad) | jnp.isinf(bc))
    a2, b2 = jnp.where(overflowed, _unnan(a2), a2), jnp.where(overflowed, _unnan(b2), b2)
    c2, d2 = jnp.where(overflowed, _unnan(c2), c2), jnp.where(overflowed, _unnan(d2), d2)
    recalc = jnp.isnan(re) & jnp.isnan(im) & (z_inf | w_inf | overflowed)
    inf = jnp.full_like(re, jnp.inf)
    re = jnp.where(recalc, inf * (a2 * c2 - b2 * d2), re)
    im = jnp.where(recalc, inf * (a2 * d2 + b2 * c2), im)
    return re, im


def _exp_of_nonfinite(re, im):
    """glibc's cexp(re + i im) for non-finite re and im (the module's table)."""
    zero, inf, nan = jnp.zeros_like(re), jnp.full_like(re, jnp.inf), jnp.full_like(re, jnp.nan)
    made_nan_sign = jnp.where(jnp.isnan(im), -jnp.ones_like(im), im)  # x86's NaN: sign bit set
    out_re = jnp.where(jnp.isposinf(re), inf, jnp.where(jnp.isneginf(re), zero, nan))
    out_im = jnp.where(jnp.isneginf(re), jnp.copysign(zero, made_nan_sign), nan)
    return jax.lax.complex(out_re, out_im)


def _not_finite(v):
    return ~jnp.isfinite(v.real) | ~jnp.isfinite(v.imag)


def _log_classes(x):
    """Stand-ins for clog(x)'s parts with their classes (the sign of each, zero, infinite, NaN), which
    are all the product's classes depend on: no log computed. The real part: -inf at a zero x, +inf
    beside an infinite part (NaN or not), NaN beside a NaN one, else the sign of |x|^2 - 1, 0 at
    |x| = 1 (as (m - 1)(m + 1) + n^2, m the larger part: its sign is right but within rounding of 1).
    The imaginary part, atan2(b, a): NaN beside a NaN part, b's zero where a is +0, positive or +inf
    beside a finite b, else +-1 signed as b. Unlike the true parts they cannot overflow a product:
    an exponent's finite part past max / 89 (float32) beside them could give another class."""
    a, b = x.real, x.imag
    any_nan = jnp.isnan(a) | jnp.isnan(b)
    any_inf = jnp.isinf(a) | jnp.isinf(b)
    m, n = jnp.maximum(jnp.abs(a), jnp.abs(b)), jnp.minimum(jnp.abs(a), jnp.abs(b))
    past_one = (m - 1) * (m + 1) + n * n
    one, zero = jnp.ones_like(a), jnp.zeros_like(a)
    real = jnp.where(past_one > 0, one, jnp.where(past_one < 0, -one, zero))
    real = jnp.where(any_nan, jnp.full_like(a, jnp.nan), real)
    real = jnp.where(any_inf, jnp.full_like(a, jnp.inf), jnp.where((a == 0) & (b == 0), -jnp.inf, real))
    on_axis = ~any_nan & (((b == 0) & ~jnp.signbit(a)) | (jnp.isfinite(b) & jnp.isposinf(a)))
    imag = jnp.where(on_axis, jnp.copysign(zero, b), jnp.copysign(one, b))
    return real, jnp.where(any_nan, jnp.full_like(a, jnp.nan), imag)


def pow(base, exponent):  # the kit's name for it, as transcendentals_complex.pow
    """base ** exponent: transcendentals_complex.pow's values, CPU's cpow where base or exponent is
    special (the module's account); real operands transcendentals_complex.pow's alone."""
    base, exponent = jnp.asarray(base), jnp.asarray(exponent)
    computed = tc.pow(base, exponent)
    dt = jnp.result_type(base, exponent)
    if not jnp.issubdtype(dt, jnp.complexfloating):
        return computed
    x, y = base.astype(dt), exponent.astype(dt)
    special = (x == 0) | _not_finite(x) | _not_finite(y)
    log_re, log_im = _log_classes(x)
    product_re, product_im = c99_times(y.real, y.imag, log_re, log_im)
    # a zero imaginary part of a finite result is sin(+-0) e^re: signed as the product's (1^(-2i) is
    # 1 - 0i: (-2i)(0 + 0i) = -0 - 0i), which XLA's pow left +0. Only where both of the product's terms
    # are zeros: the stand-ins' +-1 cancel where the true parts do not (y.re = +-y.im), and there a zero
    # is an underflowed e^re sin(...), signed as XLA's ((0.5 + 0.5i)^(100 + 100i) is 0 - 0i)
    zero_terms = (y.real * log_im == 0) & (y.imag * log_re == 0)
    signed = jnp.where(zero_terms & (product_im == 0) & (computed.imag == 0), product_im, computed.imag)
    computed = jax.lax.complex(computed.real, signed)
    return jnp.where(special, _exp_of_nonfinite(product_re, product_im), computed)
