"""float32 sin, cos and tan in plain float32 adds and multiplies, accurate relative to the result,
for transcendentals.py (which chooses between these and XLA's, as it does for exp and log).

Why. A TPU's XLA sin is accurate to an absolute error, not to the result: near a multiple of pi the
result is small and its relative error large. PyTorch's trigamma and digamma reflect negative x
through sin(pi x) and pi / tan(pi r), so next to each pole (x = -k + 1e-5) the TPU's polygamma was 9.05
relative off (2.5 million times OpInfo's tolerance) where CPU's float32 sinf is within an ulp.

How. x = k pi/2 + r, |r| <= pi/4 (+ the rounding of k), with k = round(x 2/pi) and r kept as a pair of
floats (hi, lo): pi/2 is split into four 12-bit parts and a rest, k into its top 12 bits and the rest
(so |k| < 2^24), which makes every product k_part * pi_part exact in a plain float32 multiply (a TPU
has no guaranteed FMA); the products are subtracted with error-free sums (Knuth's TwoSum), so r is
accurate to ~2^-48 absolute however close x lies to a multiple of pi/2. Then Taylor polynomials on r
(degree 13 for sin, 12 for cos: the truncation is under 1e-10 relative on |r| <= 0.8) in Horner
form, r's low part entering linearly. Measured on CPU against torch's float32 sin/cos (100,000
values, tests/ops/test_transcendentals_trig.py): within 1 ulp; tan = sin/cos within 2.

Range: round(x 2/pi) is taken from x's and 2/pi's 12-bit halves, so |r| <= pi/4 + 2^-20 while
|k| < 2^24 (|x| < 2.6e7: within 1 ulp of CPU's up to there, measured); past it the reduction's pi
is too short and these are XLA's functions (float32 values there are integers spaced 2 or more apart,
which an angle rarely is). Subnormal results may flush to zero, as everywhere on a TPU.
"""

from __future__ import annotations

import math
from decimal import Decimal, getcontext
from fractions import Fraction

import jax.numpy as jnp
import numpy as np
from jax import lax

from jaxdev.ops.kit.division import divide

getcontext().prec = 60
_PI = Fraction(Decimal("3.14159265358979323846264338327950288419716939937510582097494459"))


def _top12(v: float) -> np.float32:
    """v's top 12 significant bits as float32 (the rest cut, not rounded)."""
    return (np.array(v, np.float32).view(np.int32) & np.int32(-4096)).view(np.float32)


def _split(value: Fraction, parts: int):
    """value = c_1 + ... + c_parts + rest, each c with 12 significant bits; rest rounded to float32."""
    rest, out = value, []
    for _ in range(parts):
        c = _top12(float(rest))
        out.append(c)
        rest -= Fraction(float(c))
    return tuple(out), np.float32(float(rest))


_HALF_PI_PARTS, _HALF_PI_REST = _split(_PI / 2, 4)
_TWO_OVER_PI_HI = _top12(2 / math.pi)
_TWO_OVER_PI_LO = np.float32(float(2 / _PI - Fraction(float(_TWO_OVER_PI_HI))))
_OWN_LIMIT = np.float32(2.6e7)  # |k| < 2^24 below it: k's two 12-bit halves are exact

# sin(r) = r + r z S(z), cos(r) = 1 - z/2 + z^2 C(z), z = r^2 (Taylor, highest power first)
_SIN_S = tuple(np.float32((-1) ** n / math.factorial(2 * n + 1)) for n in range(6, 0, -1))
_COS_C = tuple(np.float32((-1) ** n / math.factorial(2 * n)) for n in range(6, 1, -1))


def horner(coefficients, z):
    """sum c_i z^(n-i), highest power first, each coefficient a float32 constant (transcendentals.py's
    polynomials too: cpu_numerics.horner, which keeps a coefficient's own type, imports that module)."""
    acc = jnp.full_like(z, coefficients[0])
    for c in coefficients[1:]:
        acc = acc * z + np.float32(c)
    return acc


def two_sum(a, b):
    """(s, e): s = a + b rounded, e its rounding error exactly (Knuth; no FMA, no ordering needed)."""
    s = a + b
    bb = s - a
    return s, (a - (s - bb)) + (b - bb)


def top12_of(v):
    return lax.bitcast_convert_type(lax.bitcast_convert_type(v, jnp.int32) & -4096, jnp.float32)


def _nearest_quarter_turns(x):
    """round(x 2/pi) as float32, right even where x 2/pi rounded is an ulp (1 past 2^23) off: the
    product of x's and 2/pi's top 12 bits is exact, its integer part taken apart from the rest."""
    x_hi = top12_of(x)
    p = x_hi * _TWO_OVER_PI_HI
    whole = jnp.round(p)
    return whole + jnp.round((p - whole) + ((x - x_hi) * _TWO_OVER_PI_HI + x * _TWO_OVER_PI_LO))


