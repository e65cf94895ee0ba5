"""Accumulating writes beyond indexing.py: scatter_reduce.two (sum/prod/mean/amax/amin,
include_self), index_add, masked_scatter, index_copy/index_fill/index_reduce, put/take.

Their backward formulas are composites of ops that already run on jax (gather, index_select,
masked_select, scatter_add, ...).
"""

from __future__ import annotations

import jax.numpy as jnp
import torch

from jaxdev import dtypes, tracing
from jaxdev.ops.indexing import scatter_shape_check
from jaxdev.ops.registry import aten, register, register_functional, store_into
from jaxdev.ops.toolkit import J, add_at, any_device, check_index_bounds, jitted, multiply_at, opmath, wrap_dim


def _positions(i, d):
    """Full index tuple for a scatter along `d` with index array `i` (other dims: their own position)."""
    grids = list(jnp.meshgrid(*[jnp.arange(n) for n in i.shape], indexing="ij"))
    grids[d] = i
    return tuple(grids)


@jitted
def _scatter_reduce(d, reduce, include_self, floor_mean, wide=False):
    """wide: half and bfloat16 sums and products accumulate in float32 and round once, as CPU's
    scatter_reduce does (its index_reduce accumulates in the dtype itself)."""

    def run(x, i, s):
        i = jnp.where(i < 0, i + x.shape[d], i)
        s = s[tuple(slice(0, n) for n in i.shape)].astype(x.dtype)
        pos = _positions(i, d)
        hit = jnp.zeros(x.shape, bool).at[pos].set(True)
        acc = opmath(x.dtype) if wide else x.dtype
        if reduce in ("sum", "mean"):
            base = x if include_self else jnp.where(hit, jnp.zeros((), x.dtype), x)
            total = add_at(base.astype(acc).at[pos], s.astype(acc)).astype(x.dtype)
            if reduce == "sum":
                return total
            count = jnp.zeros(x.shape, jnp.int64).at[pos].add(1) + (1 if include_self else 0)
            count = jnp.maximum(count, 1).astype(x.dtype)
            mean = jnp.floor_divide(total, count) if floor_mean else total / count
            return jnp.where(hit, mean, x)
        if reduce == "prod":
            base = x if include_self else jnp.where(hit, jnp.ones((), x.dtype), x)
            return multiply_at(base.astype(acc).at[pos], s.astype(acc)).astype(x.dtype)
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
    scatter_shape_check(self, d, index, src)
    x, i = J(self), J(index)
    if i.size == 0:
        return x
    check_index_bounds(i, self.shape[d] if self.dim() else 1, d, RuntimeError)  # CPU: a RuntimeError here
    floor = not (self.dtype.is_floating_point or self.dtype.is_complex)
    s = J(src)
    if x.ndim <= 1:  # 0-dim operands count as one dimension of size 1
        out = _scatter_reduce(0, reduce, bool(include_self), floor, True)(x.reshape(-1), i.reshape(-1), s.reshape(-1))
        return out.reshape(x.shape)
    return _scatter_reduce(d, reduce, bool(include_self), floor, True)(x, i, s)


@jitted
def _index_add(d):
    def run(x, i, s, alpha):
        i = jnp.where(i < 0, i + x.shape[d], i)
        return add_at(x.at[(slice(None),) * d + (i,)], (s * alpha).astype(x.dtype))

    return run


@register_functional(aten.index_add.default)
def index_add(self, dim, index, source, *, alpha=1):
    d = wrap_dim(dim, self.dim())
    _index_func_check(self, d, index, source, "index_add")
    i = any_device(index).reshape(-1)
    check_index_bounds(i, self.shape[d] if self.dim() else 1, d, RuntimeError)
    x, s = J(self), J(source)
    if isinstance(alpha, float) and not (self.dtype.is_floating_point or self.dtype.is_complex):
        alpha = int(alpha)  # CPU reads alpha as the tensor's dtype: truncated for integers
    if x.ndim == 0:
        return add_at(x[None].at[i], (s.reshape(-1) * alpha).astype(x.dtype))[0]
    if s.ndim == 0:
        s = s.reshape((1,))
    c = opmath(x.dtype)
    return _index_add(d)(x.astype(c), i, s.astype(c), alpha).astype(x.dtype)


