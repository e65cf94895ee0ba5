"""Orthogonal polynomials of torch.special (Chebyshev T/U/V/W and their shifted forms, Hermite H/He,
Laguerre L, Legendre P) with a tensor degree n.

Each is evaluated the way CPU PyTorch evaluates it (ATen's Math.h), branch for branch: x and n are
cast to the common float dtype (integers and bool give the default float dtype; half, bfloat16 and
complex raise CPU's NotImplementedError), n is then truncated to int64 (NaN, infinities and values
outside int64 become INT64_MIN, as x86's conversion makes them, so the result is 0), special values
of x and the closed forms (cos(n acos x) and its kin for a large n inside the interval) come first,
and otherwise the three-term recurrence runs up to n, stopping early at a NaN where CPU's loop does.

The recurrence length depends on the values of n, so it is a `lax.while_loop` that runs while any
element is still short of its own n; each element stops where CPU's loop would, so the kernels trace
under jax.jit (and torch.compile). The loop is as long as the largest n that reaches it: like CPU, a
huge n inside the interval where no closed form applies (Legendre, Laguerre) takes that many steps.

On XLA's CPU backend the recurrences are bit-equal to CPU PyTorch: both contract a*b - c*d into
fma(a, b, -(c*d)), and the step count is kept as an array so that dividing by k + 1 stays a true
division. The closed forms differ from CPU by libm's acos error (glibc's acosf is not correctly
rounded), which n amplifies. Where CPU is undefined, x = NaN with n >= 2 in the polynomials whose
loop returns a variable it never initialised (all but T, H and He: CPU gives 0 or NaN depending on
the neighbouring elements), the result here is NaN.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import torch

from jaxdev import dtypes
from jaxdev.ops.kit import apply, float_of
from jaxdev.ops.kit import transcendentals as tm
from jaxdev.ops.registry import aten, register_functional

_INT64_MIN = jnp.iinfo(jnp.int64).min
_TWO_63 = 2.0**63


def _degree(n):
    """CPU's static_cast<int64_t>(n) of the float degree; what x86 gives where C++ leaves it undefined."""
    ok = (n >= -_TWO_63) & (n < _TWO_63)  # False for NaN
    return jnp.where(ok, jnp.trunc(jnp.where(ok, n, 0)).astype(jnp.int64), jnp.int64(_INT64_MIN))


def _evaluate(cases, n, first, step, *, stop_at_nan):
    """CPU's if-chain `cases` [(condition, value)] in order, else the recurrence.

    The recurrence starts from p = 1, q = `first` (the degree-1 value) and takes q <- step(k, p, q),
    p <- q for k = 1 .. n-1 (an element stops at a NaN q when `stop_at_nan`); the result is q."""
    shape = jnp.broadcast_shapes(n.shape, first.shape, *(jnp.shape(c) for c, _ in cases))
    n = jnp.broadcast_to(n, shape)
    q = jnp.broadcast_to(first, shape)
    taken = jnp.zeros(shape, bool)
    for condition, _ in cases:
        taken = taken | condition
    recurring = ~taken

    def active(k, q):
        go = recurring & (k < n)
        return go & ~jnp.isnan(q) if stop_at_nan else go

    def body(state):
        k, p, q = state
        go = active(k, q)
        r = step(k, p, q)
        return k + 1, jnp.where(go, q, p), jnp.where(go, r, q)

    # The step count is an array, not a scalar: XLA turns a division by a broadcast scalar into a
    # multiplication by its reciprocal, which rounds differently from CPU's division.
    start = (jnp.ones(shape, jnp.int64), jnp.ones(shape, q.dtype), q)
    _, _, q = jax.lax.while_loop(lambda s: jnp.any(active(s[0], s[2])), body, start)
    conditions = [jnp.broadcast_to(c, shape) for c, _ in cases]
    values = [jnp.broadcast_to(jnp.asarray(v).astype(q.dtype), shape) for _, v in cases]
    return jnp.select(conditions, values, q)


def _even(n):
    return n % 2 == 0


