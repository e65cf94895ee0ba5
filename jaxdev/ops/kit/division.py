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


def exact_product(a, b):
    """(p, e): p = a * b rounded and e its rounding error, p + e == a * b exactly (Dekker's product on
    Veltkamp's splits: no FMA assumed), while the parts stay normal floats."""
    p = a * b
    ah, al = veltkamp(a)
    bh, bl = (ah, al) if b is a else veltkamp(b)
    return p, ((ah * bh - p) + ah * bl + al * bh) + al * bl


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
    p, e = exact_product(q0, b)
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
    and a TPU flushes it anyway): sigmoid's 1 / (1 + exp(80)) is corrected as 1 / 3 is. Under
    JAXDEV_MATH=near the platform's quotient, such divisors scaled into range (_divide32_near)."""
    q0 = _quotient(a, b)
    if division_ieee() or q0.dtype != jnp.float32:
        return q0
    a, b = jnp.asarray(a, jnp.float32), jnp.asarray(b, jnp.float32)
    return _divide32_near(a, b) if math_mode.platform_arithmetic() else _divide32(a, b)


@jax.custom_jvp
def _divide32(a, b):
    """divide's float32 correction, for float32 a and b where the platform's division is not IEEE's."""
    f32 = jnp.float32
    # a dividend under 2**-100 over a divisor to 2**64: both up, or q0 * b and the split's parts fall
    # below float32's smallest normal, which XLA flushes (FLT_MIN / 1e-20 came out twice too large)
    tiny_a = (jnp.abs(a) < f32(1 / _BIG)) & (jnp.abs(b) <= f32(2.0**64))
    down = _divisor_scale(b, tiny_a)
    a1, b1 = a * down, b * down
    q1 = _quotient(a1, b1)  # a divisor in range: the platform's quotient within a few ulps
    small_q, big_q = jnp.abs(q1) < f32(_SMALL), jnp.abs(q1) > f32(_BIG)
    up = jnp.where(small_q, f32(2.0**64), jnp.where(big_q, f32(2.0**-64), f32(1)))
    a2 = a1 * up
    q = _corrected(a2, b1) * jnp.where(small_q, f32(2.0**-64), jnp.where(big_q, f32(2.0**64), f32(1)))
    return jnp.where(jnp.isfinite(a2) & jnp.isfinite(q), q, q1)


def _divisor_scale(b, up=False):
    """The power of two both operands of a / b are multiplied by (exact) so that the divisor is in the
    platform's range: 2**-32 for a divisor past 2**100, 2**32 for one under 2**-100 (or where `up`), 1
    elsewhere."""
    f32 = jnp.float32
    big_b, tiny_b = jnp.abs(b) > f32(_BIG), jnp.abs(b) < f32(1 / _BIG)
    return jnp.where(big_b, f32(2.0**-32), jnp.where(tiny_b | up, f32(2.0**32), f32(1)))


def _linear_jvp(quotient):
    """`quotient`'s derivative, (da - q db) (1 / b): differentiating a correction itself would round
    Veltkamp's split's tangents (4097 da) and leave the gradient 2**-12 off; the tangent is linear in
    (da, db), so that JAX can transpose it (jax.grad), which a division of the tangent, its scaling
    chosen by the tangent's own magnitude, was not."""

    def jvp(primals, tangents):
        (a, b), (da, db) = primals, tangents
        q = quotient(a, b)
        return q, (da - q * db) * quotient(jnp.ones_like(b), b)

    return jvp


_divide32.defjvp(_linear_jvp(_divide32))


@jax.custom_jvp
def _divide32_near(a, b):
    """JAXDEV_MATH=near's float32 division where the platform's is approximate: its quotient, within 2
    ulps for a divisor in range on a TPU, with a divisor past 2**100 or under 2**-100 scaled by 2**-32
    or 2**32 first (the dividend with it: exact) so that it is in range (unscaled, 7.5e7 ulps off
    there: sigmoid's 1 / (1 + exp(80))); no residual correction (about 40 operations a quotient).
    One quotient: where the scaled dividend overflows (|a| past 2**96 over a divisor under 2**-100) the
    quotient overflows too, and the scaled one is that infinity with the same sign; an infinite or NaN
    dividend stays one (the unscaled quotient _divide32 falls back to there gives the same values)."""
    down = _divisor_scale(b)
    return _quotient(a * down, b * down)


_divide32_near.defjvp(_linear_jvp(_divide32_near))


def fmod(a, b):
    """C's fmod(a, b) (torch.fmod; remainder and floor division go through it): the platform's where its
    division is IEEE's (XLA's CPU rem is C's, bit for bit); where it is not, exact for float32 and the
    halves (computed in float32: a half's remainder is a half), since a TPU's rem is a - b trunc(a / b)
    on its approximate quotient: on a v5e 97 % of float32 fmod(k b, b) came out 0 where CPU's is b less
    an ulp's worth, and 28 % of random pairs differed (2026-12-07, .tpu-scratch's pieces probe)."""
    a, b = jnp.asarray(a), jnp.asarray(b)
    kinds = (jnp.float32, jnp.float16, jnp.bfloat16)
    if division_ieee() or jnp.result_type(a, b) not in kinds:
        return jnp.fmod(a, b)
    dtype = jnp.result_type(a, b)
    return _fmod32(a.astype(jnp.float32), b.astype(jnp.float32)).astype(dtype)


