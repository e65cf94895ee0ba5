"""Scans along a dim: cumsum, cumprod, logcumsumexp, and cummax/cummin (PyTorch's `_cum*_helper`
kernels, which write values and indices).

Integer and bool inputs accumulate in int64 unless `dtype=` says otherwise, as PyTorch's do; half
precision accumulates in float32. cummax/cummin combine (value, index) pairs with CPU's rule, so ties
and NaNs pick the same index.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from jaxdev import dtypes, tensor
from jaxdev.ops.registry import aten, register, register_functional
from jaxdev.ops.toolkit import J, accumulate_dtype, jitted, opmath, wrap_dim


def _cumulative(fn):
    def kernel(self, dim, *, dtype=None):
        result = accumulate_dtype(self.dtype, dtype)
        a = wrap_dim(dim, self.dim())
        x = J(self).astype(opmath(dtypes.to_jax_dtype(result)))
        if x.ndim == 0:
            return x.astype(dtypes.to_jax_dtype(result))
        return fn(x, axis=a).astype(dtypes.to_jax_dtype(result))

    return kernel


register_functional(aten.cumsum.default)(_cumulative(jnp.cumsum))


register_functional(aten.cumprod.default)(_cumulative(jnp.cumprod))


def _pick_later(for_max):
    """Combine (value, index) pairs, the right one later in the scan: CPU's rule
    `isnan(x) || (!isnan(best) && x >= best)` (<= for min), which is associative."""

    def combine(a, b):
        (va, ia), (vb, ib) = a, b
        better = vb >= va if for_max else vb <= va
        if jnp.issubdtype(va.dtype, jnp.floating):
            better = jnp.isnan(vb) | (~jnp.isnan(va) & better)
        return jnp.where(better, vb, va), jnp.where(better, ib, ia)

    return combine


@jitted
def _cum_extreme(axis, for_max):
    def run(x):
        idx = jax.lax.broadcasted_iota(jnp.int64, x.shape, axis)
        return jax.lax.associative_scan(_pick_later(for_max), (x, idx), axis=axis)

    return run


def _cum_helper(for_max):
    def kernel(self, values, indices, dim):
        x = J(self)
        if x.ndim == 0:
            v, i = x, jnp.zeros((), jnp.int64)
        else:
            v, i = _cum_extreme(wrap_dim(dim, self.dim()), for_max)(x)
        tensor.write(values, v)
        tensor.write(indices, i)

    return kernel


register(aten._cummax_helper.default)(_cum_helper(True))


register(aten._cummin_helper.default)(_cum_helper(False))


@jitted
def _logcumsumexp(axis, compute):
    return lambda x: jax.lax.cumlogsumexp(x.astype(compute), axis=axis).astype(x.dtype)


@register_functional(aten._logcumsumexp.default)
def logcumsumexp(self, dim):
    x = J(self)
    if x.ndim == 0:
        return x
    return _logcumsumexp(wrap_dim(dim, self.dim()), opmath(x.dtype))(x)
