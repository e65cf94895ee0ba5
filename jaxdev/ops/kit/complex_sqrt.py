"""complex64 sqrt and |z| on jaxdev's float32 arithmetic (the corrected sqrt and division), where
jaxdev's functions are chosen (a TPU): XLA's complex sqrt is built on its real sqrt and division, 2 ulps
off there. csqrt as glibc computes it: t = sqrt((|x| + |z|) / 2), then (t, y / 2t) for x >= 0 and
(|y| / 2t, +-t) for x < 0; |z| without overflow or a rounded square (hypot). Callers pass finite parts
and apply Annex G's special values after (complex_c99.py)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from jaxdev.ops.kit import transcendentals_gamma as tg
from jaxdev.ops.kit import transcendentals_trig as trig
from jaxdev.ops.kit.division import divide, scaled, sqrt

_F = np.float32


def hypot(x, y):
    """|x + iy| for finite float32 parts, within an ulp: both scaled so the larger lies in [1, 2) (an
    exact power of two), the squares as exact pairs summed error-free, the sqrt of the sum corrected by
    its exact residual."""
    m, n = jnp.maximum(jnp.abs(x), jnp.abs(y)), jnp.minimum(jnp.abs(x), jnp.abs(y))
    e = jnp.clip((jax.lax.bitcast_convert_type(m, jnp.int32) >> 23) - 127, -126, 127)
    ms, ns = scaled(m, -e), scaled(n, -e)
    mh, ml = tg.two_product(ms, ms)
    nh, nl = tg.two_product(ns, ns)
    s, err = trig.two_sum(mh, nh)
    lo = err + (ml + nl)
    r = sqrt(s)
    p, p_err = tg.two_product(r, r)
    r = r + (((s - p) - p_err) + lo) / (r + r)  # the residual s + lo - r^2, exact but for lo's rounding
    return jnp.where(m == 0, m, scaled(r, e))


def sqrt_parts(x, y):
    """csqrt(x + iy) for finite parts, y of either sign: (re, im)."""
    h = hypot(x, y)
    t = sqrt(_F(0.5) * jnp.abs(x) + _F(0.5) * h)  # halves first: |x| + |z| may overflow
    other = divide(jnp.abs(y), t + t)
    positive = x >= 0
    re = jnp.where(positive, t, other)
    im = jnp.copysign(jnp.where(positive, other, t), y)
    zero = t == 0
    return jnp.where(zero, jnp.zeros_like(x), re), jnp.where(zero, y, im)


def complex_sqrt(z):
    re, im = sqrt_parts(z.real, z.imag)
    return jax.lax.complex(re, im)
