"""Copy-on-write storages (Tensor._lazy_clone, jaxdev/csrc/cow.cpp) in fused eager: shared until written.

Recording reads every address without materializing a storage (boxes.address), so a read leaves it
shared, as on CPU and in per-op mode. A write must first make the written storage its own, as an
eager kernel does when it asks for the mutable pointer: c10 gives the last storage sharing the data
its address and any other a copy (a new address, a box holding the same immutable array). The op's
key names storages by address, so an op that writes a shared storage is keyed again once it is made
its own: `unshare` says when.
"""

from __future__ import annotations

import operator
import weakref

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
    flattened), of the tensors that the op writes: those its schema marks written (`Tensor(a!)`), or a
    compiled graph's (recorded as one op) that the graph writes; None where neither says."""
    schema = getattr(op, "_schema", None)
    if schema is not None:
        by_name = {argument.name: argument for argument in schema.arguments}
        flags = [_writes(argument) for argument, _ in zip(schema.arguments, args)]
        flags += [_writes(by_name.get(name)) for name in kwargs]
    elif getattr(op, "gm", None) is not None:  # a compiled graph's stand-in (graphs/program.py's _GraphOp)
        graph = graph_writes(op.gm)
        flags = [i in graph for i in range(len(args))]
    else:
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

    for a, writes in zip((*args, *kwargs.values()), flags):
        walk(a, writes)
    return written


def _writes(argument) -> bool:
    return argument is not None and argument.alias_info is not None and argument.alias_info.is_write


_GRAPH_WRITES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def graph_writes(gm: torch.fx.GraphModule) -> frozenset:
    """The indices of the placeholders a graph writes, directly or through a view of one: an op whose
    schema marks that argument written (`Tensor(a!)`: copy_ of a functionalized input mutation, an
    in-place op). A placeholder reaching a call without a schema counts as written (unshared, as
    before the schema was read)."""
    known = _GRAPH_WRITES.get(gm)
    if known is not None:
        return known
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    root = {n: i for i, n in enumerate(placeholders)}  # node -> the placeholder it is or views
    written: set[int] = set()
    for n in gm.graph.nodes:
        if n.op != "call_function":
            continue
        if n.target is operator.getitem:  # one result of a view op that gives several (split, unbind)
            if n.args[0] in root:
                root[n] = root[n.args[0]]
            continue
        schema = getattr(n.target, "_schema", None)
        pairs = zip(n.args, schema.arguments) if schema is not None else ((a, None) for a in n.args)
        by_name = {a.name: a for a in schema.arguments} if schema is not None else {}
        for a, argument in [*pairs, *((a, by_name.get(k)) for k, a in n.kwargs.items())]:
            r = root.get(a) if isinstance(a, torch.fx.Node) else None
            if r is None:
                continue
            alias = argument.alias_info if argument is not None else None
            if argument is None or (alias is not None and alias.is_write):
                written.add(r)
            if alias is not None:  # a view of it, or the op returns it written: the result is it too
                root[n] = r
    known = _GRAPH_WRITES[gm] = frozenset(written)
    return known
