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

import jax.numpy as jnp
import numpy as np

from jaxdev.ops.kit import cpu_numerics
from jaxdev.ops.kit import transcendentals as tm
from jaxdev.ops.kit import transcendentals_atan as ta
from jaxdev.ops.kit import transcendentals_gamma as tg

_F = np.float32
_LN2 = _F(math.log(2))
_LN2_LO = _F(math.log(2) - float(_LN2))
_BIG = _F(2.0**28)


def _root_of_one_minus_square(x):
    """sqrt((1 - x)(1 + x)): NaN past |x| = 1."""
    return jnp.sqrt((1 - x) * (1 + x))


def asin32(x):
    a = jnp.abs(x)
    return jnp.copysign(ta.atan2_32(a, _root_of_one_minus_square(a)), x)


def acos32(x):
    return ta.atan2_32(_root_of_one_minus_square(x), x)


def asinh32(x):
    a = jnp.abs(x)
    square = a * a
    small = tm.log1p(a + cpu_numerics.divide(square, 1 + jnp.sqrt(1 + square)))
    middle = tm.log(2 * a + cpu_numerics.divide(_F(1), jnp.sqrt(square + 1) + a))
    big = tm.log(a) + _LN2
    out = jnp.where(a > _BIG, big, jnp.where(a > 2, middle, small))
    return jnp.copysign(jnp.where(a < _F(2.0**-28), a, out), x)


def acosh32(x):
    t = x - 1
    small = tm.log1p(t + jnp.sqrt(2 * t + t * t))
    middle = tm.log(2 * x - cpu_numerics.divide(_F(1), x + jnp.sqrt(x * x - 1)))
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