def _index_func_check(self, d, index, source, func) -> None:
    """CPU's index_func_meta_impl (index_add, index_reduce), in its order: a 0-dim source counts as
    one slice; otherwise self and source agree on every size but `d`'s."""
    if index.dim() > 1:
        raise IndexError(
            f"{func}_(): Index is supposed to be a vector, but got dim: {index.dim()} with type: "
            f"{dtypes.scalar_name(index.dtype)} and size: {list(index.shape)}"
        )
    if index.dtype not in (torch.int64, torch.int32):
        raise RuntimeError(
            f"{func}_(): Expected dtype int32/int64 for index but got: {dtypes.scalar_name(index.dtype)}"
        )
    if self.dtype != source.dtype:
        raise RuntimeError(
            f"{func}_(): self ({dtypes.scalar_name(self.dtype)}) and source ({dtypes.scalar_name(source.dtype)}) "
            "must have the same scalar type"
        )
    if not (d == 0 or d < source.dim()):
        raise RuntimeError(f"{func}_(): Indexing dim {d} is out of bounds of the source tensor with dim {source.dim()}")
    slices = 1 if source.dim() == 0 else source.shape[d]
    if index.numel() != slices:
        if source.dim() == 0:  # CPU's message asks a 0-dim source for its size at d
            raise IndexError(f"Dimension specified as {d} but tensor has no dimensions")
        raise RuntimeError(
            f"{func}_(): Number of indices ({index.numel()}) should be equal to source.size(dim): ({slices}), for dim: {d}"
        )
    self_rest, source_rest = list(self.shape), list(source.shape)
    if self.dim() and source.dim():
        del self_rest[d], source_rest[d]
    if self_rest != source_rest:
        raise RuntimeError(
            "source tensor shape must match self tensor shape, excluding the specified dimension. "
            f"Got self.shape = {list(self.shape)} source.shape = {list(source.shape)}"
        )


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


def _slice_positions(self, d, index, error_of=None):
    """`index` (a vector or a number) as non-negative positions along `d`, checked against its size."""
    i = any_device(index).reshape(-1)
    size = self.shape[d] if self.dim() else 1
    check_index_bounds(i, size, d, error_of)
    return jnp.where(i < 0, i + size, i)


@register_functional(aten.index_copy.default)
def index_copy(self, dim, index, source):
    d = wrap_dim(dim, self.dim())
    _index_copy_check(self, d, index, source)
    i = _slice_positions(self, d, index, lambda message: IndexError("index_copy_(): " + message))
    x, s = J(self), J(source)
    if x.ndim == 0:
        return s.reshape(()) if i.size else x
    return x.at[(slice(None),) * d + (i,)].set(s.reshape(x.shape[:d] + (i.shape[0],) + x.shape[d + 1 :]))


def _index_copy_check(self, d, index, source) -> None:
    """CPU's index_copy meta checks, in its order."""
    if index.dim() > 1:
        raise IndexError(f"index_copy_(): Index should have dimension 1 or 0 (got {index.dim()})")
    count = index.numel()
    if source.dim() == 0 and count != 1:
        raise IndexError(f"index_copy_(): When source is scalar, index should have one element (got {count})")
    if source.dim() != self.dim() and source.dim() != 0 and self.dim() != 0:
        raise IndexError(
            "index_copy_(): When source and destination are not scalars, their dimensionality must match. "
            f"Source dimensionality ({source.dim()}), destination dimensionality ({self.dim()})"
        )
    if index.dtype != torch.int64:
        raise RuntimeError(
            f"index_copy_(): Expected a long tensor for index, but got {dtypes.scalar_name(index.dtype)}"
        )
    if self.dtype != source.dtype:
        raise RuntimeError(
            "index_copy_(): self and source expected to have the same dtype, but got (self) "
            f"{dtypes.scalar_name(self.dtype)} and (source) {dtypes.scalar_name(source.dtype)}"
        )
    self_rest = [n for k, n in enumerate(self.shape) if k != d]
    source_rest = [n for k, n in enumerate(source.shape) if k != d]
    if self_rest != source_rest:
        raise RuntimeError(
            "index_copy_(): Source/destination tensor must have same slice shapes. Destination slice shape: "
            f"{' '.join(map(str, self_rest))} at dimension {d} and source slice shape: "
            f"{' '.join(map(str, source_rest))} at dimension 0."
        )
    if source.dim() != 0 and count != source.shape[d]:
        raise IndexError(
            f"index_copy_(): Number of indices ({count}) should be equal to source.size(dim) ({source.shape[d]})"
        )


@register_functional(aten.index_fill.int_Scalar, aten.index_fill.int_Tensor)
def index_fill(self, dim, index, value):
    d = wrap_dim(dim, self.dim())
    if index.dim() > 1:
        raise RuntimeError("Index has to be a vector/scalar")
    if index.dtype != torch.int64:
        raise IndexError("index_fill_(): Expected dtype int64 for index.")
    i = _slice_positions(self, d, index)
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
    d = wrap_dim(dim, self.dim())
    _index_func_check(self, d, index, source, "index_reduce")
    i = _slice_positions(self, d, index, lambda message: IndexError("index out of range in self"))
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


