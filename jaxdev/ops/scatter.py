"""Indexed writes: scatter (src, value, add, multiply), scatter_add, scatter_reduce.two
(sum/prod/mean/amax/amin, include_self), index_add, masked_scatter, index_copy/index_fill/index_reduce
(put and take: ops/put_take.py). Their in-place variants write into self's own buffer where they may
(ops/kit/indexed_writes.py).

Their backward formulas are composites of ops that already run on jax (gather, index_select,
masked_select, scatter_add, ...).
"""

from __future__ import annotations

import jax.numpy as jnp
import torch

from jaxdev import dtypes, tracing
from jaxdev.ops.kit import J, add_at, any_device, check_index_bounds, jitted, multiply_at, opmath, wrap_dim
from jaxdev.ops.kit.cpu_numerics import narrowed
from jaxdev.ops.kit.index_checks import bounds_error, check_in_range, index_dtype_check, nonempty_dim, nonempty_size
from jaxdev.ops.kit.indexed_writes import into
from jaxdev.ops.kit.reduce_at import positions, reduce_at
from jaxdev.ops.registry import aten, register_functional

# --- scatter_ (src, value, add, multiply), scatter_add, scatter_reduce -----------------------------


def _scatter_checks(self, d, index, src, name="scatter") -> None:
    """CPU's scatter_meta_impl: dtypes, then shapes (only for a non-empty index)."""
    index_dtype_check(name, index)
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
    if nonempty_dim(self) != nonempty_dim(index):
        raise RuntimeError("Index tensor must have the same number of dimensions as self tensor")
    dims = range(nonempty_dim(self))
    wrong = any(k != d and nonempty_size(index, k) > nonempty_size(self, k) for k in dims)
    if not wrong and src is not None:
        wrong = any(nonempty_size(index, k) > (src.shape[wrap_dim(k, src.dim())] if src.dim() else 1) for k in dims)
    if wrong:
        message = (
            f"Expected index {list(index.shape)} to be no larger than self {list(self.shape)} apart from dimension {d}"
        )
        raise RuntimeError(
            message + (f" and to be no larger size than src {list(src.shape)}" if src is not None else "")
        )
    if src is not None and nonempty_dim(src) != nonempty_dim(index):
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
    check_in_range(i, self.shape[d], bounds_error(i, self.shape[d], d))
    if reduce not in (None, "add", "sum", "multiply", "prod"):
        raise RuntimeError(f"reduce argument must be either add or multiply, got {reduce}")
    tensor_src = isinstance(src, torch.Tensor)
    if not tensor_src and type(src) is int and not -(2**63) <= src < 2**63:  # past a jit argument's int64
        src = jnp.asarray(src, x.dtype)
    return into(_scattered(d, reduce, tensor_src), x, i, J(src) if tensor_src else src)


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
        total = reduce in ("add", "sum")
        if acc != x.dtype:  # without a float32 copy of x where few values are written
            return reduce_at(x, tuple(grids), s, "sum" if total else "prod", acc=acc)
        return add_at(x.at[tuple(grids)], s) if total else multiply_at(x.at[tuple(grids)], s)

    return run


@register_functional(aten.scatter.src, aten.scatter.value, indexed=True)
def scatter(self, dim, index, src):
    return _scatter(self, dim, index, src)


@register_functional(aten.scatter.reduce, aten.scatter.value_reduce, indexed=True)
def scatter_reduce_legacy(self, dim, index, src, *, reduce):
    return _scatter(self, dim, index, src, reduce)


@register_functional(aten.scatter_add.default, indexed=True)
def scatter_add(self, dim, index, src):
    return _scatter(self, dim, index, src, "add")


@jitted
def _scatter_reduce(d, reduce, include_self, floor_mean, wide=False):
    """wide: half and bfloat16 sums and products accumulate in float32 and round once, as CPU's
    scatter_reduce does (its index_reduce accumulates in the dtype itself)."""

    def run(x, i, s):
        i = jnp.where(i < 0, i + x.shape[d], i)
        s = s[tuple(slice(0, n) for n in i.shape)].astype(x.dtype)
        acc = opmath(x.dtype) if wide else x.dtype
        return reduce_at(x, positions(i, d), s, reduce, include_self, floor_mean, acc)

    return run


@register_functional(aten.scatter_reduce.two, indexed=True)
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
    if (self.dtype.is_complex and reduce in ("amax", "amin")) or (self.dtype == torch.bool and reduce == "mean"):
        raise _not_on_cpu(self, f"scatter_gather_tensor_cpu_reduce_{reduce}")
    floor = not (self.dtype.is_floating_point or self.dtype.is_complex)
    s = J(src)
    program = _scatter_reduce(d if x.ndim > 1 else 0, reduce, bool(include_self), floor, True)
    if x.ndim == 0:  # 0-dim operands count as one dimension of size 1
        return program(x.reshape(-1), i.reshape(-1), s.reshape(-1)).reshape(())
    if x.ndim == 1:
        i, s = i.reshape(-1), s.reshape(-1)
    return into(program, x, i, s)


