"""Advanced indexing's indices as PyTorch reads them, which `x[idx]`, `x[idx] = v` (ops/advanced_indexing.py),
the masked and indexed reads of ops/indexing.py and the writes into expanded tensors (ops/expanded_put.py)
share: a list of None, masks and integer tensors as a jnp index (`index_tuple`, masks as positions,
bounds checked), taken apart into a program's key and its arrays (`split_index` / `joined_index`),
the positions of true values and the rows a mask selects, one program per shape (`true_positions`,
`masked_rows`), and index_put's checks and value in CPU's order (`put_index`, `fill_value`)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import torch

from jaxdev import dtypes, tensor, tracing
from jaxdev.ops.kit.arguments import J, any_device
from jaxdev.ops.kit.cpu_numerics import narrowed
from jaxdev.ops.kit.index_checks import check_index_bounds
from jaxdev.ops.kit.jit import jitted

# Positions of true values, one compile per shape.


@jitted
def _padded_positions():
    """argwhere(x != 0) padded to x.size rows, and the count of true values."""

    def run(x):
        m = x != 0
        return jnp.argwhere(m, size=m.size, fill_value=0), jnp.sum(m)

    return run


def true_positions(x) -> jax.Array:
    """jnp.argwhere(x != 0) (int64 rows), compiled once per shape: the count selects a prefix."""
    rows, count = _padded_positions()(x)
    return jax.lax.slice_in_dim(rows, 0, int(count))


@jitted
def _padded_rows(p):
    """x's entries where the mask m (over dims p .. p + m.ndim) is true, padded to m.size rows along
    dim p, and the count of true values."""

    def run(x, m):
        flat = x.reshape(x.shape[:p] + (-1,) + x.shape[p + m.ndim :])
        return jnp.take(flat, jnp.flatnonzero(m, size=m.size, fill_value=0), axis=p), jnp.sum(m)

    return run


def masked_rows(x, m, p):
    rows, count = _padded_rows(p)(x, m)
    return jax.lax.slice_in_dim(rows, 0, int(count), axis=p)


def single_mask(self, indices):
    """(p, mask) when `indices` is Nones and exactly one boolean mask, else None."""
    tensors = [(p, ix) for p, ix in enumerate(indices) if ix is not None]
    if len(tensors) != 1 or tensors[0][1].dtype not in (torch.bool, torch.uint8):
        return None
    p, mask = tensors[0]
    if any(mask.shape[k] != self.shape[p + k] if p + k < self.dim() else True for k in range(mask.dim())):
        return None  # the general path raises CPU's IndexError
    return p, any_device(mask).astype(bool)


def index_tuple(self, indices):
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


def split_index(index: tuple) -> tuple:
    """A jnp index of whole dims and index arrays as (structure, arrays): `structure` is True for each
    whole dim and keys the jitted program, the arrays are its arguments (eager jnp indexing spends
    ~100s of us in Python planning its gather or scatter)."""
    return tuple(isinstance(e, slice) for e in index), [e for e in index if not isinstance(e, slice)]


def joined_index(structure: tuple, arrays) -> tuple:
    """Traceable: the index `split_index` took apart."""
    it = iter(arrays)
    return tuple(slice(None) if whole else next(it) for whole in structure)


def fill_value(value: torch.Tensor, dtype: torch.dtype) -> jax.Array:
    """A 0-dim tensor value as masked_fill takes it (and index_put_ of one through a bool mask, which
    is masked_fill on CPU): CPU reads it (`value.item()`) and converts the scalar with c10's checked
    Scalar::to<T>, so 300.0 into int8 raises instead of wrapping or saturating. Inside a compiled
    program the value stays on the device and the overflow is a deferred check."""
    v = J(value)
    jdt = dtypes.to_jax_dtype(dtype)
    if not tracing.is_traced(v):
        scalar = value.item()
        dtypes.check_scalar(scalar, dtype)
        return narrowed(jnp.asarray(scalar), jdt)  # a double to a half through float, as c10 converts
    dtypes.check_array_fits(v, dtype)
    return dtypes.convert(v, jdt)


def put_value(self, values, mask, p):
    """values cast to self's dtype and broadcast to the indexing result [pre.., count or 1, rest..]."""
    if values.dim() == 0:
        v = fill_value(values, self.dtype) if values.device.type == "jax" or values.is_cpu else None
    else:
        v = narrowed(J(values), J(self).dtype) if values.device.type == "jax" else None
    v = narrowed(tensor.from_cpu(values), dtypes.to_jax_dtype(self.dtype)) if v is None else v
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


def check_put_dtypes(self, values, *, zero_dim_converts=False):
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


def put_index(self, indices, values) -> tuple:
    """index_put's checks in CPU's order (a size-0 indexed dim, the dtypes, the bounds, the value's
    shape) and (its jnp index, with masks as positions; the value as a jax array)."""
    single = single_mask(self, indices)
    if single is not None:
        check_put_dtypes(self, values, zero_dim_converts=True)
        p, mask = single
        return index_tuple(self, indices), put_value(self, values, mask, p)
    _check_empty_dims(self, indices)
    check_put_dtypes(self, values)
    index = index_tuple(self, indices)
    result = _indexing_result_shape(tuple(self.shape), index)
    have = tuple(values.shape)
    if len(have) > len(result) or any(h not in (1, w) for h, w in zip(have[::-1], result[::-1])):
        raise RuntimeError(
            f"shape mismatch: value tensor of shape {list(have)} cannot be broadcast to indexing result "
            f"of shape {list(result)}"
        )
    v = J(values) if values.device.type == "jax" or values.dim() == 0 else tensor.from_cpu(values)
    return index, v
