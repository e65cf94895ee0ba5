"""Indexing, joining and masking: cat, index / index_put (advanced indexing), masked_fill,
masked_select, nonzero, index_select, gather, scatter.

Data-dependent shapes (boolean masks, nonzero) are computed concretely: this is eager mode. They
must not compile a program per count of true values (`x[mask] = v` in a training loop would compile
on every step): positions come from one padded program per mask shape plus a slice to the count,
and a write through a single mask needs no positions at all.
Integer indices are bounds-checked like PyTorch (JAX would silently clamp them).
"""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np
import torch

from jaxdev import dtypes, tensor, tracing
from jaxdev.ops import out_dtypes
from jaxdev.ops.registry import aten, register, register_functional, store_into
from jaxdev.ops.toolkit import (
    J,
    add_at,
    any_device,
    check_index_bounds,
    jitted,
    multiply_at,
    on_views,
    opmath,
    outside,
    wrap_dim,
)


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
    return lambda *xs: jnp.concatenate([x.astype(jdt) for x in xs], axis=d)


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
    return store_into(out, _concatenate(kept, d, out.dtype), resize=not any(out is t for t in tensors))


@register(aten._stack.out)
def _stack_out(tensors, dim=0, *, out):
    """CPU's _stack.out stacks: its CPU kernel unsqueezes the inputs. (The default backend kernel, which
    the jax device would otherwise get, concatenates them as they are: [6, 3] for two [3, 3].)"""
    return aten.stack.out(tensors, dim, out=out)


# --- positions of true values, one compile per shape ----------------------------------------------------


@jax.jit
def _padded_positions(x):
    """argwhere(x != 0) padded to x.size rows, and the count of true values."""
    m = x != 0
    return jnp.argwhere(m, size=m.size, fill_value=0), jnp.sum(m)


def true_positions(x) -> jax.Array:
    """jnp.argwhere(x != 0) (int64 rows), compiled once per shape: the count selects a prefix."""
    rows, count = _padded_positions(x)
    return jax.lax.slice_in_dim(rows, 0, int(count))


@functools.partial(jax.jit, static_argnums=2)
def _padded_rows(x, m, p):
    """x's entries where the mask m (over dims p .. p + m.ndim) is true, padded to m.size rows along
    dim p, and the count of true values."""
    flat = x.reshape(x.shape[:p] + (-1,) + x.shape[p + m.ndim :])
    return jnp.take(flat, jnp.flatnonzero(m, size=m.size, fill_value=0), axis=p), jnp.sum(m)


def _masked_rows(x, m, p):
    rows, count = _padded_rows(x, m, p)
    return jax.lax.slice_in_dim(rows, 0, int(count), axis=p)


@functools.partial(jax.jit, static_argnums=(3, 4))
def _put_through_mask(x, m, v, p, accumulate):
    """index_put with one mask over dims p ..: the i-th true position takes row i of v along dim p
    (v's dim p is 1 or the count), through a running count instead of the positions."""
    k = m.ndim
    row = jnp.clip(jnp.cumsum(m.reshape(-1)) - 1, 0, v.shape[p] - 1)
    g = jnp.take(v, row, axis=p).reshape(x.shape)
    if accumulate:
        g = x | g if x.dtype == jnp.bool_ else x + g
    return jnp.where(m.reshape((1,) * p + m.shape + (1,) * (x.ndim - p - k)), g, x)


def _single_mask(self, indices):
    """(p, mask) when `indices` is Nones and exactly one boolean mask, else None."""
    tensors = [(p, ix) for p, ix in enumerate(indices) if ix is not None]
    if len(tensors) != 1 or tensors[0][1].dtype not in (torch.bool, torch.uint8):
        return None
    p, mask = tensors[0]
    if any(mask.shape[k] != self.shape[p + k] if p + k < self.dim() else True for k in range(mask.dim())):
        return None  # the general path raises CPU's IndexError
    return p, any_device(mask).astype(bool)


