"""float32 lgamma and pow in plain float32 adds and multiplies, near CPU's (glibc's lgammaf and powf), for
the kernels where transcendentals.own() holds (a TPU), chosen as exp and log are there.

Why. A TPU v5e's XLA lgamma is 1.19e5 ulps (0.0099 relative) from CPU torch's, and its float32
pow(x/a, a) 9.4e-5 relative (exp(a log(x)) with log's rounding multiplied by a): igamma float32, a
port of CPU's calc_igamma whose divisions were already corrected, stayed 9.3e-4 relative off there
(benchmarks/tpu_probe_division.py).

lgamma, for v = x >= -1/4 (x < -1/4 reflected):
- near 1, 2 and Gamma's minimum (v in [0.75, 2.5), and lgamma(1 + v) - log(v) for v < 0.75): Taylor
  series around 1 and 2 with exact coefficients (zeta values; scripts/gamma_series.py prints them), so
  that the result is accurate relative to itself next to the zeros at 1 and 2, and around float32's
  nearest point to the minimum 1.4616 (lgamma there as a pair). Every argument t = v - center is
  exact (Sterbenz, or both on the same 2^-25 grid).
- v in [2.5, 8): y = v - n in [1.5, 2.5), lgamma(y) + log(y (y + 1) ... (v - 1)), as glibc does.
- v >= 8: Stirling, (v - 1/2)(log v - 1) + (log(2 pi)/2 - 1/2) + 1/(12 v) - ..., with log v a pair of
  floats and the product's rounding error recovered (Dekker), so the cancellation between v log v and
  v costs nothing (a plain float32 log would cost up to an ulp of v log v).
- x < -1/4: log(pi / |x sin(pi x)|) - lgamma(-x), sin(pi x) from x's exact fractional part
  (transcendentals_trig.sin_cos_pi); poles (negative integers, every float32 below -2^23) are +inf.
  Next to lgamma's zeros between the poles (x ~ -2.46, -2.75, ...) the subtraction cancels, so the
  result there is accurate absolutely (~1e-7), not relative to the small value (glibc's lgamma_neg
  refines those intervals; measured in tests/ops/test_transcendentals_gamma.py).

pow(b, e) for b > 0 finite: log(b) as a pair (2 atanh(f / (2 + f)) with the quotient's remainder
kept; 3.2e-10 relative measured, bounded by the float32 tail s^3 R(s^2)), e times it as a pair
(Dekker), exp of the pair (Cody-Waite, the low part added to the reduced argument): within 3 ulps of
glibc's powf however large e log(b) (e to 1e3), where XLA's exp(e log(b)) multiplies log's rounding.
Other bases and exponents (zero, negative, infinite, NaN) are jnp.power's. No FMA is assumed (a TPU
has none guaranteed); divisions go through cpu_numerics.divide (the chip's is not IEEE's).
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np

from jaxdev.ops.kit import cpu_numerics
from jaxdev.ops.kit import transcendentals as tm
from jaxdev.ops.kit import transcendentals_trig as _trig

# lgamma(center + t) = lgamma(center) + t p(t) (scripts/gamma_series.py; truncation <= 3.3e-9 relative)
_AROUND_ONE = (-0.07693251967430115, 0.08335383981466293, -0.0909540206193924, 0.10009945929050446)
_AROUND_ONE += (-0.11133426427841187, 0.12550966441631317, -0.14404989778995514, 0.16955718398094177)
_AROUND_ONE += (-0.20738555490970612, 0.27058079838752747, -0.4006856381893158, 0.822467029094696)
_AROUND_ONE += (-0.5772156715393066,)
_AROUND_MIN = (-0.0014022515388205647, 0.002259765053167939, -0.003684569848701358, 0.006100536324083805)
_AROUND_MIN += (-0.010314223356544971, 0.017970675602555275, -0.03278854116797447, 0.06462494283914566)
_AROUND_MIN += (-0.14758773148059845, 0.4838361144065857, -1.203605215494008e-08)
_AROUND_TWO = (2.050721195701044e-05, -4.4926237023901194e-05, 9.945750935003161e-05, -0.00022315475507639349)
_AROUND_TWO += (0.0005096695385873318, -0.0011927539017051458, 0.0028905102517455816, -0.007385550998151302)
_AROUND_TWO += (0.020580807700753212, -0.0673523023724556, 0.32246702909469604, 0.42278432846069336)


def _pair(value: float) -> tuple[np.float32, np.float32]:
    hi = np.float32(value)
    return hi, np.float32(value - float(hi))


_MIN = np.float32(1.4616321325302124)
_MIN_MINUS_ONE = np.float32(_MIN - 1)  # exact: on the 2^-25 grid
_LGAMMA_MIN_HI, _LGAMMA_MIN_LO = _pair(-0.12148629053584953)  # lgamma(_MIN) (mpmath)
_STIRLING_HI, _STIRLING_LO = _pair(0.5 * math.log(2 * math.pi) - 0.5)
_STIRLING_TAIL = tuple(np.float32(c) for c in (-1 / 1680, 1 / 1260, -1 / 360, 1 / 12))  # in 1/v^2, times 1/v
_PI32 = np.float32(math.pi)
_LOG_PI_OVER_PI32 = np.float32(math.log(math.pi / float(_PI32)))  # pi's float32 rounding, put back
_ATANH = tuple(np.float32(2 / k) for k in (13, 11, 9, 7, 5, 3))  # 2 atanh(s) = 2 s + s^3 R(s^2)


def two_product(a, b):
    """(p, e): a * b = p + e to ~2^-36 relative, from 12-bit halves cut from the bits: every partial
    product is exact and p is their sum, never a rounded product, so XLA's CPU backend, which lets
    LLVM fuse a product into the add that uses it, cannot change what the error terms assume (with
    a * b rounded and then fused, Dekker's form counts the product's rounding twice)."""
    ah, bh = _trig.top12_of(a), _trig.top12_of(b)
    al, bl = a - ah, b - bh
    p, err = _trig.two_sum(ah * bh, ah * bl + al * bh)
    return p, err + al * bl


def log_pair(x):
    """(hi, lo): log(x) = hi + lo to ~3e-10 relative, for finite x > 0: x = 2^e (1 + f), log(1 + f) =
    2 atanh(s), s = f / (2 + f) kept as a pair (2 + f is exact as a pair, the quotient's remainder is
    exact), then e log(2) in Cody-Waite's halves."""
    e, f = tm.log_parts(x)
    d_hi = cpu_numerics.opaque(2 + f)  # XLA folds (2 + f) - 2 into f: the barrier keeps the rounding
    d_lo = f - (d_hi - 2)  # exact: d_hi - 2 by Sterbenz
    s = cpu_numerics.divide(f, d_hi)
    s_hi, d_top = _trig.top12_of(s), _trig.top12_of(d_hi)
    s_bottom, d_rest = s - s_hi, d_hi - d_top
    # f - s (d_hi + d_lo) from exact partial products, largest first (f - s_hi d_top is exact: Sterbenz)
    remainder = (((f - s_hi * d_top) - s_hi * d_rest) - s_bottom * d_top) - s_bottom * d_rest - s * d_lo
    s_lo = cpu_numerics.divide(remainder, d_hi)
    z = s * s
    hi, err = _trig.two_sum(e * tm.LN2_HI, 2 * s)
    lo = err + (2 * s_lo + (s * z * cpu_numerics.horner(_ATANH, z) + e * tm.LN2_LO))
    total = hi + lo
    return total, lo - (total - hi)


