"""Reductions to a truth or a digest: all/any, equal, hash_tensor."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import torch

from jaxdev import dtypes
from jaxdev.ops.kit import J, axes
from jaxdev.ops.reductions.common import reduce_over
from jaxdev.ops.registry import aten, register, register_functional


def _logical(fn):
    def nonzero_then(x, axis, keepdims):
        return fn(x != 0, axis=axis, keepdims=keepdims)

    def kernel(self, dim=None, keepdim=False):
        result = torch.uint8 if self.dtype == torch.uint8 else torch.bool
        if isinstance(dim, (list, tuple)) and len(dim) == 0:  # any/all.dims over no dims reduce_over nothing
            return (J(self) != 0).astype(dtypes.to_jax_dtype(result))
        return reduce_over(nonzero_then, self, dim, keepdim, result, self.dtype)

    return kernel


_all = _logical(jnp.all)


_any = _logical(jnp.any)


register_functional(aten.all.default, aten.all.dim, aten.all.dims)(_all)


register_functional(aten.any.default, aten.any.dim, aten.any.dims)(_any)


@register(aten.equal.default)
def equal(self, other):
    if self.shape != other.shape:
        return False
    common = dtypes.to_jax_dtype(torch.promote_types(self.dtype, other.dtype))
    return bool(jnp.array_equal(J(self).astype(common), J(other).astype(common)))


def _xor_all(x, axis, keepdims):
    r = jax.lax.reduce(x, jnp.uint64(0), jax.lax.bitwise_xor, axis)
    return jnp.expand_dims(r, axis) if keepdims else r


@register_functional(aten.hash_tensor.default)
def hash_tensor(self, dim=(), *, keepdim=False, mode=0):
    """mode 0: the elements widened to 64-bit float or integer, their bits xor-reduced as uint64."""
    if mode != 0:
        raise RuntimeError(f"Unknown hash_tensor mode: {mode}")
    if self.dtype.is_complex or self.dtype in (torch.uint16, torch.uint32, torch.uint64):
        raise NotImplementedError(f"\"xor_sum_cpu\" not implemented for '{dtypes.scalar_name(self.dtype)}'")
    ax = axes(dim if dim else None, self.dim())
    for a in ax:
        if self.shape[a] == 0:
            raise IndexError(f"hash_tensor: Expected reduction dim {a} to have non-zero size.")
    x = J(self)
    wide = x.astype(jnp.float64) if jnp.issubdtype(x.dtype, jnp.floating) else x.astype(jnp.int64)
    return _xor_all(jax.lax.bitcast_convert_type(wide, jnp.uint64), ax, bool(keepdim))
