"""CPU's float32 arithmetic for kernels whose CPU reference is C++ arithmetic, where the platform's
differs (a TPU): a * b + c rounded once where the platform rounds it twice (capabilities' fact
`products_not_contracted`), and sqrt correctly rounded where the platform's is not (`sqrt_approximate`:
division.sqrt).

Why. CPU's C++ kernels are built for AVX2 and AVX512 with FMA, and GCC contracts `a * b + c` into a
fused multiply-add; XLA's CPU backend (LLVM) contracts the same jaxpr the same way (checked: `x * y + z`
jitted there is the FMA's value for 28,798 of 100,000 float32 triples, and two roundings with
XLA_FLAGS=--xla_cpu_max_isa=AVX). A TPU rounds the product and the sum apart. In a Cephes polynomial
that is an ulp here and there, but next to a zero of J0, J1, Y0, Y1 or Ai the last bits become many of
the result's: on a v5e, 2026-12-07, J0 30 ulps from CPU's, J1 198, Y0 2,123, Y1 934, I1 11, K0 10 --
each the very number XLA's CPU backend gives without FMA, where with it they are 3, 3, 23, 111, 3, 5.

A TPU's sqrt was 2 ulps from IEEE's on 41 % of float32 inputs (v5e, the same day): asin and acos 3 ulps
from CPU's, ndtri 6, where their bounds are 2 and 5.

How. `cpu_arithmetic(fn)` traces fn and evaluates its jaxpr with every float32 add or subtract of a
product used once (LLVM's rule: the first operand's product first) as an emulated FMA: Dekker's exact
product and Knuth's two-sum, rounded once (a double rounding, rare, is left), and every float32 sqrt
as division.sqrt. Nested jaxprs (jit, custom derivatives, loops, conditionals) are evaluated so
inside. Its derivative is fn's own. Where the platform's arithmetic is CPU's, fn runs as it is (its
programs unchanged).
"""

from __future__ import annotations

import collections
import functools

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.extend import core

from jaxdev.ops.kit import division, math_mode

_SUMS = {lax.add_p: 1, lax.sub_p: -1}
_INLINED = ("pjit", "jit", "closed_call", "core_call", "custom_jvp_call", "custom_vjp_call", "custom_vjp_call_jaxpr")
_JAXPR_PARAMS = ("jaxpr", "call_jaxpr", "fun_jaxpr")


def contracts() -> bool:
    """Whether kernels under `cpu_arithmetic` (and `fmadd`) emulate the FMA here, read when traced: where
    the platform rounds a multiply-add twice, unless JAXDEV_MATH=fast or near asks for its arithmetic."""
    from jaxdev.ops.kit import capabilities  # imports the fallback, which needs the ops package loaded

    return capabilities.fact("products_not_contracted") and not math_mode.platform_arithmetic()


def fmadd(a, b, c):
    """a * b + c as CPU's kernels compute it where they fuse it (c10's vec::fmadd, a contracted
    expression): one rounding. Written plainly where the platform contracts it (XLA's CPU backend)
    or computes in a dtype other than float32; emulated (`fma`) where it rounds twice (a TPU)."""
    plain = a * b + c
    if not contracts() or jnp.result_type(plain) != jnp.float32:
        return plain
    return fma(*(jnp.asarray(v, jnp.float32) for v in (a, b, c)))


def fma(a, b, c):
    """a * b + c rounded once (but for a rare double rounding), float32, without an FMA: where a
    product's split or the sum is not finite (|a| or |b| past ~1e34, infinities, NaN) a * b + c."""
    p, e = division.exact_product(a, b)
    s = p + c
    v = s - p
    t = (p - (s - v)) + (c - v)  # s + t == p + c exactly
    r = s + (t + e)
    r = jnp.where(r == 0, s, r)  # a zero sum's sign is IEEE's rule for p + c, which s keeps (t + e is 0)
    return jnp.where(jnp.isfinite(r) & jnp.isfinite(e), r, p + c)


def cpu_arithmetic(fn):
    """fn with CPU's multiply-adds and sqrt where the platform's differ (module docstring)."""

    @functools.wraps(fn)
    def run(*args):
        if not contracts() and division.sqrt_ieee():
            return fn(*args)
        return _with_fns_derivative(fn, *args)

    return run