def _index_tuple(self, indices):
    """PyTorch's `indices` list (None = whole dim, bool masks, integer tensors) as a jnp index."""
    out, dim = [], 0
    for ix in indices:
        if ix is None:
            out.append(slice(None))
            dim += 1
            continue
        a = any_device(ix)
        if a.dtype in (jnp.bool_, jnp.uint8):
            a = a.astype(bool)
            for k in range(a.ndim):
                if dim + k >= self.dim() or a.shape[k] != self.shape[dim + k]:
                    raise IndexError(
                        f"The shape of the mask {list(a.shape)} at index {k} does not match the shape "
                        f"of the indexed tensor {list(self.shape)} at index {dim + k}"
                    )
            out.extend(true_positions(a).T)
            dim += a.ndim
        else:
            if a.dtype not in (jnp.int64, jnp.int32):  # CPU: int16, int8 and uint16 indices are refused too
                raise IndexError("tensors used as indices must be long, int, byte or bool tensors")
            if dim >= self.dim():
                raise IndexError(f"too many indices for tensor of dimension {self.dim()}")
            check_index_bounds(a, self.shape[dim], dim)
            out.append(a)
            dim += 1
    if dim > self.dim():
        raise IndexError(f"too many indices for tensor of dimension {self.dim()} (got {dim})")
    return tuple(out)


@register_functional(aten.index.Tensor)
def index(self, indices):
    single = _single_mask(self, indices)
    if single is not None:
        return _masked_rows(J(self), single[1], single[0])
    structure, arrays = _split_index(_index_tuple(self, indices))
    return _indexed(structure)(J(self), *arrays)


def _split_index(index: tuple) -> tuple:
    """A jnp index of whole dims and index arrays as (structure, arrays): `structure` is True for each
    whole dim and keys the jitted program, the arrays are its arguments (eager jnp indexing spends
    ~100s of us in Python planning its gather or scatter)."""
    return tuple(isinstance(e, slice) for e in index), [e for e in index if not isinstance(e, slice)]


def _joined_index(structure: tuple, arrays) -> tuple:
    """Traceable: the index `_split_index` took apart."""
    it = iter(arrays)
    return tuple(slice(None) if whole else next(it) for whole in structure)


@jitted
def _indexed(structure):
    """x[index] in one program."""
    return lambda x, *arrays: x[_joined_index(structure, arrays)]


def _fill_value(value: torch.Tensor, dtype: torch.dtype) -> jax.Array:
    """A 0-dim tensor value as masked_fill takes it (and index_put_ of one through a bool mask, which
    is masked_fill on CPU): CPU reads it (`value.item()`) and converts the scalar with c10's checked
    Scalar::to<T>, so 300.0 into int8 raises instead of wrapping or saturating. Inside a compiled
    program the value stays on the device and the overflow is a deferred check."""
    v = J(value)
    jdt = dtypes.to_jax_dtype(dtype)
    if not tracing.is_traced(v):
        scalar = value.item()
        dtypes.check_scalar(scalar, dtype)
        return jnp.asarray(scalar).astype(jdt)
    dtypes.check_array_fits(v, dtype)
    return dtypes.convert(v, jdt)


def _put_value(self, values, mask, p):
    """values cast to self's dtype and broadcast to the indexing result [pre.., count or 1, rest..]."""
    if values.dim() == 0:
        v = _fill_value(values, self.dtype) if values.device.type == "jax" or values.is_cpu else None
    else:
        v = J(values).astype(J(self).dtype) if values.device.type == "jax" else None
    v = tensor.from_cpu(values).astype(dtypes.to_jax_dtype(self.dtype)) if v is None else v
    pre, rest = tuple(self.shape[:p]), tuple(self.shape[p + mask.ndim :])
    count = jnp.sum(mask)

    def mismatch():
        result = [*pre, int(count), *rest]
        return RuntimeError(
            f"shape mismatch: value tensor of shape {list(values.shape)} cannot be broadcast to indexing result "
            f"of shape {result}"
        )

    n = len(pre) + 1 + len(rest)
    if v.ndim > n:
        raise mismatch()
    shape = (1,) * (n - v.ndim) + v.shape
    for have, want in zip(shape[:p] + shape[p + 1 :], pre + rest):
        if have not in (1, want):
            raise mismatch()
    if shape[p] != 1:
        tracing.check_values(count != shape[p], mismatch)
    return jnp.broadcast_to(v.reshape(shape), (*pre, shape[p], *rest))


def _check_put_dtypes(self, values, *, zero_dim_converts=False):
    """CPU refuses a value of another dtype, except a 0-dim one put through a single bool mask (that
    path is masked_fill, which converts the scalar)."""
    if (values.dim() or not zero_dim_converts) and values.dtype != self.dtype:
        raise RuntimeError(
            "Index put requires the source and destination dtypes match, got "
            f"{dtypes.scalar_name(self.dtype)} for the destination and {dtypes.scalar_name(values.dtype)} for the source."
        )


