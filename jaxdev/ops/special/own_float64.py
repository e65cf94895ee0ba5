"""CPU PyTorch's double erfcx and log_ndtr (aten/src/ATen/native/Math.h: calc_erfcx, calc_log_ndtr), for
float64 tensors on every platform: jax.scipy's float64 erfcx is 0 at x = 26.557 (CPU 0.0212) and its
log_ndtr(7.98) 6 % off CPU's (-7.77e-16 against -7.32e-16). Their float32 versions are own_float32.py's."""

from __future__ import annotations

import math

import jax.numpy as jnp
import jax.scipy.special as jss
import numpy as np

from jaxdev.ops.special.erfcx_table import Y100_SERIES

_SERIES = np.asarray(Y100_SERIES, np.float64)  # (100, 7): c_k0 .. c_k6
_ISPI = 1 / math.sqrt(math.pi)
_FRAC_SQRT_2 = math.sqrt(0.5)  # c10::frac_sqrt_2<double>


def _erfcx_y100(y100):
    """erfcx_y100 for y100 = 400 / (4 + |x|) in [0, 100]: piece k = floor(y100), t = 2 y100 - (2k + 1),
    c_k0 + (c_k1 + (c_k2 + ... c_k6 t) t) t as CPU's nested form; 1 at y100 = 100 (|x| under 4 eps)."""
    k = jnp.clip(jnp.floor(y100), 0, 99).astype(jnp.int32)
    t = 2 * y100 - (2 * k + 1).astype(jnp.float64)
    c = [jnp.take(jnp.asarray(_SERIES[:, j]), k, mode="clip") for j in range(7)]
    acc = c[6]
    for j in range(5, -1, -1):
        acc = c[j] + acc * t
    return jnp.where(y100 >= 100, 1.0, acc)


def erfcx64(x):
    """calc_erfcx<double>: the series in 400 / (4 + |x|) for 0 <= x <= 50, the continued fraction
    ispi (x^2 (x^2 + 4.5) + 2) / (x (x^2 (x^2 + 5) + 3.75)) to 5e7 and ispi / x past it; for x < 0,
    2 exp(x^2) - erfcx(-x), 2 exp(x^2) alone below -6.1, +inf below -26.7."""
    a = jnp.abs(x)
    series = _erfcx_y100(400 / (4 + a))
    s = jnp.where(x > 50, x, 60.0)
    xx = s * s
    fraction = _ISPI * (xx * (xx + 4.5) + 2) / (s * (xx * (xx + 5) + 3.75))
    far = jnp.where(x > 5e7, _ISPI / jnp.where(x > 5e7, x, 1.0), fraction)
    positive = jnp.where(x > 50, far, series)
    twice = 2 * jnp.exp(x * x)
    negative = jnp.where(x < -6.1, twice, twice - series)
    negative = jnp.where(x < -26.7, jnp.inf, negative)
    out = jnp.where(x >= 0, positive, negative)
    return jnp.where(jnp.isnan(x), x, out)


def log_ndtr64(x):
    """calc_log_ndtr<double>: t = x / sqrt(2); x < -1: log(erfcx(-t) / 2) - t^2, else log1p(-erfc(t) / 2)."""
    t = x * _FRAC_SQRT_2
    low = x < -1
    below = jnp.log(erfcx64(jnp.where(low, -t, 1.0)) / 2) - t * t
    above = jnp.log1p(-jss.erfc(jnp.where(low, 0.0, t)) / 2)
    return jnp.where(low, below, above)
