"""Accumulating writes beyond indexing.py: scatter_reduce.two (sum/prod/mean/amax/amin,
include_self), index_add, masked_scatter, index_copy/index_fill/index_reduce, put/take.

Their backward formulas are composites of ops that already run on jax (gather, index_select,
masked_select, scatter_add, ...).
"""

from __future__ import annotations

import jax.numpy as jnp
import torch

from jaxdev import dtypes, tracing
from jaxdev.ops.registry import aten, register_functional
from jaxdev.ops.toolkit import J, add_at, any_device, check_index_bounds, jitted, multiply_at, opmath, wrap_dim


def _positions(i, d):
    """Full index tuple for a scatter along `d` with index array `i` (other dims: their own position)."""
    grids = list(jnp.meshgrid(*[jnp.arange(n) for n in i.shape], indexing="ij"))
    grids[d] = i
    return tuple(grids)


@jitted
def _scatter_reduce(d, reduce, include_self, floor_mean):
    def run(x, i, s):
        i = jnp.where(i < 0, i + x.shape[d], i)
        s = s[tuple(slice(0, n) for n in i.shape)].astype(x.dtype)
        pos = _positions(i, d)
        hit = jnp.zeros(x.shape, bool).at[pos].set(True)
        if reduce in ("sum", "mean"):
            base = x if include_self else jnp.where(hit, jnp.zeros((), x.dtype), x)
            total = add_at(base.at[pos], s)
            if reduce == "sum":
                return total
            count = jnp.zeros(x.shape, jnp.int64).at[pos].add(1) + (1 if include_self else 0)
            count = jnp.maximum(count, 1).astype(x.dtype)
            mean = jnp.floor_divide(total, count) if floor_mean else total / count
            return jnp.where(hit, mean, x)
        if reduce == "prod":
            base = x if include_self else jnp.where(hit, jnp.ones((), x.dtype), x)
            return multiply_at(base.at[pos], s)
        lowest = _extreme(x.dtype, reduce == "amax")
        base = x if include_self else jnp.where(hit, lowest, x)
        ref = base.at[pos]
        out = ref.max(s) if reduce == "amax" else ref.min(s)
        if jnp.issubdtype(x.dtype, jnp.floating):  # NaN propagates, as on CPU
            nan = jnp.zeros(x.shape, bool).at[pos].max(jnp.isnan(s)) | jnp.isnan(base)
            out = jnp.where(nan, jnp.asarray(jnp.nan, x.dtype), out)
        return out

    return run


def _extreme(dtype, for_max):
    if jnp.issubdtype(dtype, jnp.floating):
        return jnp.asarray(-jnp.inf if for_max else jnp.inf, dtype)
    if dtype == jnp.bool_:
        return jnp.asarray(not for_max)
    info = jnp.iinfo(dtype)
    return jnp.asarray(info.min if for_max else info.max, dtype)


@register_functional(aten.scatter_reduce.two)
def scatter_reduce(self, dim, index, src, reduce, *, include_self=True):
    if reduce not in ("sum", "prod", "mean", "amax", "amin"):
        raise RuntimeError(f"reduce argument must be either sum, prod, mean, amax or amin, got {reduce}")
    if index.numel() != 0 and index.dtype != torch.int64:  # CPU checks non-empty indices only
        raise RuntimeError("scatter(): Expected dtype int64 for index")
    if self.dtype != src.dtype:
        raise RuntimeError("scatter(): Expected self.dtype to be equal to src.dtype")
    d = wrap_dim(dim, self.dim())
    x, i = J(self), J(index)
    if i.size == 0:
        return x
    check_index_bounds(i, self.shape[d] if self.dim() else 1, d)
    if x.ndim == 0:
        x, i, s = x[None], i.reshape(1), J(src).reshape(1)
        return _scatter_reduce(0, reduce, bool(include_self), False)(x, i, s)[0]
    floor = not (self.dtype.is_floating_point or self.dtype.is_complex)
    return _scatter_reduce(d, reduce, bool(include_self), floor)(x, i, J(src))


@jitted
def _index_add(d):
    def run(x, i, s, alpha):
        i = jnp.where(i < 0, i + x.shape[d], i)
        return add_at(x.at[(slice(None),) * d + (i,)], (s * alpha).astype(x.dtype))

    return run


@register_functional(aten.index_add.default)
def index_add(self, dim, index, source, *, alpha=1):
    d = wrap_dim(dim, self.dim())
    if index.dim() > 1:
        raise IndexError("index_add_(): Index is supposed to be a vector")
    if index.dtype not in (torch.int64, torch.int32):
        raise RuntimeError("index_add_(): Expected dtype int32/int64 for index")
    if self.dtype != source.dtype:
        raise RuntimeError(
            "index_add_(): self ("
            + dtypes.scalar_name(self.dtype)
            + ") and source ("
            + dtypes.scalar_name(source.dtype)
            + ") must have the same scalar type"
        )
    i = any_device(index).reshape(-1)
    check_index_bounds(i, self.shape[d] if self.dim() else 1, d)
    x, s = J(self), J(source)
    if x.ndim == 0:
        return add_at(x[None].at[i], (s.reshape(-1) * alpha).astype(x.dtype))[0]
    if s.ndim == 0:
        s = s.reshape((1,))
    c = opmath(x.dtype)
    return _index_add(d)(x.astype(c), i, s.astype(c), alpha).astype(x.dtype)