def _not_on_cpu(self, kernel: str) -> NotImplementedError:
    """The error of a CPU kernel (named `kernel`) that has no case for self's dtype."""
    return NotImplementedError(f"\"{kernel}\" not implemented for '{dtypes.scalar_name(self.dtype)}'")


@jitted
def _index_add(d, c):
    """x[..., i, ...] += alpha * s along d, computed in `c` (opmath) and rounded once; a 1-d x of a half
    dtype as CPU's loop for it: alpha * s rounded to x's dtype, then added one value at a time in index
    order, each sum rounded (XLA's scatter adds in x's dtype so)."""

    def run(x, i, s, alpha):
        i = jnp.where(i < 0, i + x.shape[d], i)
        if c != x.dtype and x.ndim == 1:
            s = (s.astype(c) * narrowed(jnp.asarray(alpha), x.dtype).astype(c)).astype(x.dtype)
            return add_at(x.at[i], s)
        s = (s.astype(c) * alpha).astype(c)
        if c == x.dtype:
            return add_at(x.at[(slice(None),) * d + (i,)], s)
        shape = [1] * s.ndim
        shape[d] = -1
        return reduce_at(x, positions(jnp.broadcast_to(i.reshape(shape), s.shape), d), s, "sum", acc=c)

    return run


@register_functional(aten.index_add.default, indexed=True)
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
    return into(_index_add(d, opmath(x.dtype)), x, i, s, alpha)


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


@register_functional(aten.masked_scatter.default, indexed=True)
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
    tracing.check_values(
        _mask_count(shape)(m) > s.size, lambda: RuntimeError("Number of elements of source < number of ones in mask")
    )
    if shape != x.shape:  # a broadcast self: a new array (and an in-place call refuses it after)
        return _masked_scatter(shape)(x, m, s)
    return into(_masked_scatter(shape), x, m, s)


@jitted
def _mask_count(shape):
    return lambda m: jnp.sum(jnp.broadcast_to(m, shape))


@jitted
def _masked_scatter(shape):
    """The i-th true position of the mask takes the source's i-th element."""

    def run(x, m, s):
        flat_m = jnp.broadcast_to(m, shape).reshape(-1)
        take = jnp.clip(jnp.cumsum(flat_m) - 1, 0, max(s.size - 1, 0))
        values = s.reshape(-1)[take] if s.size else jnp.zeros(flat_m.shape, x.dtype)
        return jnp.where(flat_m, values, jnp.broadcast_to(x, shape).reshape(-1)).reshape(shape)

    return run


# --- whole-slice writes along a dim: index_copy, index_fill, index_reduce; flat put ----------------


def _slice_positions(self, d, index, error_of=None):
    """`index` (a vector or a number) as non-negative positions along `d`, checked against its size."""
    i = any_device(index).reshape(-1)
    size = self.shape[d] if self.dim() else 1
    check_index_bounds(i, size, d, error_of)
    return jnp.where(i < 0, i + size, i)


@jitted
def _slice_set(d):
    """x's slices i along d set to v (a scalar, or slices shaped as x's at d)."""

    def run(x, i, v):
        if v.ndim:
            v = v.reshape(x.shape[:d] + i.shape + x.shape[d + 1 :])
        return x.at[(slice(None),) * d + (i,)].set(v.astype(x.dtype))

    return run


@register_functional(aten.index_copy.default, indexed=True)
def index_copy(self, dim, index, source):
    d = wrap_dim(dim, self.dim())
    _index_copy_check(self, d, index, source)
    i = _slice_positions(self, d, index, lambda message: IndexError("index_copy_(): " + message))
    x, s = J(self), J(source)
    if x.ndim == 0:
        return s.reshape(()) if i.size else x
    return into(_slice_set(d), x, i, s)


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


@register_functional(aten.index_fill.int_Scalar, aten.index_fill.int_Tensor, indexed=True)
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
    v = narrowed(jnp.asarray(value), x.dtype)  # a double to a half through float, as c10 converts
    if x.ndim == 0:
        return v if i.size else x
    return into(_slice_set(d), x, i, v)


@register_functional(aten.index_reduce.default, indexed=True)
def index_reduce(self, dim, index, source, reduce, *, include_self=True):
    if reduce not in ("prod", "mean", "amax", "amin"):
        raise RuntimeError(f"index_reduce(): Expected reduce to be one of prod, mean, amax or amin but got {reduce}.")
    d = wrap_dim(dim, self.dim())
    _index_func_check(self, d, index, source, "index_reduce")
    i = _slice_positions(self, d, index, lambda message: IndexError("index out of range in self"))
    if self.dtype.is_complex or self.dtype == torch.bool:
        raise _not_on_cpu(self, "index_func_" if include_self else "index_reduce_func_exclude_input_init")
    x, s = J(self), J(source)
    if x.ndim == 0:
        x, s = x[None], s.reshape(-1)
        d = 0
    shape = [1] * s.ndim
    shape[d] = -1
    full = jnp.broadcast_to(i.reshape(shape), s.shape)
    floor = not (self.dtype.is_floating_point or self.dtype.is_complex)
    if self.dim() == 0:
        return _scatter_reduce(d, reduce, bool(include_self), floor)(x, full, s).reshape(())
    return into(_scatter_reduce(d, reduce, bool(include_self), floor), x, full, s)
