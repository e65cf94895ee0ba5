"""The results of a recorded op: tensors with the layout learned for them (learn.Learned.out), on new
storages whose values are pending (boxes.PendingBox), or the op's own arguments or views of them.

Every recorded op, replayed or keyed, comes through `make`; its common case, one new contiguous result,
is one native call (boxes.new_pending_tensor) and no other Python frame.
"""

from __future__ import annotations

import torch

from jaxdev import tensor
from jaxdev.fused import boxes
from jaxdev.tensor import BOXES, Box


def make(seg, learned, tensors: list):
    """The op's results, its new storages entered in the segment (slots, pending), its writes and
    version bumps done, as the kernel would have done them."""
    if learned.bumps:
        torch._C._increment_version([tensors[i] for i in learned.bumps])
    if learned.writes:
        _written(seg, learned.writes, tensors)
    kind, specs = learned.out
    if kind == "one":
        if specs[0] == "fresh":
            _, m, dtype, shape = specs
            box, t, address = boxes.new_pending_tensor(shape, dtype)
            node = len(seg.nodes)
            seg.slots[address] = ("p", node, m)
            seg.pending.append((box, node, m))
            return t
        return _result(seg, learned, specs, tensors, None)
    if kind == "none":
        return None
    made: dict = {}
    return kind(_result(seg, learned, s, tensors, made) for s in specs)


def _written(seg, writes: list, tensors: list) -> None:
    """The storages the op writes: their boxes' values are pending from now on (boxes.WrittenBox)."""
    for i in writes:
        box = BOXES.get(boxes.address(tensors[i]))
        if type(box) is Box:
            box.__class__ = boxes.WrittenBox
            seg.written.append(box)


def _result(seg, learned, spec, tensors: list, made: dict | None):
    """One result; `made`: the op's new storages so far, by number (None: the op has one result)."""
    if spec is None:
        return None
    kind = spec[0]
    if kind == "arg":
        return tensors[spec[1]]
    if kind == "value":
        return spec[1]
    if kind == "view":
        return tensor.tensor_on_storage(tensors[spec[1]].untyped_storage(), *spec[2:])
    node = len(seg.nodes)
    if kind == "fresh":
        _, m, dtype, shape = spec
        box, t, address = boxes.new_pending_tensor(shape, dtype)
        if made is not None:  # later results of the op may be on it
            made[m] = t.untyped_storage()
        seg.slots[address] = ("p", node, m)
        seg.pending.append((box, node, m))
        return t
    _, m, dtype, shape, stride, offset = spec
    storage = made.get(m) if made is not None else None
    if storage is None:
        numel, storage_dtype = learned.storages[m]
        box, storage = boxes.new_pending(numel, storage_dtype)
        if made is not None:
            made[m] = storage
        seg.slots[storage.data_ptr()] = ("p", node, m)
        seg.pending.append((box, node, m))
    return tensor.tensor_on_storage(storage, dtype, shape, stride, offset)