def _check_empty_dims(self, indices) -> None:
    """AdvancedIndex's first check: an index with elements into a dim of size 0."""
    dim = 0
    for ix in indices:
        if ix is None:
            dim += 1
            continue
        width = ix.dim() if ix.dtype in (torch.bool, torch.uint8) else 1
        if ix.numel() and any(n == 0 for n in self.shape[dim : dim + width]):
            raise IndexError("index is out of bounds for dimension with size 0")
        dim += width


def _indexing_result_shape(shape, index) -> tuple[int, ...]:
    """NumPy's (and PyTorch's) advanced-indexing result shape for `index` (slices and index arrays): the
    index arrays broadcast together and stand where they are when adjacent, in front otherwise."""
    arrays = [i for i, ix in enumerate(index) if not isinstance(ix, slice)]
    if not arrays:
        return tuple(shape)
    middle = jnp.broadcast_shapes(*(index[i].shape for i in arrays))
    rest = [n for i, n in enumerate(shape) if i >= len(index) or isinstance(index[i], slice)]
    if arrays == list(range(arrays[0], arrays[-1] + 1)):
        first = arrays[0]
        return (*shape[:first], *middle, *rest[first:])
    return (*middle, *rest)


@register_functional(aten.index_put.default)
def index_put(self, indices, values, accumulate=False):
    x = J(self)
    single = _single_mask(self, indices)
    if single is not None:
        _check_put_dtypes(self, values, zero_dim_converts=True)
        p, mask = single
        return _put_through_mask(x, mask, _put_value(self, values, mask, p), p, bool(accumulate))
    _check_empty_dims(self, indices)  # CPU's order: a size-0 indexed dim, the dtypes, then the bounds
    _check_put_dtypes(self, values)
    index = _index_tuple(self, indices)
    result = _indexing_result_shape(tuple(self.shape), index)
    have = tuple(values.shape)
    if len(have) > len(result) or any(h not in (1, w) for h, w in zip(have[::-1], result[::-1])):
        raise RuntimeError(
            f"shape mismatch: value tensor of shape {list(have)} cannot be broadcast to indexing result "
            f"of shape {list(result)}"
        )
    v = J(values) if values.device.type == "jax" or values.dim() == 0 else tensor.from_cpu(values)
    structure, arrays = _split_index(index)
    return _put_at(structure, bool(accumulate))(x, v, *arrays)


@jitted
def _put_at(structure, accumulate):
    """index_put's update in one program (the index as in _indexed)."""

    def run(x, v, *arrays):
        ref = x.at[_joined_index(structure, arrays)]
        v = v.astype(x.dtype)
        return add_at(ref, v) if accumulate else ref.set(v)

    return run


@register(aten._index_put_impl_.default)
def index_put_impl_(self, indices, values, accumulate=False, unsafe=False):
    tensor.write(self, index_put(self, indices, values, accumulate))
    return self


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
        value = _fill_value(value, self.dtype)
    else:
        dtypes.check_scalar(value, self.dtype)  # c10's checked Scalar::to<scalar_t>, whatever the mask
        if type(value) is int and not -(2**63) <= value < 2**63:  # past a jit argument's int64
            value = jnp.asarray(value, dtypes.to_jax_dtype(self.dtype))
    return on_views(_masked_fill, (self, mask), (value,))


@jax.jit
def _masked_fill(x, mask, value):
    """One program (eagerly: a conversion, a cast and a select, ~30 us for 4x8)."""
    return jnp.where(mask, jnp.asarray(value).astype(x.dtype), x)


register_functional(aten.masked_fill.Scalar, aten.masked_fill.Tensor)(_mask_value)


@register_functional(aten.masked_select.default)
def masked_select(self, mask):
    if mask.dtype != torch.bool:
        raise RuntimeError("masked_select: expected BoolTensor for mask")
    x, m = J(self), J(mask)
    shape = jnp.broadcast_shapes(x.shape, m.shape)
    return _masked_rows(jnp.broadcast_to(x, shape), jnp.broadcast_to(m, shape), 0).reshape(-1)


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


def _first_outside(i, size: int) -> int:
    """The first index (row-major) outside [0, size): the one CPU's loops report."""
    flat = np.asarray(i).reshape(-1)
    return int(flat[np.argmax((flat < 0) | (flat >= size))])


