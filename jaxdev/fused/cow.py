"""Copy-on-write storages (Tensor._lazy_clone, jaxdev/csrc/cow.cpp) in fused eager: shared until written.

Recording reads every address without materializing a storage (boxes.address), so a read leaves it
shared, as on CPU and in per-op mode. A write must first make the written storage its own, as an
eager kernel does when it asks for the mutable pointer: c10 gives the last storage sharing the data
its address and any other a copy (a new address, a box holding the same immutable array). The op's
key names storages by address, so an op that writes a shared storage is keyed again once it is made
its own: `unshare` says when.
"""

from __future__ import annotations

import torch

from jaxdev.fused import boxes

_is_cow = torch._C._is_cow_tensor


def unshare(op, args: tuple, kwargs: dict, writes: list, tensors: list, seg, mark: tuple, flush) -> bool:
    """Whether the op, keyed at `mark` in `seg`, writes a copy-on-write storage; if so each such storage
    is now its own and the op is to be keyed again. A segment that already reads the shared data is run
    first: it holds its inputs as storage objects, and the one materialized would then name its copy,
    where the ops recorded before it read the shared data."""
    shared = [tensors[i] for i in writes if _is_cow(tensors[i])]
    if not shared:
        return False
    # `writes` are the tensors on a storage the op writes: a tensor that only reads the same shared data
    # (t.add_(t._lazy_clone())) is among them. The schema says which arguments the op writes.
    written = _written_arguments(op, args, kwargs)
    if written is not None:
        shared = [t for i, t in enumerate(tensors) if i in written and i in writes and _is_cow(t)] or shared
    seg.undo(mark)
    if any(boxes.address(t) in seg.slots for t in shared):
        flush()
    for t in shared:
        t.data_ptr()  # the mutable pointer (a Python storage object would stay with the storage: boxes.address)
    return True


def _written_arguments(op, args: tuple, kwargs: dict) -> set | None:
    """The positions, in the recorder's order (recorder.Segment.ref: arguments, then keywords, lists
    flattened), of the tensors that the op's schema marks as written (`Tensor(a!)`); None without a
    schema (a compiled graph recorded as one op)."""
    schema = getattr(op, "_schema", None)
    if schema is None:
        return None
    written: set[int] = set()
    count = 0

    def walk(a, writes: bool) -> None:
        nonlocal count
        if isinstance(a, torch.Tensor):
            if writes:
                written.add(count)
            count += 1
        elif type(a) is list or type(a) is tuple:
            for x in a:
                walk(x, writes)

    def writes(argument) -> bool:
        return argument is not None and argument.alias_info is not None and argument.alias_info.is_write

    for a, argument in zip(args, schema.arguments):
        walk(a, writes(argument))
    by_name = {argument.name: argument for argument in schema.arguments}
    for name, a in kwargs.items():
        walk(a, writes(by_name.get(name)))
    return written
