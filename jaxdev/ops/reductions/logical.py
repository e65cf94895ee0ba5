"""Reductions to a truth or a digest: all/any, equal, hash_tensor."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import torch

from jaxdev import dtypes
from jaxdev.ops.kit import J, axes, capabilities
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
    capabilities.refuse_float64_bits("torch.hash_tensor", self.dtype)
    x = J(self)
    if x.dtype in _NARROW_FLOATS and capabilities.fact("float64_emulated"):
        bits = _float64_bits_of(x)
    else:
        wide = x.astype(jnp.float64) if jnp.issubdtype(x.dtype, jnp.floating) else x.astype(jnp.int64)
        bits = jax.lax.bitcast_convert_type(wide, jnp.uint64)
    return _xor_all(bits, ax, bool(keepdim))


# dtype -> (its unsigned twin, mantissa bits, exponent bits)
_NARROW_FLOATS = {
    jnp.dtype(jnp.float16): (jnp.uint16, 10, 5),
    jnp.dtype(jnp.bfloat16): (jnp.uint16, 7, 8),
    jnp.dtype(jnp.float32): (jnp.uint32, 23, 8),
}


def _float64_bits_of(x):
    """The bits of `x` widened to float64, as CPU's widening gives them (a NaN quieted, its payload and
    sign kept; a subnormal normalized), made from x's bits with 32-bit integer arithmetic: where float64
    is float32 pairs (a TPU), x.astype(float64) bitcast to uint64 is the pair's value, not these bits."""
    unsigned, m, e = _NARROW_FLOATS[x.dtype]
    bias = (1 << (e - 1)) - 1
    bits = jax.lax.bitcast_convert_type(x, unsigned).astype(jnp.uint32)
    sign = bits >> (m + e)
    exp = ((bits >> m) & ((1 << e) - 1)).astype(jnp.int32)
    man = bits & ((1 << m) - 1)
    top = 31 - jax.lax.clz(man).astype(jnp.int32)  # a subnormal's leading bit (-1 for zero)
    sub_frac = (man ^ (jnp.uint32(1) << jnp.maximum(top, 0).astype(jnp.uint32))) << (23 - top).astype(jnp.uint32)
    special = exp == (1 << e) - 1  # infinity or NaN
    e64 = jnp.where(exp == 0, jnp.where(man == 0, 0, top + 1 - bias - m + 1023), exp - bias + 1023)
    e64 = jnp.where(special, 2047, e64).astype(jnp.uint32)
    frac = jnp.where(exp == 0, jnp.where(man == 0, 0, sub_frac), man << (23 - m))  # float32's 23 bits
    frac = jnp.where(special & (man != 0), frac | (1 << 22), frac).astype(jnp.uint32)  # a NaN quieted
    high = (sign << 31) | (e64 << 20) | (frac >> 3)
    return (high.astype(jnp.uint64) << 32) | ((frac & 7) << 29).astype(jnp.uint64)