# --- pow -------------------------------------------------------------------------------------------


def _exp_pair(hi, lo, shift=0):
    """exp(hi + lo) * 2^shift (|lo| <= ulp(hi)): hi reduced by Cody-Waite as exp's is, lo added to the
    reduced argument."""
    n, r = tm.exp_reduced(hi)
    out = tm.scaled(1 + tm.expm1_reduced(r + lo), n + shift)
    out = jnp.where(hi > tm.EXP_OVERFLOW, jnp.float32(jnp.inf), out)
    return jnp.where(hi < tm.EXP_UNDERFLOW, jnp.float32(0), out)


def pow32(base, exponent):
    """base ** exponent for float32 arrays; b finite and nonzero, e finite by the pairs (see the module's
    docstring): a negative base with an integer exponent as |b| ** e, negated for an odd one (every
    float32 past 2^24 is even); every other pair jnp.power's (zeros, infinities, NaNs, a negative base
    with a fractional exponent: NaN)."""
    integer = exponent == jnp.round(exponent)
    ordinary = (base != 0) & (jnp.abs(base) < jnp.inf) & jnp.isfinite(exponent) & ((base > 0) | integer)
    odd = (base < 0) & integer & (jnp.abs(jnp.fmod(exponent, 2)) == 1)
    b = jnp.where(ordinary, jnp.abs(base), 1)
    e = jnp.where(ordinary, exponent, 0)
    out = _exp_pair(*_log_of_power(b, e))
    out = jnp.where(ordinary, jnp.where(odd, -out, out), jnp.power(base, exponent))
    return jnp.where((exponent == 0) | (base == 1), jnp.float32(1), out)  # C's pow(x, 0), pow(1, y): 1, NaN too