def _exponent(x):
    """floor(log2 x) of a positive normal float32, from its bits."""
    return (jax.lax.bitcast_convert_type(x, jnp.int32) >> 23) - 127


def power_of_two(n):
    """2^n as float32 for integer n (int32) in [-126, 127], from its bits."""
    return jax.lax.bitcast_convert_type((n + 127) << 23, jnp.float32)


def scaled(p, n):
    """p * 2^n in two exact steps (n in [-150, 128], or to +-254 where the result stays normal), rounded
    once where the result is subnormal."""
    half = n >> 1
    return p * power_of_two(half) * power_of_two(n - half)


def _reduce_once(r, m):
    """r reduced modulo m * 2^j (j >= 0, the quotient under 2^21: exact below), r and m positive and
    finite; r as it is where r < m. The quotient q = floor(r / (m 2^j)) from the corrected division
    is right or one too high (a quotient just under an integer rounded up to it); r - q m 2^j is
    exact: q m 2^j = p + e by Dekker's product, r - p by Sterbenz's lemma (q >= 1: p within a factor
    2 of r), and the difference, a multiple of m 2^j's ulp under it in size, is a float32."""
    f32 = jnp.float32
    j = jnp.maximum(_exponent(r) - _exponent(m) - 20, 0)
    mj = scaled(m, j)  # m 2^j, exact (j reaches 234: in two factors); r < mj 2^22 below
    # Dekker's parts stay normal: both scaled by a power of two where mj is near float32's limits
    big, tiny = mj > f32(2.0**100), mj < f32(2.0**-100)
    scale = jnp.where(big, f32(2.0**-64), jnp.where(tiny, f32(2.0**64), f32(1)))
    r1, mj = r * scale, mj * scale
    q = jnp.floor(_divide32(r1, mj))
    p, e = exact_product(q, mj)
    t = (r1 - p) - e
    t = jnp.where(t < 0, t + mj, t)
    return jnp.where(r < m, r, t * jnp.where(big, f32(2.0**64), jnp.where(tiny, f32(2.0**-64), f32(1))))


@jax.custom_jvp
def _fmod32(a, b):
    r, m = jnp.abs(a), jnp.abs(b)
    live = jnp.isfinite(r) & jnp.isfinite(m) & (m > 0)
    r, m = jnp.where(live, r, 0), jnp.where(live, m, 1)
    r = jax.lax.while_loop(lambda r: jnp.any(r >= m), lambda r: _reduce_once(r, m), r)
    out = jnp.copysign(r, a)
    out = jnp.where(jnp.isinf(b) & jnp.isfinite(a), a, out)  # fmod(x, +-inf) is x
    return jnp.where(live | (jnp.isinf(b) & jnp.isfinite(a)), out, jnp.float32(jnp.nan))


@_fmod32.defjvp
def _fmod32_jvp(primals, tangents):
    """lax.rem's derivative, da - trunc(a / b) db: JAX cannot reverse-differentiate the reduction's
    while_loop (grid_sample's reflection padding, differentiated by jax.vjp, raised on a TPU)."""
    (a, b), (da, db) = primals, tangents
    return _fmod32(a, b), da - jnp.trunc(_divide32(a, b)) * db


def sqrt_ieee() -> bool:
    """Whether sqrt is left to the platform: where it is IEEE's (CPU), or JAXDEV_MATH=fast or near."""
    from jaxdev.ops.kit import capabilities

    return not capabilities.fact("sqrt_approximate") or math_mode.platform_arithmetic()


def sqrt(x):
    """sqrt(x): the platform's where it is IEEE's; where it is not (a TPU's float32 sqrt is 2 ulps off on
    41 % of inputs), float32's corrected by its residual, s + (x - s^2) / 2s with s^2 exact (Dekker's
    product; x - p exact by Sterbenz's lemma), rounded once: IEEE's but for a rare double rounding. A
    tiny x (under 2^-60) is scaled by 2^64 first (the split's products stay normal); zeros, infinities, NaN as they are."""
    x = jnp.asarray(x)
    if sqrt_ieee() or x.dtype != jnp.float32:
        return jnp.sqrt(x)
    f32 = jnp.float32
    tiny = x < f32(2.0**-60)  # its split's smallest product stays normal above it: XLA flushes subnormals
    y = jnp.where(tiny, x * f32(2.0**64), x)
    s = jnp.sqrt(y)
    p, e = exact_product(s, s)
    residual = (y - p) - e
    fixed = s + residual / (s + s)  # the correction's own quotient needs no IEEE division: it is ulps
    fixed = jnp.where(jnp.isfinite(fixed) & (s > 0), fixed, s)
    return jnp.where(tiny, fixed * f32(2.0**-32), fixed)
