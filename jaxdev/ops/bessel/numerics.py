"""The evaluation helpers the Bessel and Airy bodies share: Horner and Chebyshev sums in CPU's order,
constants in the input's dtype, divisions and square roots behind an optimization barrier, exp and log
taken wide and rounded (see the package's docstring for why)."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
from jax import lax


def horner(coefficients, z):
    """sum c_i z^(n-i) as Cephes' loop computes it: acc = acc * z + c, from acc = 0."""
    acc = jnp.zeros_like(z)
    for c in coefficients:
        acc = acc * z + c
    return acc


def chebyshev(coefficients, y):
    """Cephes' chbevl recurrence; returns (b0, b2), the series being 0.5 * (b0 - b2)."""
    p = q = jnp.zeros_like(y)
    b = jnp.full_like(y, coefficients[0])
    for c in coefficients[1:]:
        p, q = q, b
        b = y * q - p + c
    return b, p


def const(value, like):
    return jnp.asarray(value, like.dtype)


def opaque(x):
    """`x` hidden from XLA's algebraic simplifier, which would otherwise round differently from
    CPU: it turns a / c into a * (1 / c), a / sqrt(b) into a * rsqrt(b), (a / b) / c into
    a / (b * c)."""
    return lax.optimization_barrier(x)


def sqrt_(x):
    """sqrt(x) for use as a divisor (kept from becoming rsqrt)."""
    return opaque(jnp.sqrt(x))


def widened(fn):
    """exp and log of float32 taken in float64 and rounded: that agrees with the C library's expf and
    logf that CPU calls far more often than XLA's float32 approximations do (sin and cos already
    agree in float32)."""

    def run(x):
        if x.dtype == jnp.float32:
            return fn(x.astype(jnp.float64)).astype(jnp.float32)
        return fn(x)

    return run


exp_, log_ = widened(jnp.exp), widened(jnp.log)


def log_half(x):
    """log(0.5 * x) with 0.5 * x subnormal as CPU has it: XLA flushes subnormals to zero (log would
    give -inf at the smallest normal x). float32 halves in float64 and rounds to float32's
    subnormal grid; float64, having no wider type, takes log(x * 2^52) - 53 log 2 there."""
    if x.dtype == jnp.float32:
        y = 0.5 * x.astype(jnp.float64)
        y = jnp.round(y * 2.0**149) * 2.0**-149
        return jnp.log(y).astype(jnp.float32)
    subnormal = x < 2 * jnp.finfo(x.dtype).tiny
    scaled = jnp.log(x * 2.0**52) - 53 * np.log(2.0)
    return jnp.where(subnormal, scaled, jnp.log(0.5 * x))


def divide_by(x, constant):
    """x / constant as a true division (a constant divisor must be a full array behind the barrier)."""
    return x / opaque(jnp.full_like(x, constant))