def _log_of_power(b, e):
    """(hi, lo): e log(b) as a pair, for b > 0 finite and e finite."""
    l_hi, l_lo = log_pair(b)
    y, y_err = two_product(e, l_hi)
    lo = y_err + e * l_lo
    hi = y + lo
    return hi, lo - (hi - y)


SUBNORMAL_SHIFT = 64


def pow32_kept_subnormal(base, exponent):
    """(p, tiny): base ** exponent for float32 base > 0 and exponent, both finite, where it is below
    float32's normal range (tiny) as a float32 power keeps it on CPU (rounded once to the subnormal
    grid) but times 2^SUBNORMAL_SHIFT, so that a platform flushing subnormals (a TPU; XLA's CPU backend
    too) keeps it; elsewhere pow32's. The caller scales a normal product of it back."""
    hi, lo = _log_of_power(base, exponent)
    tiny = hi < np.float32(-87.0)  # log(2^-126) = -87.34
    out = _exp_pair(hi, lo, jnp.where(tiny, SUBNORMAL_SHIFT, 0))
    floor = np.float32(2.0 ** (SUBNORMAL_SHIFT - 126))  # the smallest normal, scaled: adding it rounds to
    kept = cpu_numerics.opaque(out + floor) - floor  # the subnormal grid (2^-149, scaled), half to even
    return jnp.where(tiny & (out < floor), kept, out), tiny


# --- lgamma ----------------------------------------------------------------------------------------


def _near_one_and_two(base):
    """lgamma(1 + base) for base in [-1/4, 3/2) (base exact): the series around 1, the minimum or 2."""
    t_min = base - _MIN_MINUS_ONE  # exact: both on the 2^-25 grid, |t_min| < 1/2
    t_two = base - 1  # exact (Sterbenz) where chosen
    one = base * cpu_numerics.horner(_AROUND_ONE, base)
    minimum = (t_min * cpu_numerics.horner(_AROUND_MIN, t_min) + _LGAMMA_MIN_LO) + _LGAMMA_MIN_HI
    two = t_two * cpu_numerics.horner(_AROUND_TWO, t_two)
    return jnp.where(base < 0.25, one, jnp.where(base < 0.75, minimum, two))


