"""Counting into bins: histc, bincount, histogram and histogramdd (CPU: HistogramKernel.cpp,
Histogram.cpp)."""

from __future__ import annotations

import jax.numpy as jnp
import torch

from jaxdev import dtypes, tensor, tracing
from jaxdev.ops.kit import J, jitted
from jaxdev.ops.registry import aten, register, register_functional


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
