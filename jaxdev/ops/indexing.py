"""Indexing reads, joining and masking: cat, masked_fill, masked_select, nonzero, index_select,
gather, and the embedding backward and renorm. (Advanced indexing `x[idx]` and `x[idx] = v` are in
advanced_indexing.py, the indexed writes in scatter.py.)

Data-dependent shapes (masked_select, nonzero) are computed concretely: this is eager mode, with
positions from one padded program per shape plus a slice to the count. Integer indices are
bounds-checked like PyTorch (JAX would silently clamp them).
"""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np
import torch

from jaxdev import dtypes, layout, tensor, tracing
from jaxdev.ops.kit import J, any_device, compiled, jitted, on_views, opmath, out_dtypes, overlaps, wrap_dim
from jaxdev.ops.kit.cpu_numerics import narrowed, round_to
from jaxdev.ops.kit.index_checks import (
    bounds_error,
    check_in_range,
    first_outside,
    index_dtype_check,
    nonempty_dim,
    nonempty_size,
)
from jaxdev.ops.kit.indices import fill_value, masked_rows, true_positions
from jaxdev.ops.registry import aten, register, register_functional, store_into


def _cat_checked(tensors, dim):
    """CPU's checks of cat: the tensors that take part (1-d empty ones do not), the dim and the result dtype."""
    if len(tensors) == 0:
        raise RuntimeError("torch.cat(): expected a non-empty list of Tensors")
    for i, t in enumerate(tensors):
        if t.dim() == 0:
            raise RuntimeError(f"zero-dimensional tensor (at position {i}) cannot be concatenated")
    kept = [t for t in tensors if not (t.dim() == 1 and t.shape[0] == 0)]
    result = tensors[0].dtype
    for t in tensors[1:]:
        result = torch.promote_types(result, t.dtype)
    if not kept:
        return kept, 0, result
    ref = kept[0]
    d = wrap_dim(dim, ref.dim())
    for i, t in enumerate(kept):
        if t.dim() != ref.dim():
            raise RuntimeError(f"Tensors must have same number of dimensions: got {ref.dim()} and {t.dim()}")
        for k in range(ref.dim()):
            if k != d and t.shape[k] != ref.shape[k]:
                raise RuntimeError(
                    f"Sizes of tensors must match except in dimension {d}. Expected size "
                    f"{ref.shape[k]} but got size {t.shape[k]} for tensor number {i} in the list."
                )
    return kept, d, result


@jitted
def _concatenated(d, jdt):
    # each input copied into the result as CPU copies it: a double to a half through float
    return lambda *xs: jnp.concatenate([narrowed(x, jdt) for x in xs], axis=d)


def _concatenate(kept, d, dtype):
    """One program: each input cast to `dtype` and joined (views among them read inside it)."""
    jdt = dtypes.to_jax_dtype(dtype)
    if not kept:
        return jnp.zeros((0,), jdt)
    return on_views(_concatenated(d, jdt), kept)


@register_functional(aten.cat.default, out=False)
def cat(tensors, dim=0):
    kept, d, result = _cat_checked(tensors, dim)
    return _concatenate(kept, d, result)


@register(aten.cat.out)
def cat_out(tensors, dim=0, *, out):
    """Each input is cast straight to out's dtype, as CPU copies it (not through the promoted type:
    int64 2**40 + 1 beside a float32 stays exact in a float64 out)."""
    kept, d, result = _cat_checked(tensors, dim)
    if not torch.can_cast(result, out.dtype):
        raise TypeError(
            f"torch.cat(): input types can't be cast to the desired output type {dtypes.scalar_name(out.dtype)}"
        )
    tensor.check_no_partial_overlap(out, tensors)
    value = _concatenate(kept, d, out.dtype)
    strides = None
    if tuple(out.shape) != tuple(value.shape):  # a resized out takes cat's memory format, as on CPU
        laid = layout.result_layouts(aten.cat.default, (tensors, dim), {}, tracing.compiled_layout(value))
        strides = laid[0][1] if laid and laid[0] and laid[0][0] == tuple(value.shape) else None
    return store_into(out, value, resize=not any(out is t for t in tensors), strides=strides)