def reduced(x):
    """(q, hi, lo): x = k pi/2 + hi + lo with q = k mod 4 (int32) and hi + lo accurate to ~2^-48
    absolute (|x| < 2.6e7; see the module's docstring)."""
    k = _nearest_quarter_turns(x)
    k_hi = top12_of(k)
    k_lo = k - k_hi
    s, e = x, jnp.zeros_like(x)
    for c in _HALF_PI_PARTS:  # each product exact; the sums error-free
        for part in (k_hi, k_lo):
            s, err = two_sum(s, -(part * c))
            e = e + err
    e = e - k * _HALF_PI_REST
    hi = s + e
    lo = e - (hi - s)  # |s| >= |e|: the rounding of hi, exactly
    return k.astype(jnp.int32) & 3, hi, lo


def sin_cos_reduced(hi, lo):
    """(sin r, cos r) for r = hi + lo, |r| <~ 0.8: lo enters through the derivatives (lo cos r, -lo sin r);
    cos's 1 - z/2 is summed with its rounding error recovered (fdlibm's __kernel_cos)."""
    z = hi * hi
    s = hi + (lo * (1 - 0.5 * z) + hi * z * horner(_SIN_S, z))
    half_z = 0.5 * z
    w = 1 - half_z
    c = w + (((1 - w) - half_z) + (z * z * horner(_COS_C, z) - hi * lo))
    return s, c


def _pick(q, *by_quadrant):
    out = by_quadrant[3]
    for i in (2, 1, 0):
        out = jnp.where(q == i, by_quadrant[i], out)
    return out


def _finish(x, out, xla, keep_zero: bool):
    """NaN for infinite and NaN x, XLA's value past the reduction's range, x itself for +-0 (its sign)."""
    out = jnp.where(jnp.abs(x) < _OWN_LIMIT, out, xla(jnp.where(jnp.abs(x) < _OWN_LIMIT, 0, x)))
    out = jnp.where(jnp.isfinite(x), out, jnp.float32(jnp.nan))
    return jnp.where(x == 0, x, out) if keep_zero else out


def sin32(x):
    q, hi, lo = reduced(x)
    s, c = sin_cos_reduced(hi, lo)
    return _finish(x, _pick(q, s, c, -s, -c), jnp.sin, True)


def cos32(x):
    q, hi, lo = reduced(x)
    s, c = sin_cos_reduced(hi, lo)
    return _finish(x, _pick(q, c, -s, -c, s), jnp.cos, False)


def tan32(x):
    """sin r / cos r, or -cos r / sin r in odd quadrants: two values within an ulp, one division, IEEE's
    where the platform's is not (division.divide: a TPU's 2 ulps had tan 6 ulps from CPU's under
    tests/tpu_emulation.py, its gradient 11)."""
    q, hi, lo = reduced(x)
    s, c = sin_cos_reduced(hi, lo)
    odd = (q & 1) == 1
    return _finish(x, divide(jnp.where(odd, -c, s), jnp.where(odd, s, c)), jnp.tan, True)


def sin_cos32(x):
    """(sin x, cos x) from one reduction."""
    q, hi, lo = reduced(x)
    s, c = sin_cos_reduced(hi, lo)
    return _finish(x, _pick(q, s, c, -s, -c), jnp.sin, True), _finish(x, _pick(q, c, -s, -c, s), jnp.cos, False)


_PI_HI_PARTS, _PI_REST = _split(_PI, 2)
_PI32 = np.float32(math.pi)


def sin_cos_pi(r):
    """(odd, sin(pi t), cos(pi t)) for float32 r (exact, |r| < 1: a fractional part), r = m/2 + t
    exactly (|t| <= 1/4, odd: m odd), pi t as a pair from exact 12-bit products: sin(pi r) is
    +-sin(pi t) for even m, +-cos(pi t) for odd m, each near the correctly rounded value."""
    m = jnp.round(2 * r)
    t = r - 0.5 * m  # exact (Sterbenz)
    t_hi = top12_of(t)
    s, e = t_hi * _PI_HI_PARTS[0], jnp.zeros_like(t)
    for part in ((t - t_hi) * _PI_HI_PARTS[0], t_hi * _PI_HI_PARTS[1], (t - t_hi) * _PI_HI_PARTS[1]):
        s, err = two_sum(s, part)
        e = e + err
    e = e + t * _PI_REST
    hi = s + e
    sin_t, cos_t = sin_cos_reduced(hi, e - (hi - s))
    return (m.astype(jnp.int32) & 1) == 1, sin_t, cos_t


def pi_over_tan_pi(r):
    """pi / tan(pi r) for float32 r (exact, |r| < 1: a fractional part), near the correctly rounded
    value as CPU's float digamma computes it in double: cos/sin of pi t (m even) or -sin/cos (m odd),
    from sin_cos_pi's pair; the quotient division.divide's (IEEE's where the platform's is not)."""
    odd, sin_t, cos_t = sin_cos_pi(r)
    return _PI32 * divide(jnp.where(odd, -sin_t, cos_t), jnp.where(odd, cos_t, sin_t))