def _check_in_range(i, size: int, error) -> None:
    """CPU's index_select/gather/scatter take indices in [0, size) only (no negative ones)."""
    if i.size:
        tracing.check_values(outside(0, int(size))(i), error)


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
        _check_in_range(
            i,
            size,
            lambda: RuntimeError(
                f"INDICES element is out of DATA bounds, id={_first_outside(i, size)} axis_dim={size}"
            ),
        )
    else:
        _check_in_range(i, size, lambda: IndexError("index out of range in self"))
    x = J(self)
    if x.ndim == 0:
        return x if i.ndim == 0 or i.shape[0] == 1 else jnp.broadcast_to(x, i.shape)
    return jnp.take(x, i.reshape(-1), axis=d)


@register(aten.index_select.out)
def index_select_out(self, dim, index, *, out):
    wrap_dim(dim, self.dim())  # CPU's checks before the result's dtype
    if index.dim() > 1:
        raise IndexError("index_select(): Index is supposed to be a vector")
    if self.dtype != out.dtype:
        raise RuntimeError("index_select(): self and result must have the same scalar type")
    return store_into(out, index_select(self, dim, index), resize=True)


def _nonempty_dim(t) -> int:
    return max(t.dim(), 1)


def _nonempty_size(t, d: int) -> int:
    return t.shape[d] if t.dim() else 1


def _index_dtype_check(name, index) -> None:
    if index.numel() != 0 and index.dtype not in (torch.int64, torch.int32):  # CPU checks non-empty ones
        raise RuntimeError(f"{name}(): Expected dtype int32/int64 for index")


def _bounds_error(i, size, d):
    return lambda: RuntimeError(f"index {_first_outside(i, size)} is out of bounds for dimension {d} with size {size}")


@register_functional(aten.gather.default, out=False)
def gather(self, dim, index, *, sparse_grad=False):
    d = wrap_dim(dim, self.dim())
    _index_dtype_check("gather", index)
    if index.numel() == 0:
        return jnp.zeros(tuple(index.shape), dtypes.to_jax_dtype(self.dtype))
    if _nonempty_dim(self) != _nonempty_dim(index):
        raise RuntimeError("Index tensor must have the same number of dimensions as input tensor")
    for k in range(_nonempty_dim(self)):
        if k != d and _nonempty_size(index, k) > _nonempty_size(self, k):
            raise RuntimeError(
                f"Size does not match at dimension {k} expected index {list(index.shape)} to be no larger than "
                f"self {list(self.shape)} apart from dimension {d}"
            )
    i = J(index)
    size = self.shape[d] if self.dim() else 1
    _check_in_range(i, size, _bounds_error(i, size, d))
    x = J(self)
    if x.ndim == 0:
        return jnp.broadcast_to(x, i.shape)
    if i.ndim == 0:  # a 0-dim index of a vector: one dimension of size 1
        return jnp.take_along_axis(x, i.reshape(1), axis=0).reshape(())
    return jnp.take_along_axis(_slice_to(x, i, d), i, axis=d)


@register(aten.gather.out)
def gather_out(self, dim, index, *, sparse_grad=False, out):
    out_dtypes.check_exact(self.dtype, out)
    return store_into(out, gather(self, dim, index, sparse_grad=sparse_grad), resize=True)


def _slice_to(x, i, d):
    """gather reads only the leading index-shaped block of the other dims."""
    sl = tuple(slice(0, i.shape[k]) if k != d else slice(None) for k in range(x.ndim))
    return x[sl]


def _scatter_checks(self, d, index, src, name="scatter") -> None:
    """CPU's scatter_meta_impl: dtypes, then shapes (only for a non-empty index)."""
    _index_dtype_check(name, index)
    tensor_src = isinstance(src, torch.Tensor)
    if tensor_src and self.dtype != src.dtype:
        raise RuntimeError(f"{name}(): Expected self.dtype to be equal to src.dtype")
    scatter_shape_check(self, d, index, src if tensor_src else None)
    if not tensor_src and index.numel() != 0:
        dtypes.check_scalar(src, self.dtype)


