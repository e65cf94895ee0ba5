"""`index_put_` (`t[idx] = v`) into a tensor whose elements share memory (an expanded one), as CPU.

CPU warns that this is deprecated and writes anyway: its TensorIterator loop writes each value of the
indexing result in turn, so where several elements share one memory location the last one written in
the loop's order wins (with accumulate, every write adds into the location). That order is
TensorIterator's: its dims sorted by the strides of the written tensor, then of the value, then of the
indices (reorder_dimensions), the first sorted dim varying fastest. `loop_order` computes it from the
metadata; the program then stamps each write with its place in the loop, keeps for each memory location
the largest stamp written to it, and takes that write's value.

CPU runs the non-accumulating loop on several threads above 3,000 writes (cpu_index_kernel's grain),
where the winner among writes sharing a location is whichever thread comes last; here it is always
the serial loop's.
"""

from __future__ import annotations

import math
import warnings

import jax.numpy as jnp
import torch

from jaxdev import tensor
from jaxdev.ops.kit import J, jitted, overlaps, tensor_iterator
from jaxdev.ops.kit.indices import joined_index, put_index, split_index


def put(self: torch.Tensor, indices, values: torch.Tensor, accumulate: bool = False, unsafe: bool = False) -> None:
    """index_put_ / _index_put_impl_ of an expanded `self`: CPU's warning, then its loop's writes."""
    warnings.warn(
        "Use of index_put_ on expanded tensors is deprecated. Please clone() the tensor before performing this "
        "operation. This also applies to advanced indexing e.g. tensor[indices] = tensor",
        UserWarning,
        stacklevel=3,
    )
    if not accumulate and values.numel() == 1 and _single_mask(indices):
        warnings.warn(  # CPU: a number put through one mask is masked_fill_, which warns too
            "Use of masked_fill_ on expanded tensors is deprecated. Please clone() the tensor before performing "
            "this operation. This also applies to advanced indexing e.g. tensor[mask] = scalar",
            UserWarning,
            stacklevel=3,
        )
    index, v = put_index(self, indices, values)
    index = index + (slice(None),) * (self.dim() - len(index))
    dims = overlaps.expanded_dims(self)
    shape = tuple(1 if d in dims else n for d, n in enumerate(self.shape))
    memory = self.as_strided(shape, self.stride(), self.storage_offset())  # each location once
    result, order = loop_order(self, indices, index, values)
    structure, arrays = split_index(index)
    program = _program(structure, tuple(self.shape), dims, result, order, bool(accumulate))
    tensor.write(memory, program(J(memory), v, *arrays))


def _single_mask(indices) -> bool:
    given = [ix for ix in indices if ix is not None]
    return len(given) == 1 and given[0].dtype in (torch.bool, torch.uint8)


def _index_operands(indices, index) -> list[tuple[tuple, tuple]]:
    """(shape, strides) of each index tensor as CPU's loop reads it: a mask as the columns of its
    nonzero() (a (count, ndim) tensor, so stride ndim), an integer index as given."""
    arrays = [a for a in index if not isinstance(a, slice)]
    out = []
    for ix in indices:
        if ix is None:
            continue
        if ix.dtype in (torch.bool, torch.uint8):
            out += [((arrays[len(out)].shape[0],), (max(ix.dim(), 1),)) for _ in range(ix.dim())]
        else:
            out.append((tuple(ix.shape), tuple(ix.stride())))
    return out


def _aligned(shape, strides, full) -> list[int]:
    """Strides of a tensor broadcast to `full` (right-aligned; a broadcast dim reads with stride 0)."""
    pad = len(full) - len(shape)
    return [0 if i < pad or shape[i - pad] != n else strides[i - pad] for i, n in enumerate(full)]


def loop_order(self, indices, index, values) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(the indexing result's shape, its dims from the outermost loop to the innermost) as CPU's
    TensorIterator runs index_put: written tensor first, then the value, then each index."""
    given = [d for d, a in enumerate(index) if not isinstance(a, slice)]
    ops = _index_operands(indices, index)
    middle = tuple(jnp.broadcast_shapes(*(s for s, _ in ops)))
    rest = [d for d in range(self.dim()) if d not in given]
    if given == list(range(given[0], given[-1] + 1)):  # adjacent: the result keeps them in place
        before, after = [d for d in rest if d < given[0]], [d for d in rest if d > given[0]]
    else:  # CPU transposes them to the front, as NumPy places them
        before, after = [], rest
    result = tuple([self.shape[d] for d in before] + list(middle) + [self.shape[d] for d in after])
    gap = [0] * len(middle)
    written = [self.stride(d) for d in before] + gap + [self.stride(d) for d in after]
    strides = [_aligned(result, written, result), _aligned(tuple(values.shape), values.stride(), result)]
    for shape, st in ops:
        inner = _aligned(shape, st, middle)
        strides.append([0] * len(before) + inner + [0] * len(after))
    return result, tuple(tensor_iterator.reordered(result, strides)[::-1])


@jitted
def _program(structure, shape, dims, result, order, accumulate):
    """The memory locations' new values (self's shape with its expanded dims at size 1)."""
    n = math.prod(result)
    back = tuple(sorted(range(len(order)), key=order.__getitem__))

    def run(memory, v, *arrays):
        index = joined_index(structure, arrays)
        v = jnp.broadcast_to(v.astype(memory.dtype), result)
        if accumulate and memory.dtype == jnp.bool_:  # PyTorch's bool sum: a logical or
            return memory | jnp.zeros(shape, bool).at[index].max(v).any(axis=dims, keepdims=True)
        if accumulate:
            return memory + jnp.zeros(shape, memory.dtype).at[index].add(v).sum(axis=dims, keepdims=True)
        stamps = jnp.arange(n).reshape([result[d] for d in order]).transpose(back)
        last = jnp.full(shape, -1, stamps.dtype).at[index].max(stamps).max(axis=dims, keepdims=True)
        picked = v.transpose(order).reshape(-1)[jnp.clip(last, 0)] if n else memory
        return jnp.where(last >= 0, picked, memory)

    return run


for _name in overlaps.EXPANDED_WRITES:
    overlaps.EXPANDED_WRITERS[_name] = put