def _sign(condition, value):
    """value where condition, else -value (computed in int64 where CPU computes it so)."""
    return jnp.where(condition, value, -value)


def _t(x, n, *, shifted):
    """Chebyshev T, or its shifted form T*(x) = T(2x - 1) with special points x == 1 and x == 0."""
    y = x + x - 1 if shifted else x
    cases = [(n < 0, 0)]
    if shifted:
        cases += [(x == 1, 1), (x == 0, _sign(_even(n), 1))]
    else:
        cases.append((jnp.abs(x) == 1, _sign((x > 0) | _even(n), 1)))
    closed = tm.cos(n.astype(x.dtype) * jnp.arccos(y))
    cases += [((n > 6) & (jnp.abs(y) < 1), closed), (n == 0, 1), (n == 1, y)]
    return _evaluate(cases, n, y, lambda k, p, q: (y + y) * q - p, stop_at_nan=True)


def _u_closed(y, n):
    dt = y.dtype
    m = (n + 1).astype(dt)
    theta = jnp.arccos(y)
    s = tm.sin(theta)
    return jnp.where(s != 0, tm.sin(m * theta) / s, m * tm.cos(m * theta) / y)


def chebyshev_u(x, n):
    cases = [
        (n < 0, 0),
        (jnp.abs(x) == 1, _sign((x > 0) | _even(n), n + 1)),
        ((n > 8) & (jnp.abs(x) < 1), _u_closed(x, n)),
        (n == 0, 1),
        (n == 1, x + x),
    ]
    return _evaluate(cases, n, x + x, lambda k, p, q: (x + x) * q - p, stop_at_nan=True)


def shifted_chebyshev_u(x, n):
    y = x + x - 1
    cases = [
        (n < 0, 0),
        (x == 1, n + 1),
        (x == 0, _sign(_even(n), n + 1)),
        ((n > 6) & (jnp.abs(y) < 1), _u_closed(y, n)),
        (n == 0, 1),
        (n == 1, y + y),
    ]
    return _evaluate(cases, n, y + y, lambda k, p, q: (y + y) * q - p, stop_at_nan=True)


def _v_closed(y, n, otherwise):
    theta = jnp.arccos(y)
    half = theta / 2
    return jnp.where(tm.sin(half) != 1, tm.cos((n.astype(y.dtype) + 0.5) * theta) / tm.cos(half), otherwise)


def chebyshev_v(x, n):
    odd_sum = _sign(_even(n), n + n + 1)
    cases = [
        (n < 0, 0),
        (jnp.abs(x) == 1, jnp.where(x > 0, 1, odd_sum)),
        ((n > 8) & (jnp.abs(x) < 1), _v_closed(x, n, odd_sum)),
        (n == 0, 1),
        (n == 1, x + x - 1),
    ]
    return _evaluate(cases, n, x + x - 1, lambda k, p, q: (x + x) * q - p, stop_at_nan=True)


def shifted_chebyshev_v(x, n):
    y = x + x - 1
    odd_sum = _sign(_even(n), n + n + 1)
    cases = [
        (n < 0, 0),
        (x == 1, 1),
        (x == 0, odd_sum),
        ((n > 6) & (jnp.abs(y) < 1), _v_closed(y, n, odd_sum)),
        (n == 0, 1),
        (n == 1, y + y - 1),
    ]
    return _evaluate(cases, n, y + y - 1, lambda k, p, q: (y + y) * q - p, stop_at_nan=True)


def _w_closed(y, n, otherwise):
    theta = jnp.arccos(y)
    half = theta / 2
    return jnp.where(tm.cos(half) != 1, tm.sin((n.astype(y.dtype) + 0.5) * theta) / tm.sin(half), otherwise)


def chebyshev_w(x, n):
    at_one = jnp.where(x > 0, n + n + 1, _sign(_even(n), 1))
    cases = [
        (n < 0, 0),
        (jnp.abs(x) == 1, at_one),
        ((n > 8) & (jnp.abs(x) < 1), _w_closed(x, n, at_one)),
        (n == 0, 1),
        (n == 1, x + x + 1),
    ]
    return _evaluate(cases, n, x + x + 1, lambda k, p, q: (x + x) * q - p, stop_at_nan=True)