def _with_fns_derivative(fn, *args):
    @jax.custom_jvp
    def values(*xs):
        closed = jax.make_jaxpr(fn)(*xs)
        out = _evaluate(closed.jaxpr, closed.consts, xs)
        return jax.tree.unflatten(jax.tree.structure(jax.eval_shape(fn, *xs)), out)

    @values.defjvp
    def _jvp(primals, tangents):
        return values(*primals), jax.jvp(fn, primals, tangents)[1]

    return values(*args)


def _float32(v) -> bool:
    return getattr(v.aval, "dtype", None) == np.float32


def _pairs(jaxpr) -> dict:
    """add/sub equation index -> (index of its operand that is a contracted product, product equation)."""
    uses = collections.Counter(v for eqn in jaxpr.eqns for v in eqn.invars if not isinstance(v, core.Literal))
    uses.update(v for v in jaxpr.outvars if not isinstance(v, core.Literal))
    made = {eqn.outvars[0]: eqn for eqn in jaxpr.eqns if eqn.primitive is lax.mul_p and _float32(eqn.outvars[0])}
    pairs, taken = {}, set()
    for i, eqn in enumerate(jaxpr.eqns):
        if eqn.primitive not in _SUMS or not _float32(eqn.outvars[0]):
            continue
        for side, v in enumerate(eqn.invars):
            product = made.get(v) if not isinstance(v, core.Literal) else None
            if product is not None and uses[v] == 1 and id(product) not in taken:
                pairs[i] = (side, product)
                taken.add(id(product))
                break
    return pairs


def _evaluate(jaxpr, consts, args) -> list:
    env = {}

    def read(v):
        return v.val if isinstance(v, core.Literal) else env[v]

    env.update(zip(jaxpr.constvars, consts))
    env.update(zip(jaxpr.invars, args))
    pairs = _pairs(jaxpr) if contracts() else {}
    skipped = {id(product) for _, product in pairs.values()}
    for i, eqn in enumerate(jaxpr.eqns):
        if id(eqn) in skipped:
            continue  # evaluated by the sum that takes it
        if i in pairs:
            side, product = pairs[i]
            a, b = (read(v) for v in product.invars)
            other = read(eqn.invars[1 - side])
            sign = _SUMS[eqn.primitive]
            if side == 1 and sign < 0:  # c - a b
                outs = [fma(-a, b, other)]
            else:
                outs = [fma(a, b, other if sign > 0 else -other)]
            outs = [jnp.broadcast_to(outs[0], eqn.outvars[0].aval.shape).astype(np.float32)]
        elif eqn.primitive is lax.sqrt_p and _float32(eqn.outvars[0]):
            outs = [division.sqrt(read(eqn.invars[0]))]
        else:
            outs = _bind(eqn, [read(v) for v in eqn.invars])
        env.update(zip(eqn.outvars, outs))
    return [read(v) for v in jaxpr.outvars]


def _bind(eqn, values) -> list:
    """The equation evaluated, its nested jaxprs too (inlined where it is a call)."""
    params = dict(eqn.params)
    if eqn.primitive.name in _INLINED:
        for name in _JAXPR_PARAMS:
            inner = params.get(name)
            if inner is not None:
                closed = inner if isinstance(inner, core.ClosedJaxpr) else core.ClosedJaxpr(inner, ())
                return _evaluate(closed.jaxpr, closed.consts, values[len(values) - len(closed.jaxpr.invars) :])
    for name, value in params.items():
        if isinstance(value, core.ClosedJaxpr):
            params[name] = _contract_closed(value)
        elif isinstance(value, tuple) and value and all(isinstance(x, core.ClosedJaxpr) for x in value):
            params[name] = tuple(_contract_closed(x) for x in value)
    out = eqn.primitive.bind(*values, **params)
    return list(out) if eqn.primitive.multiple_results else [out]


def _contract_closed(closed):
    """A ClosedJaxpr of the same signature, evaluated with CPU's arithmetic."""
    shapes = [jax.ShapeDtypeStruct(v.aval.shape, v.aval.dtype) for v in closed.jaxpr.invars]
    return jax.make_jaxpr(lambda *xs: _evaluate(closed.jaxpr, closed.consts, xs))(*shapes)