@register(aten.take.out)
def take_out(self, index, *, out):
    if out.dtype != self.dtype:  # CPU checks this first
        raise RuntimeError(
            "take(): self and out expected to have the same dtype, but got self.dtype = "
            f"{dtypes.scalar_name(self.dtype)} and out.dtype = {dtypes.scalar_name(out.dtype)}"
        )
    return store_into(out, take(self, index), resize=True)


@register_functional(aten.take.default, out=False)
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


# --- segment_reduce (CPU: SegmentReduce.cpp) --------------------------------------------------------

_SEGMENT_REDUCTIONS = {
    "max": "max",
    "amax": "max",
    "min": "min",
    "amin": "min",
    "sum": "sum",
    "mean": "mean",
    "prod": "prod",
}


def _segment_reduction(reduce: str) -> str:
    if reduce not in _SEGMENT_REDUCTIONS:
        raise RuntimeError(f"reduce argument must be either sum, prod, mean, amax or amin, got {reduce}")
    return _SEGMENT_REDUCTIONS[reduce]


def _segment_bounds(lengths, offsets, axis):
    """(offsets as (outer, S + 1), kind): CPU's lengths become offsets by a running sum."""
    if offsets is not None:
        o = J(offsets)
        return o.reshape(-1, o.shape[-1]).astype(jnp.int64)
    n = J(lengths)
    n = n.reshape(-1, n.shape[-1]).astype(jnp.int64)
    return jnp.concatenate([jnp.zeros((n.shape[0], 1), jnp.int64), jnp.cumsum(n, axis=1)], axis=1)


def _segment_membership(off, length):
    """(member (outer, S, L), per-segment length (outer, S)): position p is in segment s when
    offsets[s] <= p < offsets[s + 1]."""
    p = jnp.arange(length)
    member = (p[None, None, :] >= off[:, :-1, None]) & (p[None, None, :] < off[:, 1:, None])
    return member, off[:, 1:] - off[:, :-1]


@jitted
def _segment_reduce_body(reduce: str, initial, jdt):
    c = opmath(jnp.dtype(jdt))

    def body(x, off):
        x = x.astype(c)  # (outer, L, inner)
        member, n = _segment_membership(off, x.shape[1])
        m = member[..., None]  # (outer, S, L, 1)
        xs = x[:, None]  # (outer, 1, L, inner)
        if initial is not None:
            init = jnp.asarray(initial, jdt).astype(c)
        else:
            init = {"max": -jnp.inf, "min": jnp.inf, "sum": 0, "mean": 0, "prod": 1}[reduce]
            init = jnp.asarray(init, c)
        if reduce == "max":
            r = jnp.maximum(init, jnp.max(jnp.where(m, xs, -jnp.inf), axis=2))
        elif reduce == "min":
            r = jnp.minimum(init, jnp.min(jnp.where(m, xs, jnp.inf), axis=2))
        elif reduce == "prod":
            r = init * jnp.prod(jnp.where(m, xs, 1), axis=2)
        else:
            r = init + jnp.sum(jnp.where(m, xs, 0), axis=2)
        if reduce == "mean":
            count = n[..., None].astype(c)
            if initial is None:
                r = jnp.where(count == 0, jnp.nan, r / jnp.maximum(count, 1))
            else:
                r = jnp.where(count > 0, r / jnp.maximum(count, 1), r)
        return r.astype(jdt)

    return body


def _segment_layout(data, axis):
    shape = tuple(data.shape)
    outer = 1
    for s in shape[:axis]:
        outer *= s
    inner = 1
    for s in shape[axis + 1 :]:
        inner *= s
    return shape, outer, inner


