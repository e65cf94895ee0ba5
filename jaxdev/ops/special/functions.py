"""The special functions taken from JAX with PyTorch's conventions (i0, i1, i1e, entr, erfcx, log_ndtr,
ndtri, digamma, lgamma, sinc, xlogy/xlog1py, mvlgamma) and igamma/igammac through CPU's algorithm
(igamma.py); i0, i1, i1e, entr, erfcx, log_ndtr and ndtri CPU's float algorithms where jaxdev's own
float32 functions are chosen (own_float32.py)."""

from __future__ import annotations

import jax.numpy as jnp
import jax.scipy.special as jss
import numpy as np
import torch

from jaxdev import dtypes
from jaxdev.ops.kit import J, apply, float_of, jitted, opmath
from jaxdev.ops.kit import transcendentals as tm
from jaxdev.ops.kit import transcendentals_gamma as tg
from jaxdev.ops.kit.cpu_arithmetic import cpu_arithmetic
from jaxdev.ops.registry import aten, register_functional
from jaxdev.ops.special import digamma as own_digamma
from jaxdev.ops.special import igamma
from jaxdev.ops.special import own_float32 as own


def _unary(op, fn):
    @register_functional(op)
    def kernel(self):
        dt = float_of(self.dtype)
        return apply(fn, dt, dt, (self,))


def digamma(x):
    """PyTorch's: digamma(+0) = -inf, digamma(-0) = +inf (the limit from each side); CPU's float
    algorithm where jaxdev's own functions are chosen (special/digamma.py)."""
    own = own_digamma.digamma(x)
    if own is not None:
        return own
    pole = jnp.where(jnp.signbit(x), jnp.asarray(jnp.inf, x.dtype), jnp.asarray(-jnp.inf, x.dtype))
    return jnp.where(x == 0, pole, jss.digamma(x))


for _op, _fn in [
    # jax.scipy's (XLA's) where own() does not hold, CPU's float algorithm where it does (own_float32.py):
    # a TPU's XLA log_ndtr was 786,252 ulps from CPU's, ndtri 430, i0 117
    # CPU's are PyTorch's own C++, whose multiply-adds round once (FMA): `cpu_arithmetic` emulates that
    # where the platform's round twice (a TPU; lgamma is the C library's)
    (aten.i0.default, cpu_arithmetic(own.i0)),
    (aten.special_i1.default, cpu_arithmetic(own.i1)),
    (aten.special_i1e.default, cpu_arithmetic(own.i1e)),
    (aten.special_erfcx.default, cpu_arithmetic(own.erfcx)),
    (aten.special_log_ndtr.default, cpu_arithmetic(own.log_ndtr)),
    (aten.special_ndtri.default, cpu_arithmetic(own.ndtri)),
    (aten.digamma.default, cpu_arithmetic(digamma)),
    (aten.lgamma.default, tg.lgamma),  # float32: jaxdev's own (XLA's 22,084 ulps off on CPU, 1.2e5 on a TPU)
    (aten.sinc.default, cpu_arithmetic(own.sinc)),
]:
    _unary(_op, _fn)


@register_functional(aten.special_entr.default)
def special_entr(self):
    """jax.scipy's entr, or where own() holds CPU's (a TPU's XLA log put it 2,995 ulps off), whose half
    kernel rounds log(x) to the half before the product (own_float32.entr_for)."""
    dt = float_of(self.dtype)
    return apply(own.entr_for(dtypes.to_jax_dtype(dt)), dt, dt, (self,))


def register_binary(ops, fn):
    """Float-valued binary op: Tensor/Scalar overloads, torch's promotion, ints -> default float."""

    @register_functional(*ops)
    def kernel(self, other):
        dt = float_of(torch.result_type(self, other))
        return apply(fn, dt, dt, (self, other))


def _xlogy(x, y):
    out = jnp.where(x == 0, jnp.zeros((), x.dtype), x * tm.log(y))
    return jnp.where(jnp.isnan(y), y, out)


def _xlog1py(x, y):
    out = jnp.where(x == 0, jnp.zeros((), x.dtype), x * tm.log1p(y))
    return jnp.where(jnp.isnan(y), y, out)


register_binary((aten.xlogy.Tensor, aten.xlogy.Scalar_Other, aten.xlogy.Scalar_Self), _xlogy)
register_binary(
    (aten.special_xlog1py.default, aten.special_xlog1py.other_scalar, aten.special_xlog1py.self_scalar), _xlog1py
)


# CPU's calc_igamma/calc_igammac ported (special/igamma.py): JAX's gammainc is NaN at a = 0 < x
# and off for large a near x
register_binary((aten.igamma.default,), igamma.igamma)
register_binary((aten.igammac.default,), igamma.igammac)


@jitted
def with_order(fn, order, compute, result):
    """`fn(x, order)` with the integer order static (polygamma's n, mvlgamma's p)."""
    compute, result = opmath(dtypes.to_jax_dtype(compute)), dtypes.to_jax_dtype(result)
    return lambda x: fn(x.astype(compute), order).astype(result)


def multigammaln(x, p):
    """jss.multigammaln, its sum of lgamma(x - j/2) over j < p taken with the kit's lgamma in float32
    (XLA's float32 lgamma is up to 22,084 ulps from CPU's, on every platform; its constant
    p (p - 1)/4 log(pi) computed as JAX computes it)."""
    if x.dtype != jnp.float32:
        return jss.multigammaln(x, p)
    constant = (0.25 * p * (p - 1)) * tm.log(jnp.asarray(np.pi, x.dtype))
    halves = jnp.arange(p, dtype=x.dtype) * 0.5  # j / 2 exactly: a TPU's division is not IEEE's
    return jnp.sum(tg.lgamma(x[..., None] - halves), axis=-1) + constant


@register_functional(aten.mvlgamma.default)
def mvlgamma(self, p):
    if p < 1:
        raise RuntimeError("p has to be greater than or equal to 1")
    dt = float_of(self.dtype)
    return with_order(multigammaln, int(p), dt, dt)(J(self))
