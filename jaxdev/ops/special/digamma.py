"""float32 digamma as CPU PyTorch computes it (aten/src/ATen/native/Math.h, calc_digamma(float)), for
where transcendentals.own() holds (a TPU): jax.scipy's digamma is XLA's, whose reflection near a pole
(x = -k + 1e-5) on a TPU was 9.05 relative off (XLA's TPU tan, log and sin are accurate absolutely,
not relative to the result). float64, and float32 on XLA's CPU backend (the coverage baseline's bits),
keep jax.scipy's.

CPU's steps, in float32 where CPU's are: +-0 -> -+inf, a negative integer (and -inf) -> NaN; x < 0
reflected, digamma(1 - x) - pi / tan(pi r) with r x's fractional part (pi / tan in double on CPU:
here a pair-of-floats argument, transcendentals_trig.pi_over_tan_pi); then x pushed to >= 10 by
result -= 1/x (at most 10 steps: x >= 1 after a reflection, and a positive x < 10 needs ceil(10 - x)),
x == 10 exactly PSI_10, else log(x) - 0.5/x - z P(z) with z = 1/x^2 (Cephes' series).
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from jaxdev.ops.kit import transcendentals as tm
from jaxdev.ops.kit import transcendentals_trig
from jaxdev.ops.kit.division import divide

_PSI_10 = np.float32(2.25175258906672110764)
_ASYMPTOTIC = tuple(
    np.float32(a)
    for a in (
        8.33333333333333333333e-2,
        -2.10927960927960927961e-2,
        7.57575757575757575758e-3,
        -4.16666666666666666667e-3,
        3.96825396825396825397e-3,
        -8.33333333333333333333e-3,
        8.33333333333333333333e-2,
    )
)


def _positive(x):
    """calc_digamma's part for x > 0 (or NaN, +inf). Its divisions are division.divide's, IEEE's where
    the platform's is not: a TPU's 2 ulps each, summed over the steps and cancelled next to digamma's
    zero at 1.4616, had it 15,987 ulps from CPU's there under tests/tpu_emulation.py (32 with IEEE's,
    near x = 1.36, where an ulp of the terms, ~2.3, is 32 of the result)."""
    result = jnp.zeros_like(x)
    for _ in range(10):  # CPU's while (x < 10), as masked steps
        below = x < 10
        result = jnp.where(below, result - divide(1, x), result)
        x = jnp.where(below, x + 1, x)
    z = divide(1, x * x)
    series = jnp.full_like(x, _ASYMPTOTIC[0])
    for a in _ASYMPTOTIC[1:]:
        series = series * z + a
    y = jnp.where(x < np.float32(1e17), z * series, 0)
    out = result + tm.log(x) - divide(0.5, x) - y
    return jnp.where(x == 10, result + _PSI_10, out)


def digamma32(x):
    """CPU's float calc_digamma on a float32 x (see the module's docstring)."""
    negative = x < 0
    integer = x == jnp.trunc(x)
    r = jnp.where(negative & ~integer, x - jnp.trunc(x), 0.25)  # modf's fraction; 0.25 keeps tan finite
    reflected = transcendentals_trig.pi_over_tan_pi(r)
    out = _positive(jnp.where(negative, 1 - x, x))
    out = jnp.where(negative, out - reflected, out)
    out = jnp.where(negative & integer, jnp.float32(jnp.nan), out)
    return jnp.where(x == 0, jnp.copysign(jnp.float32(jnp.inf), -x), out)


def digamma(x):
    """digamma32 for a float32 or half x (computed in float32, rounded once, as CPU's); None where
    transcendentals.own(x) does not hold."""
    if not tm.own(x):
        return None
    return digamma32(x.astype(jnp.float32)).astype(x.dtype)