def _stirling(v):
    """lgamma(v) for v >= 8: (v - 1/2)(log v - 1) as a pair, plus (log(2 pi) - 1)/2 + the tail in 1/v."""
    l_hi, l_lo = log_pair(v)
    m_hi, m_err = _trig.two_sum(l_hi, np.float32(-1))
    u = v - 0.5  # exact below 2^23; above, its rounding is under float32's resolution of the result
    p, p_err = two_product(u, m_hi)
    z = cpu_numerics.divide(jnp.ones_like(v), v)
    tail = z * cpu_numerics.horner(_STIRLING_TAIL, z * z)
    hi, err = _trig.two_sum(p, _STIRLING_HI)
    out = hi + (err + (p_err + (u * (m_err + l_lo) + (_STIRLING_LO + tail))))
    return jnp.where(jnp.isinf(p), p, out)  # past 4.08e36 v log v overflows: +inf, as glibc's


def _positive(v):
    """lgamma(v) for v >= 1/4 or |v| < 1/4 (v != 0 finite; 0 gives +inf): see the module's docstring."""
    low = v < 0.75
    w = jnp.clip(v, 0.75, 7.999999523162842)
    n = jnp.where(w >= 2.5, jnp.floor(w - 1.5), 0)
    y = w - n  # exact: in [0.75, 2.5)
    near = _near_one_and_two(jnp.where(low, v, y - 1))
    product = jnp.ones_like(v)
    for k in range(6):  # y (y + 1) ... (v - 1): n <= 6 factors, each exact
        product = product * jnp.where(k < n, y + k, 1)
    out = jnp.where(low, near - tm.log32(jnp.abs(v)), near + jnp.where(n > 0, tm.log32(product), 0))
    return jnp.where(v >= 8, _stirling(jnp.maximum(v, 8)), out)


def lgamma32(x):
    """glibc's lgammaf's values for float32 x: see the module's docstring."""
    reflect = x <= -0.25
    finite = jnp.isfinite(x)
    positive = _positive(jnp.where(finite, jnp.where(reflect, -x, x), 1))
    r = x - jnp.round(x)  # exact; 0 at every pole
    odd, sin_t, cos_t = _trig.sin_cos_pi(jnp.where(reflect & finite, r, 0.25))
    sin_pi = jnp.abs(jnp.where(odd, cos_t, sin_t))
    denominator = jnp.where(reflect & (r != 0), jnp.abs(x) * sin_pi, 1)
    reflected = (tm.log32(cpu_numerics.divide(jnp.full_like(x, _PI32), denominator)) + _LOG_PI_OVER_PI32) - positive
    out = jnp.where(reflect, jnp.where(r == 0, jnp.float32(jnp.inf), reflected), positive)
    return jnp.where(finite, out, jnp.abs(x))  # +-inf -> +inf, NaN stays


def _digamma(x):
    from jaxdev.ops.special import digamma  # the special package imports the kit's users

    return digamma.digamma32(x)


_lgamma_own = tm.with_jvp(lgamma32, lambda x, y, g: g * _digamma(x))
# on every platform: XLA's float32 lgamma is up to 22,084 ulps from CPU's on its CPU backend too
# (lgamma(1) = 4.8e-7; 1,274 of 150k values past 4 ulps), this one within 2 there and 6.6x faster
lgamma = tm.ours_wherever_float32(_lgamma_own, jax.scipy.special.gammaln)


def pow(base, exponent):  # the kit's name for it, as transcendentals' exp and log
    """base ** exponent for float arrays of one dtype: pow32 where transcendentals.own() holds (float32,
    halves computed in float32 and rounded once), jnp.power otherwise."""
    base, exponent = jnp.asarray(base), jnp.asarray(exponent)
    if not tm.own(jnp.result_type(base, exponent)):
        return jnp.power(base, exponent)
    dt = jnp.result_type(base, exponent)
    return pow32(base.astype(jnp.float32), exponent.astype(jnp.float32)).astype(dt)
