"""EmbeddingBag: `_embedding_bag` / `_embedding_bag_forward_only` (sum, mean, max over bags given by
offsets; per_sample_weights; padding_idx) and the dense backward kernels autograd calls.

Besides the output the forward returns what its own backward reads: offset2bag (the bag of each
index), bag_size (non-padding indices per bag) and max_indices (the weight row that won each max,
-1 in an empty bag). Reductions are segment sums over bags, accumulated in float32 for half.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from jaxdev.ops.registry import aten, register_functional
from jaxdev.ops.toolkit import J, any_device, opmath

SUM, MEAN, MAX = 0, 1, 2


def _bags(indices, offsets, include_last_offset):
    idx = any_device(indices).reshape(-1)
    off = any_device(offsets).reshape(-1)
    n_bags = off.shape[0] - 1 if include_last_offset else off.shape[0]
    bag_of = jnp.searchsorted(off[:n_bags], jnp.arange(idx.shape[0]), side="right") - 1
    return idx, jnp.maximum(bag_of, 0).astype(jnp.int64), n_bags


def _forward(
    weight,
    indices,
    offsets,
    scale_grad_by_freq=False,
    mode=0,
    sparse=False,
    per_sample_weights=None,
    include_last_offset=False,
    padding_idx=-1,
):
    if per_sample_weights is not None and mode != SUM:
        raise NotImplementedError(
            "embedding_bag: per_sample_weights was not None. per_sample_weights is only supported "
            f"for mode='sum' (got mode='{['sum', 'mean', 'max'][mode]}'). Please open a feature request on GitHub."
        )
    idx, bag_of, n_bags = _bags(indices, offsets, include_last_offset)
    w = J(weight)
    c = opmath(w.dtype)
    keep = idx != padding_idx if padding_idx >= 0 else jnp.ones(idx.shape, bool)
    rows = w[idx].astype(c)
    counts = jax.ops.segment_sum(keep.astype(jnp.int64), bag_of, n_bags)
    if mode == MAX:
        lowest = jnp.asarray(-jnp.inf, c)
        masked = jnp.where(keep[:, None], rows, lowest)
        out = jax.ops.segment_max(masked, bag_of, n_bags)
        won = (masked == out[bag_of]) & keep[:, None]
        # the first index (in bag order) holding the maximum, per bag and column
        pos = jnp.where(won, jnp.arange(idx.shape[0])[:, None], idx.shape[0])
        first = jax.ops.segment_min(pos, bag_of, n_bags)
        empty = counts == 0
        max_indices = jnp.where(empty[:, None], -1, idx[jnp.minimum(first, idx.shape[0] - 1)]).astype(jnp.int64)
        out = jnp.where(empty[:, None], jnp.zeros((), c), out)
    else:
        if per_sample_weights is not None:
            rows = rows * J(per_sample_weights).astype(c)[:, None]
        rows = jnp.where(keep[:, None], rows, jnp.zeros((), c))
        out = jax.ops.segment_sum(rows, bag_of, n_bags)
        if mode == MEAN:
            out = out / jnp.maximum(counts, 1).astype(c)[:, None]
        max_indices = counts
    return out.astype(w.dtype), bag_of, counts, max_indices


register_functional(aten._embedding_bag.default, aten._embedding_bag_forward_only.default)(_forward)


@register_functional(aten._embedding_bag_dense_backward.default)
def embedding_bag_dense_backward(
    grad,
    indices,
    offset2bag,
    bag_size,
    maximum_indices,
    num_weights,
    scale_grad_by_freq,
    mode,
    per_sample_weights,
    padding_idx=-1,
):
    g = J(grad)
    c = opmath(g.dtype)
    g = g.astype(c)
    idx = any_device(indices).reshape(-1)
    out = jnp.zeros((num_weights, g.shape[-1]), c)
    if mode == MAX:
        mi = J(maximum_indices)
        cols = jnp.broadcast_to(jnp.arange(g.shape[-1]), mi.shape)
        valid = mi >= 0
        out = out.at[jnp.where(valid, mi, 0), cols].add(jnp.where(valid, g, 0))
        return out.astype(J(grad).dtype)
    bag = offset2bag if isinstance(offset2bag, jax.Array) else J(offset2bag)
    rows = g[bag]
    if mode == MEAN:
        rows = rows / jnp.maximum(J(bag_size)[bag], 1).astype(c)[:, None]
    if per_sample_weights is not None:
        rows = rows * J(per_sample_weights).astype(c)[:, None]
    if padding_idx >= 0:
        rows = jnp.where((idx == padding_idx)[:, None], jnp.zeros((), c), rows)
    if scale_grad_by_freq:
        freq = jnp.zeros((num_weights,), c).at[idx].add(1)
        rows = rows / freq[idx][:, None]
    return out.at[idx].add(rows).astype(J(grad).dtype)


def _offset2bag(indices, offsets, offset2bag):
    """The forward's offset2bag, or, where it is empty (CPU's sum-mode fast path returns none), the
    bags made from the offsets as CPU's backward makes them (make_offset2bag)."""
    if indices.numel() != 0 and offset2bag.numel() == 0:
        return _bags(indices, offsets, False)[1]
    return J(offset2bag)


@register_functional(aten._embedding_bag_backward.default)
def embedding_bag_backward(
    grad,
    indices,
    offsets,
    offset2bag,
    bag_size,
    maximum_indices,
    num_weights,
    scale_grad_by_freq,
    mode,
    sparse,
    per_sample_weights,
    padding_idx=-1,
):
    if sparse:
        raise NotImplementedError("jaxdev: sparse gradients of embedding_bag are not supported on jax")
    return embedding_bag_dense_backward(
        grad,
        indices,
        _offset2bag(indices, offsets, offset2bag),
        bag_size,
        maximum_indices,
        num_weights,
        scale_grad_by_freq,
        mode,
        per_sample_weights,
        padding_idx,
    )


@register_functional(aten._embedding_bag_per_sample_weights_backward.default)
def embedding_bag_per_sample_weights_backward(grad, weight, indices, offsets, offset2bag, mode, padding_idx=-1):
    if mode != SUM:
        raise NotImplementedError("embedding_bag_backward: per_sample_weights only supported for mode='sum'")
    g, w = J(grad), J(weight)
    c = opmath(g.dtype)
    idx = any_device(indices).reshape(-1)
    r = jnp.sum(g.astype(c)[_offset2bag(indices, offsets, offset2bag)] * w.astype(c)[idx], axis=-1)
    if padding_idx >= 0:
        r = jnp.where(idx == padding_idx, jnp.zeros((), c), r)
    return r.astype(g.dtype)
