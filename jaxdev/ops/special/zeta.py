"""The Hurwitz zeta and polygamma, summed as CPU PyTorch sums them (Cephes' Euler-Maclaurin in float64;
defined for a negative non-integer q, where JAX's zeta is off or NaN)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import jax.scipy.special as jss

from jaxdev.ops.registry import aten, register, register_functional, store_into
from jaxdev.ops.special.functions import digamma, register_binary, with_order
from jaxdev.ops.toolkit import J, float_of

# (2j)! / B_2j, the Euler-Maclaurin tail's coefficients (B_2j the Bernoulli numbers).
_EULER_MACLAURIN = (
    12.0,
    -720.0,
    30240.0,
    -1209600.0,
    47900160.0,
    -1.8924375803183791606e9,
    7.47242496e10,
    -2.950130727918164224e12,
    1.1646782814350067249e14,
    -4.5979787224074726105e15,
    1.8152105401943546773e17,
    -7.1661652561756670113e18,
)
_ZETA_EPS = 1.11022302462515654042e-16
# A q near -2^52 needs that many direct terms; CPU spends them, a device stops here (2^24 terms).
_ZETA_MAX_TERMS = 1 << 24


def _hurwitz_zeta(x, q):
    """zeta(x, q) = sum_k (k + q)^-x in float64, the way CPU PyTorch sums it: direct terms until at
    least 9 are taken and the next base passes 9 (or a term stops mattering), then the
    Euler-Maclaurin tail, at most 12 of its terms. Each element stops where CPU's loop would."""
    x, q = jnp.broadcast_arrays(x.astype(jnp.float64), q.astype(jnp.float64))
    eps = jnp.float64(_ZETA_EPS)

    def negligible(term, total):
        return (-eps * total < term) & (term < eps * total)

    def active(state):
        i, a, _, _, done = state
        return ~done & ((i < 9) | (a <= 9.0))

    def step(state):
        i, a, b, total, done = state
        go = active(state)
        a = jnp.where(go, a + 1.0, a)
        b = jnp.where(go, a**-x, b)
        total = jnp.where(go, total + b, total)
        return i + 1, a, b, total, done | (go & negligible(b, total))

    start = (jnp.int32(0), q, jnp.zeros_like(q), q**-x, jnp.zeros(q.shape, bool))
    _, a, b, total, done = jax.lax.while_loop(lambda st: jnp.any(active(st)) & (st[0] < _ZETA_MAX_TERMS), step, start)

    w = a
    tail = total + b * w / (x - 1.0) - 0.5 * b
    total = jnp.where(done, total, tail)
    factor, k = jnp.ones_like(q), jnp.zeros_like(q)
    for coefficient in _EULER_MACLAURIN:
        factor = factor * (x + k)
        b = b / w
        t = factor * b / coefficient
        new_total = total + t
        total = jnp.where(done, total, new_total)
        done = done | (jnp.abs(t / new_total) < eps)
        k = k + 1.0
        factor = factor * (x + k)
        b = b / w
        k = k + 1.0

    nan, inf = jnp.float64(jnp.nan), jnp.float64(jnp.inf)
    non_positive = q <= 0.0
    total = jnp.where(non_positive & (x != jnp.floor(x)), nan, total)
    total = jnp.where(non_positive & (q == jnp.floor(q)), inf, total)
    total = jnp.where(x < 1.0, nan, total)
    return jnp.where(x == 1.0, inf, total)


def _zeta(x, q):
    return _hurwitz_zeta(x, q).astype(jnp.result_type(x, q))


register_binary((aten.special_zeta.default, aten.special_zeta.self_scalar, aten.special_zeta.other_scalar), _zeta)


def _trigamma(x):
    """PyTorch's trigamma: reflection below 1/2, six recurrence steps, then the asymptotic series."""
    below = x < 0.5
    sin_pi_x = jnp.sin(jnp.pi * x)
    total = jnp.where(below, -(jnp.pi * jnp.pi) / (sin_pi_x * sin_pi_x), jnp.zeros_like(x))
    x = jnp.where(below, 1 - x, x)
    for _ in range(6):
        total = total + 1 / (x * x)
        x = x + 1
    ixx = 1 / (x * x)
    total = total + (1 + 1 / (2 * x) + ixx * (1.0 / 6 - ixx * (1.0 / 30 - ixx * (1.0 / 42)))) / x
    return jnp.where(below, -total, total)


def _polygamma(x, n):
    if n == 0:
        return digamma(x)
    if n == 1:
        return _trigamma(x)
    sign = 1.0 if n % 2 else -1.0
    factorial = jnp.exp(jss.gammaln(jnp.asarray(n + 1.0, x.dtype)))
    return sign * factorial * _hurwitz_zeta(jnp.asarray(n + 1.0), x).astype(x.dtype)


@register_functional(aten.polygamma.default, inplace=False)
def polygamma(n, self):
    if n < 0:
        raise RuntimeError("polygamma(n, x) does not support negative n.")
    dt = float_of(self.dtype)
    return with_order(_polygamma, int(n), dt, dt)(J(self))


@register(aten.polygamma_.default)
def polygamma_(self, n):
    """In place, the arguments come the other way round (self first): not derivable from polygamma(n, self)."""
    store_into(self, polygamma(n, self), resize=False)
    return self