@register(aten._stack.out)
def _stack_out(tensors, dim=0, *, out):
    """CPU's _stack.out stacks: its CPU kernel unsqueezes the inputs. (The default backend kernel, which
    the jax device would otherwise get, concatenates them as they are: [6, 3] for two [3, 3].)"""
    return aten.stack.out(tensors, dim, out=out)


def _mask_value(self, mask, value):
    if mask.dtype != torch.bool:
        raise RuntimeError(
            f"masked_fill_ only supports boolean masks, but got mask with dtype {str(mask.dtype).split('.')[-1]}"
        )
    if isinstance(value, torch.Tensor):
        if value.dim() != 0:
            raise RuntimeError(
                f"masked_fill_ only supports a 0-dimensional value tensor, but got tensor with {value.dim()} dimension(s)."
            )
        value = fill_value(value, self.dtype)
    else:
        dtypes.check_scalar(value, self.dtype)  # c10's checked Scalar::to<scalar_t>, whatever the mask
        if type(value) is int and not -(2**63) <= value < 2**63:  # past a jit argument's int64
            value = jnp.asarray(value, dtypes.to_jax_dtype(self.dtype))
    return on_views(_masked_fill(), (self, mask), (value,))


@jitted
def _masked_fill():
    """One program (eagerly: a conversion, a cast and a select, ~30 us for 4x8)."""
    return lambda x, mask, value: jnp.where(mask, narrowed(jnp.asarray(value), x.dtype), x)  # double -> half via float


register_functional(aten.masked_fill.Scalar, aten.masked_fill.Tensor)(_mask_value)


@register_functional(aten.masked_select.default)
def masked_select(self, mask):
    if mask.dtype != torch.bool:
        raise RuntimeError("masked_select: expected BoolTensor for mask")
    x, m = J(self), J(mask)
    shape = jnp.broadcast_shapes(x.shape, m.shape)
    return masked_rows(jnp.broadcast_to(x, shape), jnp.broadcast_to(m, shape), 0).reshape(-1)


def _positions(self) -> jax.Array:
    return true_positions(J(self)).astype(jnp.int64)


# CPU lays nonzero's (N, ndim) result out column by column: strides (1, N), out= included.


@register(aten.nonzero.default)
def nonzero(self):
    rows = _positions(self)
    return tensor.wrap_strided(rows, (1, rows.shape[0]))


@register(aten.nonzero.out)
def nonzero_out(self, *, out):
    if out.dtype != torch.int64:
        raise RuntimeError(
            f"nonzero: Expected out tensor to have scalar type Long but got scalar type{dtypes.scalar_name(out.dtype)}"
        )
    if not tensor.is_jax(out):
        raise tensor.mixed_devices(out.device)
    rows = _positions(self)
    n, d = rows.shape
    out.resize_((d, n))
    tensor.write(out, rows.T)
    return out.as_strided_((n, d), (1, n))


@register_functional(aten.nonzero_static.default)
def nonzero_static(self, *, size, fill_value=-1):
    """nonzero padded (with fill_value) or cut to `size` rows: a static shape, so it traces."""
    if size < 0:
        raise RuntimeError("nonzero_static: 'size' must be an non-negative integer")
    if self.numel() == 0:  # jnp.argwhere pads an empty input with zeros, ignoring fill_value
        return jnp.full((size, self.dim()), fill_value, jnp.int64)
    return jnp.argwhere(J(self) != 0, size=size, fill_value=fill_value).astype(jnp.int64)


