"""unique: sorted, consecutive, along a dim. Its output shape depends on the values, so it is computed
eagerly (it cannot be part of a compiled program)."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from jaxdev import dtypes, tensor
from jaxdev.ops.kit import J, out_dtypes, sort_key, stable_sort, wrap_dim
from jaxdev.ops.registry import aten, register, register_functional, store_into


def _empty_index():
    return jnp.zeros((0,), jnp.int64)


def _unique_flat(x, return_inverse, return_counts):
    """Sorted unique values of a flat array; NaNs are all distinct, as on CPU."""
    n = x.shape[0]
    vals, idx = stable_sort(0, False)(x) if n else (x, jnp.zeros((0,), jnp.int64))
    new = np.ones(n, bool)
    if n:
        new[1:] = np.asarray(vals[1:] != vals[:-1])
    return _runs(vals, idx, new, n, return_inverse, return_counts)


def _runs(vals, order, new, n, return_inverse, return_counts):
    """Values at run starts; inverse maps each original position to its run; counts per run."""
    starts = np.flatnonzero(new)
    run_id = np.cumsum(new) - 1
    out = vals[jnp.asarray(starts)]
    inverse = counts = _empty_index()
    if return_inverse:
        inv = np.empty(n, np.int64)
        inv[np.asarray(order)] = run_id
        inverse = jnp.asarray(inv)
    if return_counts:
        counts = jnp.asarray(np.diff(np.append(starts, n)).astype(np.int64))
    return out, inverse, counts


@register_functional(aten._unique2.default)
def unique2(self, sorted=True, return_inverse=False, return_counts=False):
    x = J(self)
    out, inverse, counts = _unique_flat(x.reshape(-1), return_inverse, return_counts)
    if return_inverse:
        inverse = inverse.reshape(x.shape)
    return out, inverse, counts


@register_functional(aten._unique.default)
def unique(self, sorted=True, return_inverse=False):
    x = J(self)
    out, inverse, _ = _unique_flat(x.reshape(-1), return_inverse, False)
    return out, inverse.reshape(x.shape) if return_inverse else inverse


def _unique_consecutive(self, return_inverse=False, return_counts=False, dim=None):
    if dim is not None:
        return _unique_slices(self, dim, False, "unique_dim")
    x = J(self).reshape(-1)
    n = x.shape[0]
    new = np.ones(n, bool)
    if n:
        new[1:] = np.asarray(x[1:] != x[:-1])
    out, inverse, counts = _runs(x, np.arange(n), new, n, return_inverse, return_counts)
    if return_inverse:
        inverse = inverse.reshape(tuple(self.shape))
    return out, inverse, counts


def _slices_differ(x):
    """x: (n, m) slices along the unique dim, flattened -> bool (n,), True where a run starts."""
    n = x.shape[0]
    new = np.ones(n, bool)
    if n:
        new[1:] = np.asarray(jnp.any(x[1:] != x[:-1], axis=1))
    return new


def _unique_slices(self, dim, sorted_, name):
    """CPU's _unique_dim_cpu_template: sorted (or consecutive) unique slices along `dim`, and always
    the inverse and the counts (CPU computes both whatever return_inverse/return_counts say)."""
    if self.dim() == 0:
        raise IndexError(f"Dimension specified as {dim} but tensor has no dimensions")
    if self.dtype.is_complex:
        raise NotImplementedError(f"\"{name}\" not implemented for '{dtypes.scalar_name(self.dtype)}'")
    a = wrap_dim(dim, self.dim())
    zero_dims = list(self.shape).count(0)
    if self.shape[a] == 0:
        if zero_dims != 1:
            raise RuntimeError("Number of zero sized dimensions is more than one, so unique cannot be applied ")
        return J(self), _empty_index(), _empty_index()
    if zero_dims:
        raise RuntimeError("There are 0 sized dimensions, and they aren't selected, so unique cannot be applied")
    x = jnp.moveaxis(J(self), a, 0)
    rest = x.shape[1:]
    flat = x.reshape((x.shape[0], -1))
    n = flat.shape[0]
    if sorted_:
        keys = [sort_key(flat[:, j]) for j in range(flat.shape[1] - 1, -1, -1)]
        order = jnp.lexsort(keys)
    else:
        order = jnp.arange(n)
    ordered = flat[order]
    new = _slices_differ(ordered)
    out, inverse, counts = _runs(ordered, np.asarray(order), new, n, True, True)
    return jnp.moveaxis(out.reshape((-1,) + rest), 0, a), inverse, counts


def _unique_dim_layout(out, dim):
    """CPU's result is the unique slices stacked contiguously along dim 0, then moved to `dim`."""
    a = wrap_dim(dim, out.ndim)
    order = [a] + [d for d in range(out.ndim) if d != a]  # the stored dims, outermost first
    stored = tensor.contiguous_strides([out.shape[d] for d in order])
    strides = [0] * out.ndim
    for d, st in zip(order, stored):
        strides[d] = st
    return tensor.wrap_strided(out, strides)


def _unique_dim_kernel(fn, op):
    names = [a.name for a in op._schema.arguments]

    def kernel(self, *args, **kwargs):
        out, inverse, counts = fn(self, *args, **kwargs)
        dim = {**dict(zip(names[1:], args)), **kwargs}.get("dim")
        if dim is not None and self.shape[wrap_dim(dim, self.dim())] != 0:
            out = _unique_dim_layout(out, dim)
        else:
            out = tensor.wrap(out)
        return out, tensor.wrap(inverse), tensor.wrap(counts)

    return kernel


def _unique_dim_out_kernel(fn):
    def kernel(self, *args, out0, out1, out2, **kwargs):
        results = fn(self, *args, **kwargs)
        for o in (out0, out1, out2):
            tensor.check_no_partial_overlap(o, [self])
        # The generated out= wrapper of CPU: per result, resize_output, then a copy that wants the same dtype.
        for o, v in zip((out0, out1, out2), results):
            if o.dtype != dtypes.to_torch_dtype(v.dtype):
                if tuple(o.shape) != tuple(v.shape):
                    o.resize_(v.shape)
                out_dtypes.check_exact(dtypes.to_torch_dtype(v.dtype), o)
            store_into(o, v, resize=True)
        return out0, out1, out2

    return kernel


def _unique_dim(self, dim, sorted=True, return_inverse=False, return_counts=False):
    return _unique_slices(self, dim, True, "unique_dim")


def _unique_dim_consecutive(self, dim, return_inverse=False, return_counts=False):
    return _unique_slices(self, dim, False, "unique_dim")


# These lay out their first result as CPU does (transposed when dim != 0), so they are `register`ed
# with their out= overloads rather than derived. CPU's kernels all report themselves as "unique_dim".
for _fn, _ops in (
    (_unique_dim, aten.unique_dim),
    (_unique_dim_consecutive, aten.unique_dim_consecutive),
    (_unique_consecutive, aten.unique_consecutive),
):
    register(_ops.default)(_unique_dim_kernel(_fn, _ops.default))
    register(_ops.out)(_unique_dim_out_kernel(_fn))
