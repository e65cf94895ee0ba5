"""The Hurwitz zeta and polygamma, summed as CPU PyTorch sums them (Cephes' Euler-Maclaurin in float64;
defined for a negative non-integer q, where JAX's zeta is off or NaN)."""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import math

import jax
import jax.numpy as jnp
import numpy as np
import torch

from jaxdev import dtypes, tracing
from jaxdev.ops.kit import J, apply, float_of, jitted, opmath, program
from jaxdev.ops.kit import transcendentals as tm
from jaxdev.ops.kit.division import divide
from jaxdev.ops.registry import aten, register, register_functional, store_into
from jaxdev.ops.special.functions import digamma, with_order

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
# Eager sums run the direct terms in rounds: the first of this many terms over every element, then
# rounds four times longer over the elements still summing only (a q of -5e6 takes 5e6 terms: summed
# over a whole tensor of other elements that finished after 20 terms, it took 10-30x CPU's time).
_FIRST_ROUND = 4096


def _negligible(term, total):
    eps = jnp.float64(_ZETA_EPS)
    return (-eps * total < term) & (term < eps * total)


def _active(i, a, done):
    return ~done & ((i < 9) | (a <= 9.0))


def _term(a, x):
    """a^-x, a direct term. For a negative a and an integer x it is |a|^-x signed (negative for an odd
    x), the same bits on XLA's CPU backend: a TPU's emulated float64 pow gave |a|^-x for an odd x, the
    sign lost (benchmarks/tpu_probe_zeta.py on a v5e: polygamma(2) 2,733 relative off). A non-integer x
    keeps pow's NaN (_finish makes it NaN there anyway), an infinite x pow's +0 or inf."""
    magnitude = jnp.abs(a) ** -x
    signed = jnp.where(jnp.fmod(x, 2.0) == 0.0, magnitude, -magnitude)
    return jnp.where((a < 0.0) & (x == jnp.floor(x)) & jnp.isfinite(x), signed, a**-x)


def _begin(x, q):
    """The direct sum's state before its first term: (a, b, total, done)."""
    return q, jnp.zeros_like(q), _term(q, x), jnp.zeros(q.shape, bool)


def _direct(x, a, b, total, done, i, end):
    """Direct terms until no element takes another or the term count reaches `end`: each element adds
    (a + 1)^-x while CPU's loop would (at least 9 terms, then until its base passes 9 or a term stops
    mattering). Returns (a, b, total, done, i)."""

    def step(state):
        i, a, b, total, done = state
        go = _active(i, a, done)
        a = jnp.where(go, a + 1.0, a)
        b = jnp.where(go, _term(a, x), b)
        total = jnp.where(go, total + b, total)
        return i + 1, a, b, total, done | (go & _negligible(b, total))

    def more(state):
        return jnp.any(_active(state[0], state[1], state[4])) & (state[0] < end)

    i, a, b, total, done = jax.lax.while_loop(more, step, (i, a, b, total, done))
    return a, b, total, done, i


def _finish(x, q, a, b, total, done):
    """The Euler-Maclaurin tail (at most 12 terms) where the direct terms did not settle it, then the
    edge cases (poles, x < 1, a negative q with a non-integer x)."""
    eps = jnp.float64(_ZETA_EPS)
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


def _hurwitz_zeta(x, q):
    """zeta(x, q) = sum_k (k + q)^-x in float64, the way CPU PyTorch sums it (Cephes): direct terms,
    then the Euler-Maclaurin tail; each element stops where CPU's loop would. One traceable program."""
    x, q = jnp.broadcast_arrays(x.astype(jnp.float64), q.astype(jnp.float64))
    a, b, total, done, _ = _direct(x, *_begin(x, q), jnp.int32(0), _ZETA_MAX_TERMS)
    return _finish(x, q, a, b, total, done)


def hurwitz_zeta(x: jax.Array, q: jax.Array) -> jax.Array:
    """_hurwitz_zeta's values; eagerly, its direct terms in rounds over the elements still summing."""
    if tracing.is_traced(x) or tracing.is_traced(q):
        return _hurwitz_zeta(x, q)
    shape = jnp.broadcast_shapes(x.shape, q.shape)
    x, q = _flat_pair(x, q)
    n = x.shape[0]
    state, i, live, rows = _started(x, q), 0, np.arange(n), None
    chunk = _FIRST_ROUND
    while True:
        end = np.int32(min(i + chunk, _ZETA_MAX_TERMS))
        if rows is None:  # the first round: every element
            *state, i, going = _round(x, *state, np.int32(i), end)
        else:  # the elements still summing, gathered into a power-of-two length (few programs)
            *part, i, going = _round(*_gathered(rows, x, *state), np.int32(i), end)
            state = _scattered(rows, tuple(state), tuple(part))
        i, going = int(i), np.asarray(going)[: live.size]
        if not going.any() or i >= _ZETA_MAX_TERMS:
            break
        live, chunk = live[going], chunk * 4
        rows = np.full(1 << (live.size - 1).bit_length(), n, np.int64)
        rows[: live.size] = live
    return _finished(x, q, *state).reshape(shape)


@program
def _flat_pair(x, q):
    x, q = jnp.broadcast_arrays(x.astype(jnp.float64), q.astype(jnp.float64))
    return x.reshape(-1), q.reshape(-1)


_started = program(_begin)
_finished = program(_finish)


@program
def _round(x, a, b, total, done, i, end):
    a, b, total, done, i = _direct(x, a, b, total, done, i, end)
    return a, b, total, done, i, _active(i, a, done)


