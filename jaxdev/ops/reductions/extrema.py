"""Extrema: amax/amin, max/min (with indices: the first one, as CPU), argmax/argmin, aminmax."""

from __future__ import annotations

import jax.numpy as jnp

from jaxdev import dtypes
from jaxdev.ops.kit import J, axes, jitted, wrap_dim
from jaxdev.ops.reductions.common import check_nonempty, no_complex, reduce_over
from jaxdev.ops.registry import aten, register_functional


@register_functional(aten.amax.default)
def amax(self, dim=(), keepdim=False):
    check_nonempty(self, dim, "amax")
    if self.dtype.is_complex and self.numel():  # CPU's kernel runs (and refuses complex) only on elements
        raise NotImplementedError(f"\"max_values_cpu\" not implemented for '{dtypes.scalar_name(self.dtype)}'")
    return reduce_over(jnp.max, self, dim, keepdim, self.dtype, self.dtype)


@register_functional(aten.amin.default)
def amin(self, dim=(), keepdim=False):
    check_nonempty(self, dim, "amin")
    if self.dtype.is_complex and self.numel():  # CPU's kernel runs (and refuses complex) only on elements
        raise NotImplementedError(f"\"min_values_cpu\" not implemented for '{dtypes.scalar_name(self.dtype)}'")
    return reduce_over(jnp.min, self, dim, keepdim, self.dtype, self.dtype)


@register_functional(aten.max.default, out=False)
def max_all(self):
    check_nonempty(self, None, "max")
    no_complex("max", self.dtype, "max_all")
    return reduce_over(jnp.max, self, None, False, self.dtype, self.dtype)


@register_functional(aten.min.default, out=False)
def min_all(self):
    check_nonempty(self, None, "min")
    no_complex("min", self.dtype, "min_all")
    return reduce_over(jnp.min, self, None, False, self.dtype, self.dtype)


def _with_index(pick, arg):
    def fn(x, axis, keepdims):
        (a,) = axis or (0,)
        if x.ndim == 0:
            return x, jnp.zeros((), jnp.int64)
        idx = arg(x, axis=a, keepdims=keepdims)
        vals = jnp.take_along_axis(x, idx if keepdims else jnp.expand_dims(idx, a), axis=a)
        return (vals if keepdims else jnp.squeeze(vals, a)), idx.astype(jnp.int64)

    return fn


@jitted
def _indexed(fn, axis, keepdims):
    return lambda x: fn(x, axis, keepdims)


_max_with_index = _with_index(jnp.max, jnp.argmax)


_min_with_index = _with_index(jnp.min, jnp.argmin)


@register_functional(aten.max.dim)
def max_dim(self, dim, keepdim=False):
    check_nonempty(self, dim, "max")
    no_complex("max", self.dtype)
    return _indexed(_max_with_index, axes(dim, self.dim()), bool(keepdim))(J(self))


@register_functional(aten.min.dim)
def min_dim(self, dim, keepdim=False):
    check_nonempty(self, dim, "min")
    no_complex("min", self.dtype)
    return _indexed(_min_with_index, axes(dim, self.dim()), bool(keepdim))(J(self))


def _arg(fn, self, dim, keepdim, name):
    no_complex(name, self.dtype)
    if dim is None:
        if self.numel() == 0:
            raise IndexError(f"{name}(): Expected reduction dim to be specified for input.numel() == 0.")
        flat = jnp.ravel(J(self))
        r = fn(flat).astype(jnp.int64)
        return r.reshape((1,) * self.dim()) if keepdim else r
    check_nonempty(self, dim, name)
    a = wrap_dim(dim, self.dim())
    x = J(self)
    if x.ndim == 0:
        return jnp.zeros((), jnp.int64)
    return fn(x, axis=a, keepdims=bool(keepdim)).astype(jnp.int64)


@register_functional(aten.argmax.default)
def argmax(self, dim=None, keepdim=False):
    return _arg(jnp.argmax, self, dim, keepdim, "argmax")


@register_functional(aten.argmin.default)
def argmin(self, dim=None, keepdim=False):
    return _arg(jnp.argmin, self, dim, keepdim, "argmin")


@register_functional(aten.aminmax.default)
def aminmax(self, *, dim=None, keepdim=False):
    if dim is None and self.numel() == 0:
        raise RuntimeError(
            "aminmax(): cannot compute aminmax over an empty dimension as the operation has no identity."
        )
    if dim is not None and self.dim() > 0 and self.shape[wrap_dim(dim, self.dim())] == 0:
        raise IndexError(f"aminmax: Expected reduction dim {wrap_dim(dim, self.dim())} to have non-zero size.")
    if self.dtype.is_complex:  # refused by its kernel even where the result is empty
        raise NotImplementedError(f"\"aminmax_cpu\" not implemented for '{dtypes.scalar_name(self.dtype)}'")
    dims = None if dim is None else [dim]
    keep = bool(keepdim) and dim is not None
    low = reduce_over(jnp.min, self, dims, keep, self.dtype, self.dtype)
    high = reduce_over(jnp.max, self, dims, keep, self.dtype, self.dtype)
    if dim is None and keepdim:  # the whole tensor, kept as all-ones dims
        low, high = low.reshape((1,) * self.dim()), high.reshape((1,) * self.dim())
    return low, high