@register_functional(aten.index_select.default, out=False)
def index_select(self, dim, index):
    d = wrap_dim(dim, self.dim())
    if index.dim() > 1:
        raise IndexError("index_select(): Index is supposed to be a vector")
    if self.dim() == 0 and index.numel() != 1:
        raise RuntimeError(f"index_select(): Index to scalar can have only 1 value, got {index.numel()} value(s)")
    if index.dtype not in (torch.int64, torch.int32):
        raise RuntimeError("index_select(): Expected dtype int32 or int64 for index")
    i = any_device(index)
    size = self.shape[d] if self.dim() else 1
    # CPU's loops raise different errors: an empty self or dim 1 of a matrix checks the whole index
    # first (RuntimeError), the others while copying (IndexError)
    if self.dim() > 1 and self.numel() == 0 and i.size and size == 0:
        raise RuntimeError("index_select(): self indexing axis dim should be positive")
    if self.dim() > 1 and (self.numel() == 0 or d == 1):
        check_in_range(
            i,
            size,
            lambda: RuntimeError(f"INDICES element is out of DATA bounds, id={first_outside(i, size)} axis_dim={size}"),
        )
    else:
        check_in_range(i, size, lambda: IndexError("index out of range in self"))
    x = J(self)
    if x.ndim == 0:
        return x if i.ndim == 0 or i.shape[0] == 1 else jnp.broadcast_to(x, i.shape)
    return compiled(_take, d)(x, i)


def _take(x, i, axis):
    """index_select's rows as one program (eager, jnp.take and the reshape were several dispatches: an
    embedding lookup cost 83 us against 10 for the program alone, benchmarks/op_stream.py)."""
    return jnp.take(x, i.reshape(-1), axis=axis)


@register(aten.index_select.out)
def index_select_out(self, dim, index, *, out):
    wrap_dim(dim, self.dim())  # CPU's checks before the result's dtype
    if index.dim() > 1:
        raise IndexError("index_select(): Index is supposed to be a vector")
    if self.dtype != out.dtype:
        raise RuntimeError("index_select(): self and result must have the same scalar type")
    overlaps.check("index_select", out, {"self": self, "index": index})
    return store_into(out, index_select(self, dim, index), resize=True)


@register_functional(aten.gather.default, out=False)
def gather(self, dim, index, *, sparse_grad=False):
    d = wrap_dim(dim, self.dim())
    index_dtype_check("gather", index)
    if index.numel() == 0:
        return jnp.zeros(tuple(index.shape), dtypes.to_jax_dtype(self.dtype))
    if nonempty_dim(self) != nonempty_dim(index):
        raise RuntimeError("Index tensor must have the same number of dimensions as input tensor")
    for k in range(nonempty_dim(self)):
        if k != d and nonempty_size(index, k) > nonempty_size(self, k):
            raise RuntimeError(
                f"Size does not match at dimension {k} expected index {list(index.shape)} to be no larger than "
                f"self {list(self.shape)} apart from dimension {d}"
            )
    i = J(index)
    size = self.shape[d] if self.dim() else 1
    check_in_range(i, size, bounds_error(i, size, d))
    x = J(self)
    if x.ndim == 0:
        return jnp.broadcast_to(x, i.shape)
    if i.ndim == 0:  # a 0-dim index of a vector: one dimension of size 1
        return jnp.take_along_axis(x, i.reshape(1), axis=0).reshape(())
    return jnp.take_along_axis(_slice_to(x, i, d), i, axis=d)


@register(aten.gather.out)
def gather_out(self, dim, index, *, sparse_grad=False, out):
    out_dtypes.check_exact(self.dtype, out)
    overlaps.check("gather", out, {"self": self, "index": index})
    return store_into(out, gather(self, dim, index, sparse_grad=sparse_grad), resize=True)


def _slice_to(x, i, d):
    """gather reads only the leading index-shaped block of the other dims."""
    sl = tuple(slice(0, i.shape[k]) if k != d else slice(None) for k in range(x.ndim))
    return x[sl]


