"""A moved view reached as one dynamic slice of its storage's array as shaped (its grid), not as a span.

offsets.py gives a program a view whose offset moved as its span of the storage: a KV cache's
`cache[:, :, pos]` spans nearly the whole cache, so the write cut the span out (`dynamic_slice`),
scattered into it through an index array and put the span back (`dynamic_update_slice`): three passes
over the storage, int64 index arithmetic (emulated on a TPU), and a flat reshape (a relayout there).

Often the view is one block of the storage's array in its own shape A (the cache's [B, H, T, D]): each
of its dims of size > 1 runs along its own axis of A, with A's stride there, and the offset's digits in
A's radices leave room for it on those axes. Then the view is `dynamic_slice(array, starts, sizes)`, its
sizes on its own axes and 1 on the others, and its write one `dynamic_update_slice` of exactly its
elements into the array, in place when the storage's buffer is donated: what `jax.jit` of
`cache.at[:, :, pos].set(k)` does.

Which programs may take it is in the trie's key (`grid_of`: A and, for each of the view's axes, its start
there): the offset moves only on the other axes, where a view of size 1 always fits, so every offset the
key admits is on the grid. The program reads those other digits from the offset at run time; where the
array it is traced with is not shaped A, it takes the span as before.
"""

from __future__ import annotations

import math

import jax.numpy as jnp
import torch
from jax import lax

from jaxdev import tensor
from jaxdev.core.plans import INT32_OFFSETS


def grid_of(t: torch.Tensor, array, offset: int | None = None) -> tuple | None:
    """(A, axes) for the moved view `t` (at `offset`, its own by default) of a storage held as `array`
    (A: its shape), or None where the view is not one block of it. `axes` holds, for each of t's dims,
    None (size 1) or (axis of A, start)."""
    shape = getattr(array, "shape", None)
    if shape is None or not shape:
        return None
    shape = tuple(shape)
    offset = t.storage_offset() if offset is None else offset
    strides, axes, used = tensor.contiguous_strides(shape), [], set()
    for n, s in zip(t.shape, t.stride()):
        if n == 1:
            axes.append(None)
            continue
        j = next((j for j, (a, st) in enumerate(zip(shape, strides)) if a > 1 and st == s and j not in used), None)
        if j is None:
            return None
        start = offset // s % shape[j] if j else offset // s
        if start + n > shape[j]:
            return None
        used.add(j)
        axes.append((j, start))
    return shape, tuple(axes)


def fits(grid, array) -> bool:
    return grid is not None and tuple(array.shape) == grid[0]


def _starts_and_sizes(offset, grid, view_shape) -> tuple[list, list]:
    """The slice's starts on A (the view's own axes' from the key, the others' digits of the traced
    offset, a float64 program number) and its sizes."""
    shape, axes = grid
    strides = tensor.contiguous_strides(shape)
    wide = jnp.int32 if math.prod(shape) < INT32_OFFSETS else jnp.int64  # int64 is emulated on a TPU
    offset = offset.astype(wide)
    starts: list = [offset // s % a if j else offset // s for j, (a, s) in enumerate(zip(shape, strides))]
    sizes = [1] * len(shape)
    for n, axis in zip(view_shape, axes):
        if axis is not None:
            starts[axis[0]], sizes[axis[0]] = axis[1], n
    # one index dtype for dynamic_slice; the view's own starts and size-1 axes' are constants
    return [
        jnp.asarray(0 if a == 1 else st, wide) if type(st) is int or a == 1 else st for st, a in zip(starts, shape)
    ], sizes


def window(offset, box, grid, dtype, shape, stride) -> torch.Tensor:
    """In the program: the moved view on a new storage holding exactly its elements, the block of
    `box`'s array, dense in the array's axis order (so in the view's stride order: a new result the op
    makes from it is laid out as from the view)."""
    starts, sizes = _starts_and_sizes(offset, grid, shape)
    block = lax.dynamic_slice(box.array, starts, sizes)
    dense = tensor.contiguous_strides(tuple(sizes))
    strides = tuple(s if axis is None else dense[axis[0]] for s, axis in zip(stride, grid[1]))
    storage = tensor.new_storage(tensor.Box(block, math.prod(sizes), box.dtype))
    return tensor.tensor_on_storage(storage, dtype, tuple(shape), strides, 0)


def write_back(offset, array, grid, shape, written) -> object:
    """In the program: `array` (shaped A) with the view's block, as the op left it (`written`, its new
    storage's array), put back at its place."""
    starts, sizes = _starts_and_sizes(offset, grid, shape)
    return lax.dynamic_update_slice(array, written.reshape(sizes), starts)
