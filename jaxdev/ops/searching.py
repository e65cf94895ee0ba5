"""Searching and binning: searchsorted, bucketize, unique (sorted, consecutive, along a dim), isin,
histc.

Ordering is PyTorch's (see toolkit.sort_key). unique's output shape depends on the values, so it is
computed eagerly (it cannot be part of a compiled program).
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import torch

from jaxdev import dtypes, tensor, tracing
from jaxdev.ops import out_dtypes
from jaxdev.ops.registry import aten, register, register_functional, store_into
from jaxdev.ops.toolkit import J, jitted, sort_key, stable_sort, wrap_dim

# --- searching -----------------------------------------------------------------------------------


def _bisect(seq, v, right):
    """CPU's cus_lower_bound / cus_upper_bound for every value at once: the same bisection with the
    same comparisons, so NaN among the boundaries or the values lands where CPU puts it (a NaN value
    after every boundary, as `!(mid >= NaN)` always moves right). `seq` is 1-dim, or batched like `v`."""
    n = seq.shape[-1]
    start = jnp.zeros(v.shape, jnp.int64)
    end = jnp.full(v.shape, n, jnp.int64)
    for _ in range(n.bit_length()):  # each step halves every [start, end) still open
        open_ = start < end
        mid = start + ((end - start) >> 1)
        at = jnp.clip(mid, 0, max(n - 1, 0))
        mid_val = seq[at] if seq.ndim == 1 else jnp.take_along_axis(seq, at, axis=-1)
        go_right = ~(mid_val > v) if right else ~(mid_val >= v)
        start = jnp.where(open_ & go_right, mid + 1, start)
        end = jnp.where(open_ & ~go_right, mid, end)
    return start


@jitted
def _search(side, batched, result):
    def run(seq, v):
        return _bisect(seq, v, side == "right").astype(result)

    return run


def _side(right, side):
    if side is not None:
        if side not in ("left", "right"):
            raise RuntimeError(f"torch.searchsorted(): side can only be 'left' or 'right' but got {side}")
        if right and side == "left":
            raise RuntimeError(
                "torch.searchsorted(): side and right can't be set to opposites, got side of left while right was True"
            )
        return side
    return "right" if right else "left"


def _searchsorted(seq: torch.Tensor, values, out_int32, side, sorter):
    s = J(seq)
    if sorter is not None:
        s = jnp.take_along_axis(s, J(sorter), axis=-1)
    v = J(values) if isinstance(values, torch.Tensor) else jnp.asarray(values, s.dtype)
    if seq.dim() > 1 and tuple(seq.shape[:-1]) != tuple(v.shape[:-1]):
        raise RuntimeError(
            "torch.searchsorted(): boundaries tensor should be 1 dimension or the first N-1 "
            "dimensions of boundaries tensor and input value tensor must match, but we got "
            f"boundaries tensor {list(seq.shape)} and input value tensor {list(v.shape)}"
        )
    common = jnp.promote_types(s.dtype, v.dtype)
    if common == jnp.bool_:
        raise NotImplementedError("\"searchsorted_out_cpu\" not implemented for 'Bool'")
    result = jnp.int32 if out_int32 else jnp.int64
    return _search(side, seq.dim() > 1, result)(s.astype(common), v.astype(common))


@register_functional(aten.searchsorted.Tensor)
def searchsorted(sorted_sequence, self, *, out_int32=False, right=False, side=None, sorter=None):
    return _searchsorted(sorted_sequence, self, out_int32, _side(right, side), sorter)


@register_functional(aten.searchsorted.Scalar)
def searchsorted_scalar(sorted_sequence, self, *, out_int32=False, right=False, side=None, sorter=None):
    if sorted_sequence.dim() != 1:
        raise RuntimeError(
            "torch.searchsorted(): input value can be a scalar only when boundaries tensor dimension "
            f"is 1, but we got boundaries tensor dim({sorted_sequence.dim()}) and input value's "
            "dim(0) numel(1)"
        )
    return _searchsorted(sorted_sequence, self, out_int32, _side(right, side), sorter)


def _check_boundaries(boundaries):
    if boundaries.dim() != 1:
        raise RuntimeError(f"boundaries tensor must be 1 dimension, but got dim({boundaries.dim()})")


@register_functional(aten.bucketize.Tensor)
def bucketize(self, boundaries, *, out_int32=False, right=False):
    _check_boundaries(boundaries)
    return _searchsorted(boundaries, self, out_int32, "right" if right else "left", None)


@register_functional(aten.bucketize.Scalar, out=False)
def bucketize_scalar(self, boundaries, *, out_int32=False, right=False):
    _check_boundaries(boundaries)
    return _searchsorted(boundaries, self, out_int32, "right" if right else "left", None)


# --- unique (data-dependent output shapes: computed eagerly) ------------------------------------


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


# --- membership and histograms -------------------------------------------------------------------


def _isin(elements, test, invert):
    common = jnp.promote_types(elements.dtype, test.dtype)
    return jnp.isin(elements.astype(common), test.astype(common).reshape(-1), invert=invert)


@register_functional(aten.isin.Tensor_Tensor)
def isin(elements, test_elements, *, assume_unique=False, invert=False):
    return _isin(J(elements), J(test_elements), bool(invert))


@register_functional(aten.isin.Tensor_Scalar)
def isin_scalar(elements, test_element, *, assume_unique=False, invert=False):
    return _isin(J(elements), jnp.asarray(test_element), bool(invert))


@register_functional(aten.isin.Scalar_Tensor)
def isin_scalar_tensor(element, test_elements, *, assume_unique=False, invert=False):
    return _isin(jnp.asarray(element), J(test_elements), bool(invert))


@register_functional(aten.histc.default)
def histc(self, bins=100, min=0, max=0):
    if not self.dtype.is_floating_point:
        raise NotImplementedError(f"\"histogram_cpu\" not implemented for '{dtypes.scalar_name(self.dtype)}'")
    if bins <= 0:
        raise RuntimeError("torch.histc(): bins must be > 0, but got " + str(bins) + " for dimension 0")
    x = J(self).reshape(-1)
    lo, hi = float(min), float(max)
    if lo == hi and x.size:
        lo, hi = float(jnp.min(x)), float(jnp.max(x))
    if lo == hi:
        lo, hi = lo - 1, hi + 1
    if lo > hi:
        raise RuntimeError(f"torch.histc(): max must be larger than min, but got min {lo} max {hi}")
    # CPU's bin edges are linspace in the input dtype; an element's bin is the last edge <= it.
    edges = jnp.asarray(torch.linspace(lo, hi, bins + 1, dtype=torch.float64).to(self.dtype).double().numpy(), x.dtype)
    pos = jnp.clip(jnp.searchsorted(edges, x, side="right") - 1, 0, bins - 1)
    keep = (x >= edges[0]) & (x <= edges[-1])
    return jnp.zeros((bins,), x.dtype).at[pos].add(keep.astype(x.dtype))


@register_functional(aten.bincount.default)
def bincount(self, weights=None, minlength=0):
    """CPU's checks in CPU's order; the length is max(input) + 1, read from the device (so a compiled
    graph with bincount runs op by op). Weights count in float32 when they are float32, else double."""
    if self.dtype.is_floating_point or self.dtype.is_complex or self.dtype == torch.bool:
        raise NotImplementedError(f"\"bincount_cpu\" not implemented for '{dtypes.scalar_name(self.dtype)}'")
    if minlength < 0:
        raise RuntimeError("minlength should be >= 0")
    if self.dim() == 1 and self.numel() == 0:
        return jnp.zeros((minlength,), jnp.int64)
    x = J(self)
    if self.dim() != 1 or int(jnp.min(x)) < 0:
        raise RuntimeError("bincount only supports 1-d non-negative integral inputs.")
    if weights is not None and (weights.dim() != 1 or weights.shape[0] != self.shape[0]):
        raise RuntimeError("weights should be 1-d and have the same length as input")
    length = max(int(jnp.max(x)) + 1, minlength)
    if weights is None:
        return jnp.zeros((length,), jnp.int64).at[x].add(1)
    acc = jnp.float32 if weights.dtype == torch.float32 else jnp.float64
    w = J(weights)
    w = (jnp.real(w) if jnp.iscomplexobj(w) else w).astype(acc)
    return jnp.zeros((length,), acc).at[x].add(w)


# --- histogram / histogramdd (CPU: HistogramKernel.cpp, Histogram.cpp) ---------------------------------


def _fmt(v) -> str:
    """A double as C++'s ostream prints it (%g)."""
    return f"{float(v):g}"


