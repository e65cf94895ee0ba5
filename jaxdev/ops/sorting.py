"""Sorting: sort, topk, kthvalue, median/nanmedian, mode.

Ordering is PyTorch's: NaN compares greater than every number (last ascending, first descending),
-0.0 equals 0.0, and ties keep their original order (a stable sort underlies every op here but mode;
CPU's topk/kthvalue pick among tied indices by quickselect, so tied *indices* may differ, never
values). mode returns CPU's very index: that of libstdc++'s std::sort order (introsort.py).
Sorts run along the last axis of a moved view; indices are int64.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import torch

from jaxdev import dtypes
from jaxdev.ops.kit import J, jitted, stable_sort, wrap_dim
from jaxdev.ops.kit.introsort import std_sort
from jaxdev.ops.registry import aten, register_functional


def _no_case(kernel: str, dtype: torch.dtype) -> None:
    """CPU's median and kthvalue kernels have no Bool or complex case (jnp sorted them)."""
    if dtype == torch.bool or dtype.is_complex:
        raise NotImplementedError(f"\"{kernel}\" not implemented for '{dtypes.scalar_name(dtype)}'")


def _check_sortable(self):
    if self.dtype.is_complex:
        raise RuntimeError(" Sort does not support complex dtypes on CPU")


@register_functional(aten.sort.stable)
def sort_stable(self, *, stable=None, dim=-1, descending=False):
    _check_sortable(self)
    a = wrap_dim(dim, self.dim())
    x = J(self)
    if x.ndim == 0:
        return x, jnp.zeros((), jnp.int64)
    return stable_sort(a, bool(descending))(x)


@register_functional(aten.sort.default)
def sort(self, dim=-1, descending=False):
    return sort_stable(self, stable=False, dim=dim, descending=descending)


@jitted
def _select(axis, start, stop, descending, keepdim):
    """Elements [start:stop) of the sorted order along `axis` (a slice of a stable sort)."""

    def run(x):
        vals, idx = stable_sort(axis, descending)(x)
        vals = jax.lax.slice_in_dim(vals, start, stop, axis=axis)
        idx = jax.lax.slice_in_dim(idx, start, stop, axis=axis)
        if not keepdim:
            vals, idx = jnp.squeeze(vals, axis), jnp.squeeze(idx, axis)
        return vals, idx

    return run


@register_functional(aten.topk.default)
def topk(self, k, dim=-1, largest=True, sorted=True):
    a = wrap_dim(dim, self.dim())
    if self.dtype == torch.bool or self.dtype.is_complex:
        raise RuntimeError(f"topk does not support {'bool' if self.dtype == torch.bool else 'complex'} dtypes on CPU")
    n = self.shape[a] if self.dim() else 1
    if not 0 <= k <= n:
        raise RuntimeError("selected index k out of range")
    x = J(self)
    if x.ndim == 0:
        return x, jnp.zeros((), jnp.int64)
    return _select(a, 0, k, bool(largest), True)(x)


@register_functional(aten.kthvalue.default)
def kthvalue(self, k, dim=-1, keepdim=False):
    a = wrap_dim(dim, self.dim())
    n = self.shape[a] if self.dim() else 1
    if n == 0:
        raise IndexError(f"kthvalue(): Expected reduction dim {a} to have non-zero size.")
    if not 1 <= k <= n:
        raise RuntimeError(f"kthvalue(): selected number k out of range for dimension {a}")
    x = J(self)
    if x.ndim == 0:  # CPU copies a 0-dim input without its kernel, whatever the dtype
        return x, jnp.zeros((), jnp.int64)
    _no_case("kthvalue_cpu", self.dtype)
    return _select(a, k - 1, k, False, bool(keepdim))(x)