def shifted_chebyshev_w(x, n):
    y = x + x - 1
    alternating = _sign(_even(n), 1)
    cases = [
        (n < 0, 0),
        (x == 1, n + n + 1),
        (x == 0, alternating),
        ((n > 4) & (jnp.abs(y) < 1), _w_closed(y, n, alternating)),
        (n == 0, 1),
        (n == 1, y + y + 1),
    ]
    return _evaluate(cases, n, y + y + 1, lambda k, p, q: (y + y) * q - p, stop_at_nan=True)


def chebyshev_t(x, n):
    return _t(x, n, shifted=False)


def shifted_chebyshev_t(x, n):
    return _t(x, n, shifted=True)


def _hermite_limit(dt):
    """Beyond this degree CPU returns NaN without evaluating."""
    return 128 if dt == jnp.float32 else 512


def hermite_h(x, n):
    dt = x.dtype
    cases = [(n < 0, 0), (n == 0, 1), (n == 1, x + x), (n > _hermite_limit(dt), jnp.nan)]
    # CPU's k runs 2, 4, .., 2n-2.
    return _evaluate(cases, n, x + x, lambda k, p, q: (x + x) * q - (k + k).astype(dt) * p, stop_at_nan=False)


def hermite_he(x, n):
    dt = x.dtype
    cases = [(n < 0, 0), (n == 0, 1), (n == 1, x), (n > _hermite_limit(dt), jnp.nan)]
    return _evaluate(cases, n, x, lambda k, p, q: x * q - k.astype(dt) * p, stop_at_nan=False)


def laguerre_l(x, n):
    dt = x.dtype

    def step(k, p, q):
        return (((k + k).astype(dt) + (1 - x)) * q - k.astype(dt) * p) / (k + 1).astype(dt)

    cases = [(n < 0, 0), (x == 0, 1), (n == 0, 1), (n == 1, 1 - x)]
    return _evaluate(cases, n, 1 - x, step, stop_at_nan=True)


def legendre_p(x, n):
    dt = x.dtype

    def step(k, p, q):
        return ((k + k + 1).astype(dt) * x * q - k.astype(dt) * p) / (k + 1).astype(dt)

    cases = [(n < 0, 0), (jnp.abs(x) == 1, _sign((x > 0) | _even(n), 1)), (n == 0, 1), (n == 1, x)]
    return _evaluate(cases, n, x, step, stop_at_nan=True)


_POLYNOMIALS = {
    "chebyshev_polynomial_t": chebyshev_t,
    "chebyshev_polynomial_u": chebyshev_u,
    "chebyshev_polynomial_v": chebyshev_v,
    "chebyshev_polynomial_w": chebyshev_w,
    "shifted_chebyshev_polynomial_t": shifted_chebyshev_t,
    "shifted_chebyshev_polynomial_u": shifted_chebyshev_u,
    "shifted_chebyshev_polynomial_v": shifted_chebyshev_v,
    "shifted_chebyshev_polynomial_w": shifted_chebyshev_w,
    "hermite_polynomial_h": hermite_h,
    "hermite_polynomial_he": hermite_he,
    "laguerre_polynomial_l": laguerre_l,
    "legendre_polynomial_p": legendre_p,
}


def _on_degree(fn):
    """fn(x, n) with the float degree n truncated to int64 as CPU does."""

    def run(x, n):
        return fn(x, _degree(n))

    run.__qualname__ = fn.__qualname__
    return run


def _register(name, fn):
    body = _on_degree(fn)
    packet = getattr(aten, "special_" + name)

    @register_functional(packet.default, packet.x_scalar, packet.n_scalar)
    def kernel(x, n):
        common = float_of(torch.result_type(x, n))
        if common not in (torch.float32, torch.float64):
            raise NotImplementedError(f"\"{name}_cpu\" not implemented for '{dtypes.scalar_name(common)}'")
        return apply(body, common, common, (x, n))


for _name, _fn in _POLYNOMIALS.items():
    _register(_name, _fn)
