"""The results of a recorded op: tensors with the layout learned for them (learn.Learned.out), on new
storages whose values are pending (boxes.PendingBox), or the op's own arguments or views of them.

Every recorded op, replayed or keyed, comes through `make`: one native call (jaxdev/csrc/fused_results.cpp)
that does all of it from a plan read once per learned op, where the native module is; the loops below
otherwise, and for a write into a copy-on-write storage.
"""

from __future__ import annotations

import torch

from jaxdev import native, tensor
from jaxdev.core import boxes as core_boxes
from jaxdev.fused import boxes
from jaxdev.tensor import BOXES, Box

address = boxes.address  # an optimizer's foreach ops write hundreds of storages each: one lookup less

_native_plan = getattr(native.module, "fused_plan", None)
_native_results = getattr(native.module, "fused_results", None)


def make(seg, learned, tensors: list):
    """The op's results, its new storages entered in the segment (slots, pending), its writes and
    version bumps done, as the kernel would have done them."""
    plan = learned.plan  # read once per learned op: its out, storages, writes and bumps never change
    if plan is None:
        plan = learned.plan = _plan(learned)
    if plan:
        out = _native_results(plan, seg, tensors)
        if out is not NotImplemented:
            return out
    return made_in_python(seg, learned, tensors)


def _plan(learned):
    if _native_plan is None:
        return False
    plan = _native_plan(
        learned.out, learned.storages, learned.writes, learned.bumps, boxes.PendingBox, boxes.WrittenBox, boxes.PENDING
    )
    return plan if plan is not None else False


def made_in_python(seg, learned, tensors: list):
    """make without the native module: the same results, entries and writes."""
    if learned.bumps:
        torch._C._increment_version([tensors[i] for i in learned.bumps])
    if learned.writes:
        _written(seg, learned.writes, tensors)
    kind, specs = learned.out
    if kind == "one":
        if specs[0] == "fresh" and _wrap is not None:
            return _fresh(seg, (specs,))[0]
        return _result(seg, learned, specs, tensors, None)
    if kind == "none":
        return None
    fresh = _ALL_FRESH.get(learned)
    if fresh is None:
        fresh = _ALL_FRESH[learned] = _wrap is not None and all(s is not None and s[0] == "fresh" for s in specs)
    if fresh:  # a foreach op's many results: no per-result frame, no storage objects (no later view needs them)
        out = _fresh(seg, specs)
        return out if kind is list else tuple(out)
    made: dict = {}
    return kind(_result(seg, learned, s, tensors, made) for s in specs)


# learn.Learned -> whether every result of its op is a "fresh" one (Learned.out never changes once learned)
_ALL_FRESH: dict = {}
_wrap = core_boxes.native_wrap
_next_address = core_boxes.next_address
_STAND_IN = boxes.Shape()  # what the native wrap reads of an array: its shape, set before each call


def _fresh(seg, specs) -> list:
    """boxes.new_pending_tensor for each ("fresh", m, dtype, shape) of `specs`, inline (a frame and two
    tuples less per result: a foreach op makes one per parameter), entered in the segment."""
    node, slots, pending, stand_in, out = len(seg.nodes), seg.slots, seg.pending, _STAND_IN, []
    for _, m, dtype, shape in specs:
        stand_in.shape = shape
        address = next(_next_address)
        t = _wrap(stand_in, dtype, address)
        box = BOXES[address]
        box.__class__ = boxes.PendingBox
        box._array = boxes.PENDING
        slots[address] = ("p", node, m)
        pending.append((box, node, m))
        out.append(t)
    core_boxes.checkpoint()  # once for the op: a sweep keeps every box these tensors hold
    return out


def _written(seg, writes: list, tensors: list) -> None:
    """The storages the op writes: their boxes' values are pending from now on (boxes.WrittenBox).
    None is copy-on-write: the recorder unshared them (cow.py)."""
    get, written = BOXES.get, seg.written
    for i in writes:
        box = get(address(tensors[i]))
        if type(box) is Box:
            box.__class__ = boxes.WrittenBox
            written.append(box)


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