@register_functional(aten.embedding_dense_backward.default)
def embedding_dense_backward(grad_output, indices, num_weights, padding_idx, scale_grad_by_freq):
    """One program (as eager jnp ops it was ~290 us for 3 rows): rows of the gradient added into a zero
    table at their indices, padding_idx's rows left out, each divided by its index's count when asked."""
    body = _embedding_backward(int(num_weights), int(padding_idx), bool(scale_grad_by_freq))
    return body(J(grad_output), J(indices))


@jitted
def _embedding_backward(num_weights, padding_idx, scale_grad_by_freq):
    return functools.partial(
        _embedding_backward_body,
        num_weights=num_weights,
        padding_idx=padding_idx,
        scale_grad_by_freq=scale_grad_by_freq,
    )


def _embedding_backward_body(g, indices, *, num_weights, padding_idx, scale_grad_by_freq):
    idx = indices.reshape(-1)
    rows = g.reshape((-1, g.shape[-1]))
    c = jnp.float32 if g.dtype in (jnp.float16, jnp.bfloat16) else g.dtype
    rows = rows.astype(c)
    if padding_idx >= 0:
        rows = jnp.where((idx == padding_idx)[:, None], 0, rows)
    if scale_grad_by_freq:
        counts = jnp.zeros((num_weights,), c).at[idx].add(1)
        rows = rows / counts[idx][:, None]
    return jnp.zeros((num_weights, g.shape[-1]), c).at[idx].add(rows).astype(g.dtype)


@jitted
def _renorm_rows(max_norm, norm_type):
    """CPU's embedding_renorm_: each row an index names (once, however often named) whose norm, taken
    in the weight's dtype, exceeds max_norm is multiplied by max_norm / (norm + 1e-7), that scale
    computed in double and applied as a Scalar: converted to the weight's dtype, then multiplied in its
    opmath."""

    def run(w, idx):
        compute = opmath(w.dtype)
        rows = w.astype(compute)
        if norm_type == math.inf:
            norm = jnp.max(jnp.abs(rows), axis=1)
        elif norm_type == 0:
            norm = jnp.sum(rows != 0, axis=1).astype(compute)
        else:
            norm = jnp.sum(jnp.abs(rows) ** norm_type, axis=1) ** (1.0 / norm_type)
        norm = round_to(w.dtype)(norm).astype(jnp.float64)  # held in the weight's dtype
        # CPU's mul_ casts the scalar first (a double to a half through float, as c10 converts)
        scale = narrowed(max_norm / (norm + 1e-7), w.dtype).astype(compute)
        named = jnp.zeros((w.shape[0],), bool).at[idx].set(True)
        renormed = (rows * scale[:, None]).astype(w.dtype)
        return jnp.where((named & (norm > max_norm))[:, None], renormed, w)

    return run


@register(aten.embedding_renorm_.default)
def embedding_renorm_(self, indices, max_norm, norm_type):
    """nn.Embedding(max_norm=...) renormalises the rows it looks up, in place, before the lookup."""
    if self.dim() != 2:
        raise RuntimeError(f"embedding_renorm_(): Expected 2-D tensor for argument 'self'; but got {self.dim()}-D")
    if indices.dtype not in (torch.int64, torch.int32):
        raise RuntimeError(
            "embedding_renorm_(): Expected dtype int32/int64 for argument 'indices'; but got "
            f"{str(indices.dtype).split('.')[-1]}"
        )
    idx = any_device(indices).reshape(-1)
    n = self.shape[0]
    bad = (idx >= n) | (idx < -n)
    # CPU walks the sorted indices with select(): the smallest bad one is named; negative ones wrap
    tracing.check_values(
        bad,
        lambda: IndexError(
            f"select(): index {int(np.min(np.asarray(idx)[np.asarray(bad)]))} out of range for tensor of size "
            f"{list(self.shape)} at dimension 0"
        ),
    )
    idx = jnp.where(idx < 0, idx + n, idx)
    store_into(self, _renorm_rows(float(max_norm), float(norm_type))(J(self), idx), resize=False)
    return self
