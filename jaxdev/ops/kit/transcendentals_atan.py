"""float32 atan and atan2 in plain float32 adds, multiplies and corrected divisions, for the kernels
that transcendentals.py's choice covers (atan, atan2, angle, the complex log's argument, logcumsumexp's
complex steps).

Why. A TPU's XLA functions are accurate to an absolute error rather than to the result (its log was
3,084 ulps from CPU's, tanh 678), and complex64 logcumsumexp, whose only XLA functions left were
atan2 and hypot, was 5.8e-5 relative off CPU's on the chip where every other part of it is jaxdev's.

How. atan2(y, x) on a = min(|x|, |y|), b = max: t = a / b in [0, 1] is never formed. As in fdlibm's
atanf, t's range picks one of three reductions, each written in a and b so that its numerator is
exact (Sterbenz): u = a / b (t < 7/16), (2a - b) / (2b + a) = atan-shifted by atan(1/2) (t < 11/16),
(a - b) / (a + b) shifted by pi/4; then u - u^3 P(u^2) (fdlibm's odd polynomial, |u| <= 7/16), the
shift added as a (hi, lo) pair. a > b: pi/2 minus that; x negative (or -0): pi minus that; y's sign last.
Operands below 2^-60 are scaled up by 2^60 first (and above 2^100 down by 2^-4), so no comparison or
sum underflows where subnormals flush (a TPU; XLA's CPU backend too, where a subnormal operand is read
as zero, as XLA's own atan2 reads it). The divisions are cpu_numerics.divide's (corrected to about an ulp where the platform's is
approximate). atan(x) is atan2(x, 1). Measured on CPU against torch's float32 (tests/ops/
test_transcendentals_atan.py): within 2 ulps, most values exact.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from jaxdev.ops.kit import cpu_numerics
from jaxdev.ops.kit import transcendentals as tm

_F = np.float32
_ATAN_HALF = (_F(4.6364760399e-01), _F(5.0121582440e-09))  # atan(1/2) as hi + lo
_QUARTER_PI = (_F(7.8539812565e-01), _F(3.7748947079e-08))  # pi/4
_HALF_PI = (_F(1.5707962513e00), _F(7.5497894159e-08))  # pi/2
_PI = (_F(3.1415925026e00), _F(1.5099579909e-07))  # pi
# atan(u) = u - u (z (c0 + w (c2 + w c4)) + w (c1 + w c3)), z = u^2, w = z^2 (fdlibm's aT)
_ODD = tuple(
    _F(c) for c in (3.3333328366e-01, -1.9999158382e-01, 1.4253635705e-01, -1.0648017377e-01, 6.1687607318e-02)
)
_BIG = _F(2.0**100)  # past it 2b + a may overflow: both operands scaled by 2^-4 first
_TINY = _F(2.0**-60)  # below it 0.4375 b may flush to zero (a TPU, XLA's CPU): scaled by 2^60 first


def _atan_small(u):
    """atan(u) - u as fdlibm sums it, for |u| <= 7/16: (u * (s1 + s2)), to be subtracted from u."""
    z = u * u
    w = z * z
    s1 = z * (_ODD[0] + w * (_ODD[2] + w * _ODD[4]))
    s2 = w * (_ODD[1] + w * _ODD[3])
    return u * (s1 + s2)


def _first_octant(a, b):
    """atan(a / b) for 0 <= a <= b, b > 0 finite."""
    div = cpu_numerics.divide
    small, middle = a < _F(0.4375) * b, a < _F(0.6875) * b
    safe_b = jnp.where(b == 0, _F(1), b)
    u = jnp.where(
        small, div(a, safe_b), jnp.where(middle, div(2 * a - b, 2 * b + a), div(a - b, jnp.where(b == 0, 1, a + b)))
    )
    tail = _atan_small(u)
    hi = jnp.where(middle, _ATAN_HALF[0], _QUARTER_PI[0])
    lo = jnp.where(middle, _ATAN_HALF[1], _QUARTER_PI[1])
    return jnp.where(small, u - tail, hi - ((tail - lo) - u))


def _minus_from(pair, v):
    """pair - v, the pair's low part added after the large subtraction."""
    return (pair[0] - v) + pair[1]


def atan2_32(y, x):
    """C's atan2f: signs of zeros, infinities and NaN as C99's Annex F gives them."""
    ay, ax = jnp.abs(y), jnp.abs(x)
    a, b = jnp.minimum(ay, ax), jnp.maximum(ay, ax)
    scale = jnp.where(b > _BIG, _F(2.0**-4), jnp.where(b < _TINY, _F(2.0**60), _F(1)))  # powers of two: exact
    both_inf = jnp.isinf(a)
    r = _first_octant(jnp.where(both_inf, 1, a * scale), jnp.where(both_inf, 1, b * scale))
    r = jnp.where(ay > ax, _minus_from(_HALF_PI, r), r)
    r = jnp.where(jnp.signbit(x), _minus_from(_PI, r), r)
    r = jnp.where((a == 0) & (b == 0), jnp.where(jnp.signbit(x), _PI[0] + _PI[1], _F(0)), r)
    r = jnp.where(jnp.isnan(x) | jnp.isnan(y), _F(jnp.nan), r)
    return jnp.where(jnp.signbit(y), -r, r)


def atan32(x):
    return atan2_32(x, jnp.ones_like(x))


def _atan2_jvp(primals, tangents):  # JAX's rule for lax.atan2
    (y, x), (gy, gx) = primals, tangents
    denominator = x * x + y * y
    return _atan2_own(y, x), (gy * x - gx * y) / denominator


_atan2_own = jax.custom_jvp(atan2_32)
_atan2_own.defjvp(_atan2_jvp)
atan = tm.chosen(tm.with_jvp(atan32, lambda x, y, g: g / (1 + x * x)), jnp.arctan)


def atan2(y, x):
    """jnp.arctan2's values where jaxdev's functions are chosen for the operands' (common) dtype; a
    half computed in float32 and rounded once, as CPU's kernels do."""
    y, x = jnp.asarray(y), jnp.asarray(x)
    if y.dtype != x.dtype or not tm.own(y):
        return jnp.arctan2(y, x)
    if y.dtype == jnp.float32:
        return _atan2_own(y, x)
    return _atan2_own(y.astype(jnp.float32), x.astype(jnp.float32)).astype(y.dtype)