@jitted
def _median(axis, keepdim, ignore_nan):
    """Lower median along `axis`. With NaNs: median picks the first NaN, nanmedian skips them."""

    def run(x):
        vals, idx = stable_sort(axis, False)(x)
        n = x.shape[axis]
        nans = (
            jnp.sum(jnp.isnan(x), axis=axis, keepdims=True)
            if jnp.issubdtype(x.dtype, jnp.floating)
            else jnp.zeros((1,) * x.ndim, jnp.int32)
        )
        if ignore_nan:
            pos = jnp.maximum(n - nans - 1, 0) // 2
        else:
            pos = jnp.where(nans > 0, n - nans, (n - 1) // 2)
        v = jnp.take_along_axis(vals, pos, axis=axis)
        i = jnp.take_along_axis(idx, pos, axis=axis)
        if not keepdim:
            v, i = jnp.squeeze(v, axis), jnp.squeeze(i, axis)
        return v, i

    return run


def _median_dim(self, dim, keepdim, ignore_nan, name):
    a = wrap_dim(dim, self.dim())
    x = J(self)
    if x.ndim == 0:
        _no_case("median_out", self.dtype)
        return x, jnp.zeros((), jnp.int64)
    if x.shape[a] == 0:
        raise IndexError(f"{name}(): Expected reduction dim {a} to have non-zero size.")
    _no_case("median_out", self.dtype)
    return _median(a, bool(keepdim), ignore_nan)(x)


def _median_all(self, ignore_nan, name):
    if self.numel() != 0:
        _no_case("median_cpu", self.dtype)
    if self.numel() == 0:  # CPU's NaN, converted to the dtype as c10 converts it (int64: INT64_MIN)
        return dtypes.convert(jnp.full((), jnp.nan, jnp.float32), dtypes.to_jax_dtype(self.dtype))
    return _median(0, False, ignore_nan)(J(self).reshape(-1))[0]


@register_functional(aten.median.dim)
def median_dim(self, dim, keepdim=False):
    return _median_dim(self, dim, keepdim, False, "median")


@register_functional(aten.nanmedian.dim)
def nanmedian_dim(self, dim, keepdim=False):
    return _median_dim(self, dim, keepdim, True, "nanmedian")


@register_functional(aten.median.default)
def median(self):
    return _median_all(self, False, "median")


@register_functional(aten.nanmedian.default)
def nanmedian(self):
    return _median_all(self, True, "nanmedian")


@jitted
def _mode(axis, keepdim):
    """Most frequent value (the smallest among equally frequent ones) and the index CPU gives: the last
    of the value's run in std::sort's order (introsort.py), as mode_kernel_impl reads it."""

    def run(x):
        moved = jnp.moveaxis(x, axis, -1)
        rows = moved.reshape(-1, moved.shape[-1])
        idx = jnp.broadcast_to(jnp.arange(rows.shape[-1], dtype=jnp.int64), rows.shape)
        key = rows.astype(jnp.uint8) if rows.dtype == jnp.bool_ else rows
        key, (idx,) = std_sort(key, [idx])
        vals = jnp.take_along_axis(rows, idx, axis=-1)  # -0.0 and 0.0 as they come
        n = key.shape[-1]
        pos = jnp.arange(n)
        new_run = jnp.concatenate([jnp.ones(key.shape[:-1] + (1,), bool), key[..., 1:] != key[..., :-1]], axis=-1)
        start = jax.lax.cummax(jnp.where(new_run, pos, 0), axis=1)
        # the run ending at `end` that is longest, the first (smallest value) among equally long ones
        run_end = jnp.concatenate([new_run[..., 1:], jnp.ones(key.shape[:-1] + (1,), bool)], axis=-1)
        end = jnp.argmax(jnp.where(run_end, pos - start + 1, 0), axis=-1, keepdims=True)
        v, i = jnp.take_along_axis(vals, end, axis=-1), jnp.take_along_axis(idx, end, axis=-1)
        shape = moved.shape[:-1] + (1,)
        v, i = jnp.moveaxis(v.reshape(shape), -1, axis), jnp.moveaxis(i.reshape(shape), -1, axis)
        if not keepdim:
            v, i = jnp.squeeze(v, axis), jnp.squeeze(i, axis)
        return v, i

    return run


@register_functional(aten.mode.default)
def mode(self, dim=-1, keepdim=False):
    a = wrap_dim(dim, self.dim())
    x = J(self)
    if x.ndim == 0:
        return x, jnp.zeros((), jnp.int64)
    if x.shape[a] == 0:
        raise IndexError(f"mode(): Expected reduction dim {a} to have non-zero size.")
    return _mode(a, bool(keepdim))(x)
