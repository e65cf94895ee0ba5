"""Where values fall: searchsorted, bucketize and isin. Ordering is PyTorch's (see kit.sort_key)."""

from __future__ import annotations

import jax.numpy as jnp
import torch

from jaxdev.ops.kit import J, jitted
from jaxdev.ops.registry import aten, register_functional


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
