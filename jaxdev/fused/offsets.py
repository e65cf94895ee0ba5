"""View offsets as program data: where two recorded programs differ only in where a view of an input
storage starts, that offset is an input of the program, not part of its key.

A decoding loop writes its cache or mask at position t every token (`mask[..., t] = True` is a copy_
into a view at storage offset t): each token's segment is the last one but for that integer, and with
the offset in the key each token compiled its own program. When an op misses in the trie and the same op was met in an
earlier segment with the same key but for the storage offsets of some input tensors (`moving`), those
tensors are recorded as `Moved` references instead: the key keeps their dtype, sizes and strides and
the storage's size, the offset goes to the program with the lifted numbers (recorder's Number
values), and the program cuts the view's span out of the whole storage with `lax.dynamic_slice`
before the op and, if the op writes it, puts it back with `dynamic_update_slice`. The first offset
met stays static (as dynamo's automatic dynamic shapes do), so a loop builds its body's program twice
and then replays it. The offset came from a view PyTorch made at the call, so it is in bounds (an
out-of-range slice or select raised there); the values are the same elements as the static view's.
"""

from __future__ import annotations

import jax.numpy as jnp
import torch
from jax import lax

from jaxdev import tensor
from jaxdev.core import placement
from jaxdev.fused import boxes, grids
from jaxdev.tensor import BOXES

MOVED = "moved"  # stands for the offset in a moved tensor's key part (offsets are ints: no collision)
STATIC = object()  # _SEEN's mark of an op that cannot take moved views (it returns a view)


class Moved:
    """A tensor argument read through placeholder `base` (its whole storage, flat) at the offset
    `numbers[index]`, with layout `dtype, shape, stride`; `position`: its place among the op's tensors."""

    __slots__ = ("base", "dtype", "grid", "index", "position", "shape", "stride")

    def __init__(self, base: int, index: int, position: int, dtype, shape: tuple, stride: tuple, grid=None):
        self.base, self.index, self.position = base, index, position
        self.dtype, self.shape, self.stride, self.grid = dtype, shape, stride, grid


# An op's local key without its input offsets -> (the segment it was first met in, those offsets, the
# places among them that moved since), or STATIC.
_SEEN: dict = {}


def stripped(key: tuple, tensors: list) -> tuple[tuple, tuple]:
    """`key` in local form (storages numbered by first appearance among the op's own tensors, each
    with its size) with the offsets of its input tensors taken out, and those offsets."""
    parts, offsets, storages = [], [], {}
    tensor_parts = iter(tensors)
    for part in key:
        if type(part) is tuple and part and type(part[0]) is tuple:
            address = boxes.address(next(tensor_parts))
            box = BOXES.get(address)
            local = (storages.setdefault(part[0], len(storages)), part[0][0], box.numel if box is not None else None)
            if part[0][0] == "i":
                parts.append((local, part[1][:3]))
                offsets.append(part[1][3])
                continue
            parts.append((local, part[1]))
        else:
            parts.append(part)
    return tuple(parts), tuple(offsets)


def moving(key: tuple, op, tensors: list, segment: int) -> dict | None:
    """On a miss in the trie: the tensor positions to record as Moved, each with the offset it was first
    met at, where the same op was met in an earlier segment with the same key but for some input offsets
    (None otherwise); once moved, an offset stays program data, even back at the first value. Within one
    segment an op on several views of one storage (the chunks of a fused weight) keeps its offsets static."""
    if not isinstance(op, torch._ops.OpOverload):  # a compiled graph's stand-in may return views of inputs
        return None
    plain, offsets = stripped(key, tensors)
    seen = _SEEN.get(plain)
    if seen is None:
        _SEEN[plain] = (segment, offsets, frozenset())
        return None
    if seen is STATIC:
        return None
    first, first_offsets, moved = seen
    if first != segment:
        moved = moved | {k for k, (a, b) in enumerate(zip(first_offsets, offsets)) if a != b}
        _SEEN[plain] = (first, first_offsets, moved)
    if not moved:
        return None
    positions, k = {}, 0
    for position, part in enumerate(p for p in key if type(p) is tuple and p and type(p[0]) is tuple):
        if part[0][0] == "i":
            if k in moved and _movable(tensors[position], tensors):
                positions[position] = first_offsets[k]
            k += 1
    return positions or None