def scatter_shape_check(self, d, index, src) -> None:
    """CPU's scatter_shape_check, then its scatter kernel's own check of src (a tensor, or None for a
    number), for a non-empty index. A 0-dim operand counts as one dimension of size 1; a src of fewer
    (but some) dimensions than self fails on its first missing one, as CPU's ensure_nonempty_size does."""
    if index.numel() == 0:
        return
    if _nonempty_dim(self) != _nonempty_dim(index):
        raise RuntimeError("Index tensor must have the same number of dimensions as self tensor")
    dims = range(_nonempty_dim(self))
    wrong = any(k != d and _nonempty_size(index, k) > _nonempty_size(self, k) for k in dims)
    if not wrong and src is not None:
        wrong = any(_nonempty_size(index, k) > (src.shape[wrap_dim(k, src.dim())] if src.dim() else 1) for k in dims)
    if wrong:
        message = (
            f"Expected index {list(index.shape)} to be no larger than self {list(self.shape)} apart from dimension {d}"
        )
        raise RuntimeError(
            message + (f" and to be no larger size than src {list(src.shape)}" if src is not None else "")
        )
    if src is not None and _nonempty_dim(src) != _nonempty_dim(index):
        raise RuntimeError("Index tensor must have the same number of dimensions as src tensor")


def _scatter(self, dim, index, src, reduce=None):
    d = wrap_dim(dim, self.dim())
    _scatter_checks(self, d, index, src)
    if reduce is not None and reduce not in ("add", "multiply"):
        raise RuntimeError("reduce argument must be either add or multiply.")
    if index.numel() == 0:
        return J(self)
    if self.dim() == 0 or index.dim() == 0:  # 0-dim operands (each one dimension of size 1) as vectors
        src = src.reshape(-1) if isinstance(src, torch.Tensor) else src
        return _scatter(self.reshape(-1), 0, index.reshape(-1), src, reduce).reshape(self.shape)
    x = J(self)
    i = J(index)
    _check_in_range(i, self.shape[d], _bounds_error(i, self.shape[d], d))
    if reduce not in (None, "add", "sum", "multiply", "prod"):
        raise RuntimeError(f"reduce argument must be either add or multiply, got {reduce}")
    tensor_src = isinstance(src, torch.Tensor)
    if not tensor_src and type(src) is int and not -(2**63) <= src < 2**63:  # past a jit argument's int64
        src = jnp.asarray(src, x.dtype)
    return _scattered(d, reduce, tensor_src)(x, i, J(src) if tensor_src else src)


@jitted
def _scattered(d, reduce, tensor_src):
    """scatter's values in one program (as eager jnp ops, a small scatter_add took ~500 us)."""

    def run(x, i, src):
        if tensor_src and src.ndim < i.ndim:  # CPU reads a src of fewer dims (a 0-dim one) as size 1 there
            src = src.reshape(src.shape + (1,) * (i.ndim - src.ndim))
        s = src[tuple(slice(0, n) for n in i.shape)] if tensor_src else jnp.full(i.shape, src)
        s = s.astype(x.dtype)
        grids = list(jnp.meshgrid(*[jnp.arange(n) for n in i.shape], indexing="ij"))
        grids[d] = jnp.where(i < 0, i + x.shape[d], i)
        if reduce is None:
            return x.at[tuple(grids)].set(s)
        # CPU's scatter kernels accumulate half and bfloat16 in float and round once (scatter_add of 3000
        # float16 ones is 3000, not the 2048 a float16 accumulator stops at); cummax/cummin's gradient is
        # such a scatter_add
        acc = opmath(x.dtype)
        ref = x.astype(acc).at[tuple(grids)]
        if reduce in ("add", "sum"):
            return add_at(ref, s.astype(acc)).astype(x.dtype)
        return multiply_at(ref, s.astype(acc)).astype(x.dtype)

    return run


@register_functional(aten.scatter.src, aten.scatter.value)
def scatter(self, dim, index, src):
    return _scatter(self, dim, index, src)


@register_functional(aten.scatter.reduce, aten.scatter.value_reduce)
def scatter_reduce_legacy(self, dim, index, src, *, reduce):
    return _scatter(self, dim, index, src, reduce)


@register_functional(aten.scatter_add.default)
def scatter_add(self, dim, index, src):
    return _scatter(self, dim, index, src, "add")


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
        norm = norm.astype(w.dtype).astype(jnp.float64)
        scale = (max_norm / (norm + 1e-7)).astype(w.dtype).astype(compute)  # CPU's mul_ casts the scalar first
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