@register_functional(aten.masked_scatter.default)
def masked_scatter(self, mask, source):
    if mask.dtype != torch.bool:
        raise RuntimeError(
            f"masked_scatter_ only supports boolean masks, but got mask with dtype {str(mask.dtype).split('.')[-1]}"
        )
    if self.dtype != source.dtype:
        raise RuntimeError(
            f"masked_scatter: expected self and source to have same dtypes but got{dtypes.scalar_name(self.dtype)} and {dtypes.scalar_name(source.dtype)}"
        )
    x, m, s = J(self), J(mask), J(source)
    shape = jnp.broadcast_shapes(x.shape, m.shape)
    x, m = jnp.broadcast_to(x, shape), jnp.broadcast_to(m, shape)
    flat_m = m.reshape(-1)
    tracing.check_values(
        jnp.sum(flat_m) > s.size, lambda: RuntimeError("Number of elements of source < number of ones in mask")
    )
    take = jnp.clip(jnp.cumsum(flat_m) - 1, 0, max(s.size - 1, 0))
    values = s.reshape(-1)[take] if s.size else jnp.zeros_like(x.reshape(-1))
    return jnp.where(flat_m, values, x.reshape(-1)).reshape(shape)


# --- whole-slice writes along a dim: index_copy, index_fill, index_reduce; flat put ----------------


def _slice_index(self, dim, index, name):
    d = wrap_dim(dim, self.dim())
    if index.dim() > 1:
        raise IndexError(f"{name}(): Index is supposed to be a vector")
    if index.dtype != torch.int64:
        raise RuntimeError(f"{name}(): Expected a long tensor for index, but got {dtypes.scalar_name(index.dtype)}")
    i = any_device(index).reshape(-1)
    size = self.shape[d] if self.dim() else 1
    check_index_bounds(i, size, d)
    return d, jnp.where(i < 0, i + size, i)


@register_functional(aten.index_copy.default)
def index_copy(self, dim, index, source):
    d, i = _slice_index(self, dim, index, "index_copy")
    if self.dtype != source.dtype:
        raise RuntimeError(
            f"index_copy_(): self and source expected to have the same dtype, but got (self) {self.dtype} and (source) {source.dtype}"
        )
    x, s = J(self), J(source)
    if x.ndim == 0:
        return s.reshape(()) if i.size else x
    return x.at[(slice(None),) * d + (i,)].set(s.reshape(x.shape[:d] + (i.shape[0],) + x.shape[d + 1 :]))


@register_functional(aten.index_fill.int_Scalar, aten.index_fill.int_Tensor)
def index_fill(self, dim, index, value):
    d, i = _slice_index(self, dim, index, "index_fill")
    if isinstance(value, torch.Tensor):
        if value.dim() != 0:
            raise RuntimeError(
                f"index_fill_ only supports a 0-dimensional value tensor, but got tensor with {value.dim()} dimension(s)."
            )
        value = J(value)
    x = J(self)
    v = jnp.asarray(value).astype(x.dtype)
    if x.ndim == 0:
        return v if i.size else x
    return x.at[(slice(None),) * d + (i,)].set(v)


@register_functional(aten.index_reduce.default)
def index_reduce(self, dim, index, source, reduce, *, include_self=True):
    if reduce not in ("prod", "mean", "amax", "amin"):
        raise RuntimeError(f"index_reduce(): Expected reduce to be one of prod, mean, amax or amin but got {reduce}.")
    d, i = _slice_index(self, dim, index, "index_reduce")
    if self.dtype != source.dtype:
        raise RuntimeError(
            f"index_reduce_(): self ({self.dtype}) and source ({source.dtype}) must have the same scalar type"
        )
    x, s = J(self), J(source)
    if x.ndim == 0:
        x, s = x[None], s.reshape(-1)
        d = 0
    shape = [1] * s.ndim
    shape[d] = -1
    full = jnp.broadcast_to(i.reshape(shape), s.shape)
    floor = not (self.dtype.is_floating_point or self.dtype.is_complex)
    r = _scatter_reduce(d, reduce, bool(include_self), floor)(x, full, s)
    return r.reshape(tuple(self.shape))


@register_functional(aten.put.default)
def put(self, index, source, accumulate=False):
    if index.dtype != torch.int64:
        raise RuntimeError(f"put_(): Expected a long tensor for index, but got {dtypes.scalar_name(index.dtype)}")
    if self.dtype != source.dtype:
        raise RuntimeError(
            f"put_(): self and source expected to have the same dtype, but got self.dtype = {self.dtype} and source.dtype = {source.dtype}"
        )
    if index.numel() != source.numel():
        raise RuntimeError(
            f"put_(): Expected source and index to have the same number of elements, but got source.numel() = {source.numel()}, index.numel() = {index.numel()}"
        )
    x = J(self)
    i = any_device(index).reshape(-1)
    n = x.size
    if i.size:
        tracing.check_values((i >= n) | (i < -n), lambda: _out_of_range(i, n))
    i = jnp.where(i < 0, i + n, i)
    flat, s = x.reshape(-1), J(source).reshape(-1).astype(x.dtype)
    flat = add_at(flat.at[i], s) if accumulate else flat.at[i].set(s)
    return flat.reshape(x.shape)


@register_functional(aten.take.default)
def take(self, index):
    if index.dtype != torch.int64:
        raise RuntimeError(f"take(): Expected a long tensor for index, but got {dtypes.scalar_name(index.dtype)}")
    x = J(self).reshape(-1)
    i = any_device(index)
    n = x.size
    if i.size:
        tracing.check_values((i >= n) | (i < -n), lambda: _out_of_range(i, n))
    return x[jnp.where(i < 0, i + n, i)]


def _out_of_range(i, n) -> IndexError:
    bad = int(jnp.max(i)) if n == 0 or int(jnp.max(i)) >= n else int(jnp.min(i))
    return IndexError(f"out of range: tried to access index {bad} on a tensor of {n} elements.")