def keep_static(key: tuple, tensors: list) -> None:
    """The op returns a view of an argument (its offset is learned with it): it never moves."""
    _SEEN[stripped(key, tensors)[0]] = STATIC


def _movable(t: torch.Tensor, tensors: list) -> bool:
    """A view that can be cut out of its storage by offset: of the storage's own dtype, not empty, no
    other tensor of the op on that storage, and a storage not placed over a mesh."""
    address = boxes.address(t)
    box = BOXES.get(address)
    if box is None or box.dtype is not t.dtype or t.numel() == 0 or any(s < 0 for s in t.stride()):
        return False
    if placement.SHARDED_ENTRIES and box in placement.SHARDED:
        return False
    return sum(1 for u in tensors if boxes.address(u) == address) == 1


def has_views(learned) -> bool:
    """Whether the op returns a view of an argument (its offset is learned, so it cannot move)."""
    kind, specs = learned.out
    specs = [specs] if kind == "one" else (specs or [])
    return any(s is not None and s[0] == "view" for s in specs)


def base_meta(t: torch.Tensor) -> tuple[tuple, torch.Tensor]:
    """The layout of `t`'s whole storage as one flat tensor of its dtype, and that tensor."""
    storage = t.untyped_storage()
    numel = BOXES[boxes.address(t)].numel
    meta = (t.dtype, torch.Size([numel]), (1,), 0)
    return meta, tensor.tensor_on_storage(storage, *meta)


def grid(t: torch.Tensor, first: int) -> tuple | None:
    """The moved view's grid on its storage's array as now shaped (grids.grid_of), None where there is
    none (a permuted storage's logical form, a pending result's array not made yet) or where the view's
    starts on its own axes are not those it was `first` met at: they move too (a sliding window
    x[:, p:p + 4]), and each would key its own program, where its span serves every one. The array's
    shape is read as held (its value may be pending: asking for it would run the segment being
    recorded); the program checks it again (grids.fits)."""
    array, logical = boxes.held(BOXES[boxes.address(t)])
    if logical is not None:
        return None
    found = grids.grid_of(t, array)
    if found is None or grids.grid_of(t, array, first) != found:
        return None
    return found


def span(shape, stride) -> int:
    return 1 + sum((n - 1) * s for n, s in zip(shape, stride))


def _offset(numbers, index: int):
    return tensor.read(numbers)[index].astype(jnp.int64)


def window(numbers, base: torch.Tensor, index: int, dtype, shape, stride, grid=None) -> torch.Tensor:
    """In the program: the moved view, on a new storage holding its span of `base`'s storage (or, on
    its grid, exactly its elements: grids.py)."""
    box = tensor.box_of(base)
    if grids.fits(grid, box.array):
        return grids.window(tensor.read(numbers)[index], box, grid, dtype, shape, stride)
    n = span(shape, stride)
    part = lax.dynamic_slice(box.flat(), (_offset(numbers, index),), (n,))
    storage = tensor.new_storage(tensor.Box(part, n, box.dtype))
    return tensor.tensor_on_storage(storage, dtype, tuple(shape), tuple(stride), 0)


def write_back(base: torch.Tensor, view: torch.Tensor, numbers, index: int, grid=None) -> None:
    """In the program: the moved view's span (or its elements: grids.py), written by the op, back into
    `base`'s storage."""
    box = tensor.box_of(base)
    old = box.array
    if grids.fits(grid, old):  # as window decided: the array is the same until the op's write comes back
        box.array = grids.write_back(tensor.read(numbers)[index], old, grid, view.shape, tensor.box_of(view).array)
    else:
        new = lax.dynamic_update_slice(old.reshape(-1), tensor.box_of(view).flat(), (_offset(numbers, index),))
        box.array = new.reshape(old.shape)
    box.writes += 1


def eager_view(base: torch.Tensor, ref: Moved, numbers: list) -> torch.Tensor:
    """The moved view itself, for the op-by-op run of a segment."""
    offset = int(numbers[ref.index])
    return tensor.tensor_on_storage(base.untyped_storage(), ref.dtype, ref.shape, ref.stride, offset)