def _segment_checks(data, reduce, lengths, indices, offsets, axis, unsafe=True):
    if data.dtype not in (torch.float32, torch.float64, torch.float16, torch.bfloat16):
        raise NotImplementedError(f"\"_segment_reduce_cpu\" not implemented for '{dtypes.scalar_name(data.dtype)}'")
    axis = wrap_dim(axis, data.dim())
    if indices is not None:
        raise RuntimeError("segment_reduce(): indices based reduction is not supported yet.")
    if lengths is None and offsets is None:
        raise RuntimeError("segment_reduce(): Either lengths or offsets must be defined.")
    reduction = _segment_reduction(reduce)
    bounds, name = (offsets, "offsets") if offsets is not None else (lengths, "lengths")
    if data.dim() < bounds.dim():
        raise RuntimeError(f"segment_reduce(): Expected {name} to have at most data's dimensions")
    if axis != bounds.dim() - 1:
        raise RuntimeError(f"segment_reduce(): Expected axis to be the last dimension of {name} but got {axis}.")
    if bounds.dtype not in (torch.int32, torch.int64):
        kernel = "_segment_reduce_lengths_cpu_kernel1" if offsets is None else "_segment_reduce_offsets_cpu_kernel1"
        raise NotImplementedError(f"\"{kernel}\" not implemented for '{dtypes.scalar_name(bounds.dtype)}'")
    if offsets is None and not unsafe:
        n = J(lengths)
        tracing.check_values(n < 0, lambda: RuntimeError("lengths contains negative value!"))
        tracing.check_values(
            jnp.sum(n, axis=-1) != data.shape[axis],
            lambda: RuntimeError(
                "segment_reduce(): Expected all rows of lengths along axis to sum to data.size(lengths.dim()-1) "
                "when !unsafe."
            ),
        )
    return axis, reduction


def _initial_value(initial):
    if initial is None or isinstance(initial, (bool, int, float)):
        return initial
    return complex(initial) if isinstance(initial, complex) else float(initial)


@register_functional(aten.segment_reduce.default)
def segment_reduce(data, reduce, *, lengths=None, indices=None, offsets=None, axis=0, unsafe=False, initial=None):
    """CPU's rule per segment: start from `initial` (or -inf / inf / 0 / 1), fold the elements in
    (max and min propagate NaN), mean divides by the length unless the segment is empty (NaN then,
    or `initial` when given)."""
    axis, reduction = _segment_checks(data, reduce, lengths, indices, offsets, axis, unsafe)
    shape, outer, inner = _segment_layout(data, axis)
    off = _segment_bounds(lengths, offsets, axis)
    x = J(data).reshape(outer, shape[axis], inner)
    r = _segment_reduce_body(reduction, _initial_value(initial), x.dtype)(x, off)
    return r.reshape(shape[:axis] + (off.shape[1] - 1,) + shape[axis + 1 :])


@jitted
def _segment_grad_body(reduce: str, initial, jdt):
    c = opmath(jnp.dtype(jdt))

    def body(g, out, x, off):
        g, out, x = g.astype(c), out.astype(c), x.astype(c)  # (outer, S, inner), (outer, S, inner), (outer, L, inner)
        member, n = _segment_membership(off, x.shape[1])
        inside = jnp.any(member, axis=1)  # (outer, L)
        seg = jnp.argmax(member, axis=1)  # (outer, L): the segment of each position
        take = lambda v: jnp.take_along_axis(v, seg[..., None], axis=1)  # (outer, L, inner)
        gp, op = take(g), take(out)
        if reduce in ("max", "min"):
            match = (jnp.isnan(x) | (x == op)) & inside[..., None]
            gi = jnp.where(match, gp, 0)
            counter = jnp.einsum("osl,oli->osi", member.astype(c), match.astype(c))
            cp = take(counter)
            gi = jnp.where((cp >= 2) & (gi > 0), gi / jnp.maximum(cp, 1), gi)  # CPU divides positive ones only
        elif reduce == "mean":
            gi = gp / take(n[..., None].astype(c))
        elif reduce == "sum":
            gi = gp
        else:
            same = member[:, :, :, None] & member[:, :, None, :]  # (outer, S, L, L)
            same = jnp.any(same, axis=1) & ~jnp.eye(x.shape[1], dtype=bool)  # (outer, L, L): q in p's segment
            start = jnp.asarray(1 if initial is None else initial, jdt).astype(c)
            excl = start * jnp.prod(jnp.where(same[..., None], x[:, None], 1), axis=2)
            gi = jnp.where(jnp.isnan(x) | (x == 0), gp * excl, gp * op / x)
        return jnp.where(inside[..., None], gi, 0).astype(jdt)

    return body


@register_functional(aten._segment_reduce_backward.default)
def segment_reduce_backward(grad, output, data, reduce, *, lengths=None, offsets=None, axis=0, initial=None):
    axis, reduction = _segment_checks(data, reduce, lengths, None, offsets, axis)
    shape, outer, inner = _segment_layout(data, axis)
    off = _segment_bounds(lengths, offsets, axis)
    segments = off.shape[1] - 1
    x = J(data).reshape(outer, shape[axis], inner)
    g = J(grad).reshape(outer, segments, inner)
    out = J(output).reshape(outer, segments, inner)
    if segments == 0 or x.size == 0:
        return jnp.zeros(shape, x.dtype)
    return _segment_grad_body(reduction, _initial_value(initial), x.dtype)(g, out, x, off).reshape(shape)
