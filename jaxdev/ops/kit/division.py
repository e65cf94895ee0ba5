"""float32 division as IEEE's where the platform's is not: a TPU's was measured up to 191 ulps from
CPU's (its reciprocal is an approximation). Below the transcendentals (they divide through here),
so it imports none of the kit's numerics."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from jaxdev.ops.kit import math_mode


def division_ieee() -> bool:
    """Whether a division is left to the platform: where it divides as IEEE does, so that a division
    kept from XLA's rewrite into a multiplication by the reciprocal is CPU's (not where capabilities'
    `division_approximate` holds: a TPU), or where JAXDEV_MATH=fast asks for XLA's numerics over CPU's
    bits (the correction is ~40 operations a quotient: compiled for a TPU without the chip, AdamW's
    program took 8.1 s with them, 3.2 without). Read when a kernel is traced."""
    from jaxdev.ops.kit import capabilities  # imports the fallback, which needs the ops package loaded

    return not capabilities.fact("division_approximate") or math_mode.mode() == "fast"


def veltkamp(a):
    """a = hi + lo exactly, hi holding float32's top 12 significant bits (Veltkamp's split)."""
    t = a * jnp.float32(4097.0)
    hi = t - (t - a)
    return hi, a - hi


def _quotient(a, b):
    """The platform's float32 division (a seam: tests put an approximate one here)."""
    return a / b


# The correction below needs |b| and |q| where Veltkamp's split and the residual's parts stay normal
# floats: a divisor past 2**100 is scaled down, a quotient under 2**-96 up and one past 2**100 down,
# by powers of two (exact).
_BIG, _SMALL = 2.0**100, 2.0**-96


def _corrected(a, b):
    """q0 = a / b and q0 + r / b, its residual r = a - q0 * b exact (Dekker's product, no FMA
    assumed; a - p is exact when q0 is within a factor 2 of a / b); q0 as it is where that is not
    finite."""
    q0 = _quotient(a, b)
    p = q0 * b
    (qh, ql), (bh, bl) = veltkamp(q0), veltkamp(b)
    e = ((qh * bh - p) + qh * bl + ql * bh) + ql * bl  # p + e == q0 * b exactly
    q = q0 + _quotient((a - p) - e, b)
    return jnp.where(jnp.isfinite(q) & (q0 != 0), q, q0)  # a zero keeps its sign: -0 - -0 is +0


def divide(a, b):
    """a / b for float arrays: the platform's division where it is IEEE's (CPU: its bits); where it is
    not (division_ieee), float32's corrected to within about an ulp in float32 alone. A TPU's is
    within 2 ulps but for divisors near float32's limits (past about 2**115 or under 2**-114: up to
    7.5e7 ulps there), so those are scaled by powers of two, as is what the correction's range needs:
    a divisor past 2**100 divided by 2**32 and one under 2**-100 multiplied by it (the dividend with
    it), a quotient under 2**-96 computed 2**64 times larger and one past 2**100 2**64 times
    smaller, then scaled back (exact while the result is normal; a subnormal one is rounded twice,
    and a TPU flushes it anyway): sigmoid's 1 / (1 + exp(80)) is corrected as 1 / 3 is."""
    q0 = _quotient(a, b)
    if division_ieee() or q0.dtype != jnp.float32:
        return q0
    return _divide32(jnp.asarray(a, jnp.float32), jnp.asarray(b, jnp.float32))


@jax.custom_jvp
def _divide32(a, b):
    """divide's float32 correction, for float32 a and b where the platform's division is not IEEE's."""
    f32 = jnp.float32
    big_b, tiny_b = jnp.abs(b) > f32(_BIG), jnp.abs(b) < f32(1 / _BIG)
    # a dividend under 2**-100 over a divisor to 2**64: both up, or q0 * b and the split's parts fall
    # below float32's smallest normal, which XLA flushes (FLT_MIN / 1e-20 came out twice too large)
    tiny_a = (jnp.abs(a) < f32(1 / _BIG)) & (jnp.abs(b) <= f32(2.0**64))
    down = jnp.where(big_b, f32(2.0**-32), jnp.where(tiny_b | tiny_a, f32(2.0**32), f32(1)))
    a1, b1 = a * down, b * down
    q1 = _quotient(a1, b1)  # a divisor in range: the platform's quotient within a few ulps
    small_q, big_q = jnp.abs(q1) < f32(_SMALL), jnp.abs(q1) > f32(_BIG)
    up = jnp.where(small_q, f32(2.0**64), jnp.where(big_q, f32(2.0**-64), f32(1)))
    a2 = a1 * up
    q = _corrected(a2, b1) * jnp.where(small_q, f32(2.0**-64), jnp.where(big_q, f32(2.0**64), f32(1)))
    return jnp.where(jnp.isfinite(a2) & jnp.isfinite(q), q, q1)


@_divide32.defjvp
def _divide32_jvp(primals, tangents):
    """(da - q db) (1 / b): differentiating the correction itself would round Veltkamp's split's
    tangents (4097 da) and leave the gradient 2**-12 off; the tangent is linear in (da, db), so that
    JAX can transpose it (jax.grad), which a division of the tangent, its scaling chosen by the
    tangent's own magnitude, was not."""
    (a, b), (da, db) = primals, tangents
    q = _divide32(a, b)
    return q, (da - q * db) * _divide32(jnp.ones_like(b), b)