@program
def _gathered(rows, x, a, b, total, done):
    """The rows' elements (rows past the end: a finished element)."""
    take = lambda v, fill: jnp.take(v, rows, mode="fill", fill_value=fill)
    return take(x, 2.0), take(a, 10.0), take(b, 0.0), take(total, 0.0), take(done, True)


@program
def _scattered(rows, state, part):
    return tuple(full.at[rows].set(p, mode="drop") for full, p in zip(state, part))


def _zeta(x, q):
    return _hurwitz_zeta(x, q).astype(jnp.result_type(x, q))


def _operands(x, q):
    return jnp.stack(jnp.broadcast_arrays(x, q))


@register_functional(aten.special_zeta.default, aten.special_zeta.self_scalar, aten.special_zeta.other_scalar)
def special_zeta(self, other):
    """Float-valued as register_binary's ops: the operands cast as TensorIterator casts them (to the
    promoted dtype, then its opmath), summed in float64, the result rounded back through opmath."""
    dt = float_of(torch.result_type(self, other))
    if dt in (torch.float16, torch.bfloat16):  # CPU's kernel has float and double only
        raise NotImplementedError(f"\"zeta_cpu\" not implemented for '{dtypes.scalar_name(dt)}'")
    xq = apply(_operands, dt, torch.float64, (self, other))
    if tracing.is_traced(xq):
        return apply(_zeta, dt, dt, (self, other))
    return _rounded(dtypes.to_jax_dtype(dt))(hurwitz_zeta(xq[0], xq[1]))


@jitted
def _rounded(jdt):
    return lambda v: v.astype(opmath(jdt)).astype(jdt)


def _trigamma(x):
    """PyTorch's trigamma: reflection below 1/2, six recurrence steps, then the asymptotic series. Its
    divisions are division.divide's, IEEE's where the platform's is not (a TPU's 2 ulps each had
    polygamma(1) 14 ulps from CPU's under tests/tpu_emulation.py)."""
    below = x < 0.5
    sin_pi_x = tm.sin(jnp.pi * x)
    total = jnp.where(below, divide(-(jnp.pi * jnp.pi), sin_pi_x * sin_pi_x), jnp.zeros_like(x))
    x = jnp.where(below, 1 - x, x)
    for _ in range(6):
        total = total + divide(1, x * x)
        x = x + 1
    ixx = divide(1, x * x)
    total = total + divide(1 + divide(1, 2 * x) + ixx * (1.0 / 6 - ixx * (1.0 / 30 - ixx * (1.0 / 42))), x)
    return jnp.where(below, -total, total)


def _factorial(n, jdt):
    """n! as CPU's polygamma takes it, std::exp(std::lgamma(n + 1)) from the C library in the compute
    dtype (exp/lgamma in double, expf/lgammaf in float): not exactly n! (119.99999999999997 for n = 5),
    and JAX's gammaln differs from it (by 1-3 ulps in double, 3e-6 relative at n = 10 in float)."""
    return jnp.asarray(_c_factorial(n, jnp.dtype(jdt) == jnp.float64), jdt)


@functools.cache
def _c_factorial(n: int, double: bool) -> float:
    libm = _libm()
    if libm is None:  # no C library to ask: Python's own lgamma (not always the C library's last bit)
        return math.exp(math.lgamma(n + 1.0))
    if double:
        return libm.exp(libm.lgamma(n + 1.0))
    return libm.expf(libm.lgammaf(n + 1.0))


@functools.cache
def _libm():
    try:
        libm = ctypes.CDLL(ctypes.util.find_library("m") or "libm.so.6")
    except OSError:
        return None
    for name, kind in (
        ("exp", ctypes.c_double),
        ("lgamma", ctypes.c_double),
        ("expf", ctypes.c_float),
        ("lgammaf", ctypes.c_float),
    ):
        getattr(libm, name).restype, getattr(libm, name).argtypes = kind, [kind]
    return libm


def _polygamma(x, n):
    if n == 0:
        return digamma(x)
    if n == 1:
        return _trigamma(x)
    sign = 1.0 if n % 2 else -1.0
    return sign * _factorial(n, x.dtype) * _hurwitz_zeta(jnp.asarray(n + 1.0), x).astype(x.dtype)


@register_functional(aten.polygamma.default, inplace=False)
def polygamma(n, self):
    if n < 0:
        raise RuntimeError("polygamma(n, x) does not support negative n.")
    dt, x = float_of(self.dtype), J(self)
    if n < 2 or tracing.is_traced(x):
        return with_order(_polygamma, int(n), dt, dt)(x)
    jdt = dtypes.to_jax_dtype(dt)
    x = _in_opmath(jdt)(x)
    return _scaled(int(n), jdt)(hurwitz_zeta(jnp.asarray(n + 1.0), x))


@jitted
def _in_opmath(jdt):
    return lambda x: x.astype(opmath(jdt))


@jitted
def _scaled(n, jdt):
    """polygamma(n >= 2) from zeta(n + 1, x): (-1)^(n+1) n! zeta, in opmath, rounded to the result."""
    sign, compute = (1.0 if n % 2 else -1.0), opmath(jdt)
    return lambda z: (sign * _factorial(n, compute) * z.astype(compute)).astype(jdt)


@register(aten.polygamma_.default)
def polygamma_(self, n):
    """In place, the arguments come the other way round (self first): not derivable from polygamma(n, self)."""
    store_into(self, polygamma(n, self), resize=False)
    return self