def _histogram_dtype(self) -> None:
    if self.dtype not in (torch.float32, torch.float64):
        raise NotImplementedError(f"\"histogramdd\" not implemented for '{dtypes.scalar_name(self.dtype)}'")


def _check_weight(dtype, shape, weight, weight_shape) -> None:
    """CPU's weight checks, on the shapes it checks (histogram: both flattened; histogramdd: as given)."""
    if weight is None:
        return
    if weight.dtype != dtype:
        raise RuntimeError(
            "torch.histogramdd: if weight tensor is provided, it should have the same dtype as the input tensor, "
            f"but got weight with dtype {dtypes.name(weight.dtype)} and input with dtype {dtypes.name(dtype)}"
        )
    if tuple(weight_shape) != tuple(shape[:-1]):
        raise RuntimeError(
            "torch.histogramdd: if weight tensor is provided it should have the same shape as the input tensor "
            f"excluding its innermost dimension, but got input with shape {list(shape)} and weight with "
            f"shape {list(weight_shape)}"
        )


def _check_dd_input(self) -> int:
    if self.dim() < 2:
        raise RuntimeError("torch.histogramdd: input tensor should have at least 2 dimensions")
    return self.shape[-1]


def _check_bin_cts(bins, n: int, range_) -> None:
    if len(bins) != n:
        raise RuntimeError(
            f"torch.histogramdd: expected {n} sequences of bin edges for each of the {n} dimensions of the input, "
            f"but got {len(bins)}"
        )
    for d, b in enumerate(bins):
        if b <= 0:
            raise RuntimeError(f"torch.histogram(): bins must be > 0, but got {b} for dimension {d}")
    if range_ is not None and len(range_) != 2 * n:
        raise RuntimeError(
            f"torch.histogramdd: for a {n}-dimensional histogram range should have {2 * n} elements, but got "
            f"{len(range_)}"
        )


