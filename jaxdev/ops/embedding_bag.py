"""EmbeddingBag: `_embedding_bag` / `_embedding_bag_forward_only` (sum, mean, max over bags given by
offsets; per_sample_weights; padding_idx) and the dense backward kernels autograd calls.

Besides the output the forward returns what its own backward reads: offset2bag (the bag of each
index), bag_size (non-padding indices per bag) and max_indices (the weight row that won each max,
-1 in an empty bag). Reductions are segment sums over bags, accumulated in float32 for half.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import torch

from jaxdev import dtypes, tracing
from jaxdev.ops.kit import J, any_device, jitted, opmath
from jaxdev.ops.kit.cpu_numerics import cpu_threads
from jaxdev.ops.registry import aten, register_functional

SUM, MEAN, MAX = 0, 1, 2


def _expect_types(what: str, dtype, allowed) -> None:
    """ATen's checkScalarTypes, in CPU's words (CPU names the tensor type as a CPU tensor's)."""
    if dtype not in allowed:
        names = ", ".join(dtypes.scalar_name(d) for d in allowed)
        raise RuntimeError(
            f"Expected tensor for argument #1 '{what}' to have one of the following scalar types: {names}; "
            f"but got torch.{dtypes.scalar_name(dtype)}Tensor instead (while checking arguments for embedding_bag)"
        )


def _check_arguments(weight, indices, offsets, include_last_offset):
    """CPU's shape and dtype checks (EmbeddingBag.cpp: promoteIndicesAndOffsets, check_arguments)."""
    if offsets.dim() != 1:
        raise RuntimeError(f"offsets has to be a 1D Tensor, but got Tensor of dimension {offsets.dim()}")
    index_dtype = torch.promote_types(indices.dtype, offsets.dtype)  # indices and offsets are promoted first
    _expect_types("indices", index_dtype, (torch.int64, torch.int32))
    _expect_types("offsets", index_dtype, (torch.int64, torch.int32))
    _expect_types("weight", weight.dtype, (torch.float16, torch.bfloat16, torch.float32, torch.float64))
    if include_last_offset and offsets.shape[0] < 1:
        raise RuntimeError("include_last_offset: number of offset should be at least 1")
    return index_dtype


_INDEX_SIZE = (
    "Expected i < index_size to be true, but got false.  (Could this error message be improved?  If so, please "
    "report an enhancement request to PyTorch.)"
)
_LAST_OFFSET = (
    "Your input appears to be incorrect: the last offset value should be the size of the indices tensor, but it "
    "seems not to be the case."
)


def _fast_path_error(offsets, indices, rows: int, include_last_offset: bool) -> Exception | None:
    """The error CPU's fbgemm path (sum and mean of float, half and bfloat16 weights) raises for the
    offsets and indices it was given, or None. CPU splits the bags into one chunk per thread
    (at::parallel_for, grain 1); a chunk whose offsets decrease, or which holds an index out of
    range, fails, and fbgemm_spmdm_report_error_ then walks the chunk with its offsets absolute and
    its index count relative to the chunk, which is what the messages report. (Where several chunks
    fail, CPU's threads race to report; here the first chunk reports.)"""
    o = [int(v) for v in offsets] + ([] if include_last_offset else [len(indices)])
    bags = len(o) - 1
    threads = cpu_threads()
    team = min(threads, bags) if bags > 1 and threads > 1 else 1
    size = -(-bags // team) if bags else 0
    for start in range(0, bags, max(size, 1)):
        end = min(bags, start + size)
        base, count = o[start], o[end] - o[start]
        if _fbgemm_succeeds(o[start : end + 1], indices[base:] if base >= 0 else [], count, rows):
            continue
        for m in range(start, end):
            for i in range(o[m], o[m + 1]):
                if not i < count:
                    return RuntimeError(_INDEX_SIZE)
                if 0 <= base + i < len(indices) and not 0 <= indices[base + i] < rows:
                    return RuntimeError(
                        f"Index {i} of input takes value {indices[base + i]} which is not in the valid range [0, {rows})"
                    )
        if o[end] != count:
            return RuntimeError(_LAST_OFFSET)
    return None


def _fbgemm_succeeds(o, indices, count: int, rows: int) -> bool:
    """fbgemm's EmbeddingSpMDM over one chunk: bag lengths from its offsets, within `count` indices."""
    current = 0
    for m in range(len(o) - 1):
        length = o[m + 1] - o[m]
        if current + length > count:
            return False
        for _ in range(max(length, 0)):
            if current >= len(indices) or not 0 <= indices[current] < rows:  # (CPU would read past them)
                return False
            current += 1
    return current == count


def _check_offsets(weight, indices, offsets, mode, per_sample_weights, include_last_offset, padding_idx):
    """CPU's checks on the values: offsets[0] is 0 and offsets[-1] within the indices; on CPU's fast
    path (sum or mean of float, half or bfloat16 rows, no padding_idx) fbgemm's own failures too:
    offsets that decrease, indices out of range. One flag, read once; the message is worked out on
    the host only when it is set."""
    if offsets.shape[0] == 0:
        return
    idx = any_device(indices).reshape(-1)
    off = any_device(offsets).reshape(-1)
    n = idx.shape[0]
    fast = (
        mode in (SUM, MEAN)
        and weight.dtype in (torch.float32, torch.float16, torch.bfloat16)
        and padding_idx < 0
        and weight.dim() == 2
        and weight.stride(1) == 1
    )
    bad = _offsets_flag(fast, bool(include_last_offset), int(weight.shape[0]))(idx, off)

    def error():
        o, i = np.asarray(off).tolist(), np.asarray(idx).tolist()
        if o[0] != 0:
            kind = "Long" if offsets.dtype == torch.int64 or indices.dtype == torch.int64 else "Int"
            return RuntimeError(
                "offsets[0] has to be 0, i.e., the first sequence in the mini-batch has to start from position 0. "
                f"However, got {o[0]}\n[ torch.{kind}Tensor{{}} ]"
            )
        if o[-1] > n:
            return RuntimeError(
                f"offsets[-1] can not be greater than input's length {n} but got offsets[-1] of {o[-1]}"
            )
        return _fast_path_error(o, i, weight.shape[0], include_last_offset) or RuntimeError(_LAST_OFFSET)

    tracing.check_values(bad, error)


@jitted
def _offsets_flag(fast, include_last_offset, rows):
    """_check_offsets' flag as one program (as eager jnp ops, ~8 dispatches: 300-670 us a call)."""

    def run(idx, off):
        n = idx.shape[0]
        bad = (off[0] != 0) | (off[-1] > n)
        if fast:
            ext = off if include_last_offset else jnp.concatenate([off, jnp.full((1,), n, off.dtype)])
            bad = bad | jnp.any(ext[1:] < ext[:-1]) | jnp.any((idx < 0) | (idx >= rows))
        return bad

    return run


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
    _check_arguments(weight, indices, offsets, include_last_offset)
    _check_offsets(weight, indices, offsets, mode, per_sample_weights, include_last_offset, padding_idx)
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
