"""Formulas more than one family applies: pure JAX functions of arrays, which a kernel jits (through
`kit.apply` or a jitted factory) and which another family composes into a program of its own
(foreach's one program per tensor list). They live here, public, so that both run the very same
function object, hence the same jitted body and the same bits, without one family importing another.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import torch

from jaxdev import dtypes
from jaxdev.ops.kit import transcendentals as tm
from jaxdev.ops.kit import transcendentals_gamma as tg
from jaxdev.ops.kit.arguments import opmath
from jaxdev.ops.kit.bodies import plain
from jaxdev.ops.kit.cpu_arithmetic import fmadd
from jaxdev.ops.kit.cpu_numerics import division_ieee, opaque, sqrt, sqrt_divisor
from jaxdev.ops.kit.division import divide

# mul's body (`plain`: a jnp ufunc keys the jit cache slowly).
MUL = plain(jnp.multiply)


def DIV(a, b):  # upper case, as MUL, its sibling
    """div's body: a true division, as CPU's. XLA's simplifier makes a division by a broadcast divisor
    (a number, a 0-d tensor, a keepdim sum) a multiplication by its reciprocal, 1 ulp off for about
    40 % of float32 elements (x / 3.7: 24,685 of 64,000); such a divisor is broadcast behind a
    barrier first (cpu_numerics.opaque), which costs no time measured on XLA:CPU. Where the platform's
    own division is not IEEE's (a TPU: division_ieee) float32's is division.divide's, corrected to
    IEEE's: the chip's is within 2 ulps for divisors in range but up to 7.5e7 ulps for one past ~2^115
    or under ~2^-114 (torch.div(x, 1e-36) was garbage there)."""
    floating = jnp.issubdtype(jnp.result_type(a, b), jnp.floating)
    if floating and not division_ieee():
        return divide(a, b)
    shape = jnp.broadcast_shapes(jnp.shape(a), jnp.shape(b))
    if jnp.shape(b) != shape and floating:
        b = opaque(jnp.broadcast_to(b, shape))
    return jnp.true_divide(a, b)


def reciprocal(x):
    """1 / x: XLA's reciprocal, or where the platform's division is not IEEE's, float32's through
    division.divide (the chip's reciprocal is 190 ulps off near float32's limits)."""
    if jnp.issubdtype(x.dtype, jnp.floating) and not division_ieee():
        return divide(jnp.ones_like(x), x)
    return jnp.reciprocal(x)


def add_alpha(a, b, alpha):
    """add's body for an alpha other than 1: a + b * alpha (for bool, a or (b and alpha))."""
    return a + b * alpha if a.dtype != jnp.bool_ else jnp.logical_or(a, jnp.logical_and(b, alpha))


def sub_alpha(a, b, alpha):
    return a - b * alpha


def lerp(a, b, w):
    """CPU's lerp: self + w (end - self) for a small weight (|w| < 0.5), else end + (w - 1)(end - self)
    (c10's `end - (end - self) * (1 - w)`, its vectorized fmadd(w - 1, end - self, end)): exact at
    w = 1, and inf at (inf, y, w >= 0.5) where the one-sided form gives inf - inf = NaN. One fmadd on
    operands chosen per element, the same result as choosing between two: where it is emulated (a TPU)
    each is ~30 operations, and AdamW's foreach lerp is one per parameter."""
    diff = b - a
    small = jnp.abs(w) < 0.5
    return fmadd(jnp.where(small, w, w - 1), diff, jnp.where(small, a, b))  # CPU's vec::fmadd: one rounding


def lerp_by_number(s, e, weight):
    """lerp with a number weight taken as it is, in opmath (CPU's weight.to<opmath_t>()): not rounded to
    a half-precision tensor's dtype first, as a tensor weight is."""
    return lerp(s, e, weight.astype(s.dtype))


def addcmul(s, a, b, v):
    """CPU's self + value * t1 * t2, whose last product and sum its compiler fuses (one rounding)."""
    return fmadd(v * a, b, s)


def addcdiv(s, a, b, v):
    return s + DIV(v * a, b)


def vector_norm_value(values, ord, ax: tuple, keepdim: bool, src: torch.dtype) -> jax.Array:
    """linalg.vector_norm's value on arrays (traceable; foreach's _foreach_norm runs it too): `values`
    computed in `src`'s opmath dtype, the result in `src`'s real dtype."""
    x = jnp.abs(values.astype(opmath(dtypes.to_jax_dtype(src))))
    if ord == float("inf"):
        r = jnp.max(x, axis=ax, keepdims=keepdim)
    elif ord == float("-inf"):
        r = jnp.min(x, axis=ax, keepdims=keepdim)
    elif ord == 0:
        r = jnp.sum((x != 0).astype(x.dtype), axis=ax, keepdims=keepdim)
    elif tm.own(x):
        r = _own_power_sum_root(x, ord, ax, keepdim)
    else:
        r = jnp.sum(x**ord, axis=ax, keepdims=keepdim) ** (1.0 / ord)
    return r.astype(dtypes.to_jax_dtype(src.to_real()))


def _own_power_sum_root(x, ord, ax, keepdim):
    """sum(x ** ord) ** (1 / ord) where jaxdev's functions are chosen (a TPU), as CPU's norm kernel takes
    it: the 2-norm's root a square root, the 1-norm's none, other orders (and an order's non-integer
    power) jaxdev's pow, where `**` is XLA's pow there (exp(log x / ord) with a TPU's exp and log)."""
    powered = x ** int(ord) if float(ord).is_integer() and abs(ord) <= 4 else tg.pow(x, jnp.asarray(ord, x.dtype))
    r = jnp.sum(powered, axis=ax, keepdims=keepdim)
    if ord == 1:
        return r
    if ord == 2:
        return sqrt(r)  # IEEE's, as CPU's (a TPU's is 2 ulps off)
    return tg.pow(r, jnp.asarray(1.0 / ord, r.dtype))


def rsqrt(v):
    """1 / sqrt(v) as CPU computes it (torch.rsqrt's kernel too): a rounded square root, then a rounded
    division, each IEEE's where the platform's is not (a TPU). XLA turns 1 / sqrt into its rsqrt, which
    is 1 ulp off for about a third of float32 inputs (measured: 32531 of 100000; 2 ulps from torch's on
    XLA's CPU backend, 3 on a v5e); the barrier keeps the two operations apart."""
    return divide(jnp.ones((), v.dtype), sqrt_divisor(v))


def layer_norm(x, w, b, axes, eps):
    """native_layer_norm's forward: (output, mean, rstd), statistics in opmath, as CPU's kernel; the
    transformer family's fused encoder layer runs the very same function."""
    c = opmath(x.dtype)
    xc = x.astype(c)
    mean = jnp.mean(xc, axis=axes, keepdims=True)
    var = jnp.mean(jnp.square(xc - mean), axis=axes, keepdims=True)
    rstd = rsqrt(var + eps)
    y = (xc - mean) * rstd
    if w is not None:
        y = y * w.astype(c)
    if b is not None:
        y = y + b.astype(c)
    return y.astype(x.dtype), mean.astype(x.dtype), rstd.astype(x.dtype)