def _check_bin_tensors(self, bins, n: int) -> None:
    if len(bins) != n:
        raise RuntimeError(
            f"torch.histogramdd: expected {n} sequences of bin edges for each of the {n} dimensions of the input, "
            f"but got {len(bins)}"
        )
    for d, b in enumerate(bins):
        if b.dtype != self.dtype:
            raise RuntimeError(
                "torch.histogramdd: input tensor and bins tensors should have the same dtype, but got input with "
                f"dtype {dtypes.name(self.dtype)} and bins for dimension {d} with dtype {dtypes.name(b.dtype)}"
            )
        if b.dim() != 1:
            raise RuntimeError(
                f"torch.histogramdd: bins tensor should have one dimension, but got {b.dim()} dimensions in the "
                f"bins tensor for dimension {d}"
            )
        if b.numel() == 0:
            raise RuntimeError(
                "torch.histogramdd: bins tensor should have at least 1 element, but got 0 elements in the bins "
                f"tensor for dimension {d}"
            )


@jitted
def _uniform_edges(bins: tuple, range_, jdt):
    """CPU's bin edges: per dimension [lo, hi] from `range` or the data's min and max (in double), a
    degenerate range widened by 0.5 each side, then linspace in the input dtype (PyTorch's scalar
    formula: the first half from lo, the second from hi)."""
    f64 = jnp.float64

    def body(x):
        if range_ is not None:
            lo = jnp.asarray(range_[0::2], f64)
            hi = jnp.asarray(range_[1::2], f64)
        elif x.shape[0] > 0:
            lo, hi = jnp.min(x, axis=0).astype(f64), jnp.max(x, axis=0).astype(f64)
        else:
            lo, hi = jnp.zeros(len(bins), f64), jnp.ones(len(bins), f64)
        same = lo == hi
        lo, hi = jnp.where(same, lo - 0.5, lo), jnp.where(same, hi + 0.5, hi)
        edges = []
        for d, b in enumerate(bins):
            a, z = lo[d].astype(jdt), hi[d].astype(jdt)
            steps = b + 1
            i = jnp.arange(steps)
            step = (z - a) / jnp.asarray(steps - 1, jdt) if steps > 1 else jnp.zeros((), jdt)
            e = jnp.where(i < steps // 2, a + step * i.astype(jdt), z - step * (steps - 1 - i).astype(jdt))
            edges.append(e if steps > 1 else jnp.full((1,), a, jdt))
        return lo, hi, tuple(edges)

    return body


def _edges_of(x2, bins, range_):
    """Bin edges for bin counts, with CPU's checks on the range (finite, min <= max)."""
    lo, hi, edges = _uniform_edges(tuple(bins), None if range_ is None else tuple(map(float, range_)), x2.dtype)(x2)
    for d in range(len(bins)):
        tracing.check_values(
            ~(jnp.isfinite(lo[d]) & jnp.isfinite(hi[d])),
            lambda d=d: RuntimeError(
                f"torch.histogramdd: dimension {d}'s range [{_fmt(lo[d])}, {_fmt(hi[d])}] is not finite"
            ),
        )
        if range_ is not None and range_[2 * d] > range_[2 * d + 1]:
            raise RuntimeError(
                f"torch.histogramdd: min should not exceed max, but got min {_fmt(range_[2 * d])} max "
                f"{_fmt(range_[2 * d + 1])} for dimension {d}"
            )
    return list(edges)


@jitted
def _histogram_body(density: bool, weighted: bool):
    """Counts (or weights) per cell: an element's bin in each dimension is the last edge <= it
    (upper_bound - 1), the rightmost bin includes its right edge, and elements outside
    [first edge, last edge] (or NaN) are dropped; density divides by the total and the bin widths."""

    def body(x, w, *edges):
        n = x.shape[0]
        keep = jnp.ones((n,), bool)
        flat = jnp.zeros((n,), jnp.int64)
        sizes = [e.shape[0] - 1 for e in edges]
        for d, e in enumerate(edges):
            v = x[:, d]
            keep = keep & (v >= e[0]) & (v <= e[-1])
            pos = jnp.searchsorted(e, v, side="right", method="compare_all") - 1
            pos = jnp.where(pos == e.shape[0] - 1, pos - 1, pos)
            flat = flat * max(sizes[d], 1) + jnp.clip(pos, 0, max(sizes[d] - 1, 0))
        total = 1
        for s in sizes:
            total *= s
        add = (w if weighted else jnp.ones((n,), x.dtype)) * keep
        hist = jnp.zeros((total,), x.dtype).at[jnp.where(keep, flat, total)].add(add, mode="drop")
        hist = hist.reshape(sizes)
        if density:
            hist = hist / jnp.sum(hist)
            for d, e in enumerate(edges):
                shape = [1] * len(edges)
                shape[d] = sizes[d]
                hist = hist / jnp.diff(e).reshape(shape)
        return hist

    return body


def _histogram(x2, w, edges, density):
    return _histogram_body(bool(density), w is not None)(x2, w, *edges)


@register_functional(aten.histogram.bin_ct)
def histogram_bin_ct(self, bins=100, *, range=None, weight=None, density=False):
    _histogram_dtype(self)
    x2 = J(self).reshape(-1, 1)
    w = None if weight is None else J(weight).reshape(-1)
    _check_weight(self.dtype, x2.shape, weight, None if w is None else w.shape)
    _check_bin_cts([bins], 1, range)
    edges = _edges_of(x2, [bins], range)
    return _histogram(x2, w, edges, density), edges[0]


@register_functional(aten.histogram.bins_tensor)
def histogram_bins_tensor(self, bins, *, weight=None, density=False):
    _histogram_dtype(self)
    x2 = J(self).reshape(-1, 1)
    w = None if weight is None else J(weight).reshape(-1)
    _check_bin_tensors(self, [bins], 1)
    _check_weight(self.dtype, x2.shape, weight, None if w is None else w.shape)
    e = J(bins)
    return _histogram(x2, w, [e], density), e + jnp.zeros((), e.dtype)


def _dd_input(self, weight):
    n = _check_dd_input(self)
    _histogram_dtype(self)
    _check_weight(self.dtype, self.shape, weight, None if weight is None else weight.shape)
    x2 = J(self).reshape(-1, n)
    return n, x2, None if weight is None else J(weight).reshape(-1)


@register(aten._histogramdd_bin_edges.default)
def histogramdd_bin_edges(self, bins, *, range=None, weight=None, density=False):
    n, x2, _ = _dd_input(self, weight)
    if len(bins) != n:
        _check_bin_cts(bins, n, range)
    if range is not None:
        _check_bin_cts([1] * n, n, range)
    return [tensor.wrap(e) for e in _edges_of(x2, bins, range)]


@register_functional(aten._histogramdd_from_bin_cts.default)
def histogramdd_from_bin_cts(self, bins, *, range=None, weight=None, density=False):
    n, x2, w = _dd_input(self, weight)
    _check_bin_cts(bins, n, range)
    return _histogram(x2, w, _edges_of(x2, bins, range), density)


@register_functional(aten._histogramdd_from_bin_tensors.default)
def histogramdd_from_bin_tensors(self, bins, *, weight=None, density=False):
    n, x2, w = _dd_input(self, weight)
    _check_bin_tensors(self, bins, n)
    return _histogram(x2, w, [J(b) for b in bins], density)
