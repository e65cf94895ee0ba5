"""Intermediates of a compiled graph laid out as the graph was planned.

AOTAutograd plans a graph on fake tensors: every node's result has the strides its meta function gave
(`node.meta["val"]`), and later nodes rely on them: a `view` is valid only on those strides, and an
`as_strided` (AOTAutograd replays views with it) reads the storage through them. jaxdev's kernels lay
out their results as CPU does, and inside a compiled program as the meta function says where they
know to ask; where a kernel and the meta function disagree, the graph either stops tracing (a `view`
that no longer fits: on an H200 with torch 2.11 the Transformer LM's backward graph ran op by op, 21.5
ms a step against `jax.jit`'s 4.1, on 'view_45') or, worse, an `as_strided` reads the wrong elements.
So while a graph is traced, a node's result that owns a new storage and whose strides differ from the
plan is copied into the planned strides: inside the XLA program that is a transpose XLA fuses into its
consumers, and a node whose layout already agrees (every one on the models tested) costs nothing.
Views of an earlier tensor are left alone: a copy would break the aliasing the graph may write through.

Also what a program keeps of its graph's metadata: each output's device (`expected_devices`) and each
node's planned layout as a meta tensor (`planned_val`), which pickling (GraphProgram.__getstate__) would
otherwise lose.
"""

from __future__ import annotations

import torch

from jaxdev.core.limits import dense_layout

STATS = {"restrided": 0}  # results copied into their planned strides in this process (for tests)


def _plan(val) -> tuple | None:
    """The planned (shape, strides) of a fake result, where they are plain ints and dense."""
    if not isinstance(val, torch.Tensor):
        return None
    shape, strides = tuple(val.shape), val.stride()
    if not all(type(s) is int for s in (*shape, *strides)):  # symbolic sizes: no fixed plan
        return None
    return (shape, strides) if dense_layout(shape, strides) else None


def _restrided(out: torch.Tensor, plan: tuple, seen: set) -> torch.Tensor:
    shape, strides = plan
    if out.device.type != "jax" or tuple(out.shape) != shape or out.stride() == strides:
        return out
    if out.untyped_storage().data_ptr() in seen or out.numel() < 2:  # a view, or nothing to lay out
        return out
    laid = torch.empty_strided(shape, strides, dtype=out.dtype, device=out.device)
    laid.copy_(out)
    STATS["restrided"] += 1
    return laid


def as_planned(node, out, seen: set):
    """`out`, the traced result of `node`, with each new tensor laid out as `node.meta["val"]` says;
    `seen` holds the storages of the graph's inputs and earlier results, and gains this node's."""
    val = node.meta.get("val")
    if isinstance(out, torch.Tensor):
        plan = _plan(val)
        out = _restrided(out, plan, seen) if plan is not None else out
        seen.add(out.untyped_storage().data_ptr())
    elif isinstance(out, (tuple, list)) and isinstance(val, (tuple, list)) and len(val) == len(out):
        items = []
        for o, v in zip(out, val):
            plan = _plan(v) if isinstance(o, torch.Tensor) else None
            o = _restrided(o, plan, seen) if plan is not None else o
            items.append(o)
        for o in items:
            if isinstance(o, torch.Tensor):
                seen.add(o.untyped_storage().data_ptr())
        out = type(out)(items)
    return out


def expected_devices(gm: torch.fx.GraphModule) -> list[str | None]:
    """The device FakeTensor gave each graph output (CPU inputs are traced on jax, see Inputs)."""
    devices = []
    for node in gm.graph.find_nodes(op="output"):
        values = node.args[0] if isinstance(node.args[0], (list, tuple)) else [node.args[0]]
        for v in values:
            val = v.meta.get("val") if isinstance(v, torch.fx.Node) else None
            devices.append(val.device.type if isinstance(val, torch.Tensor) else None)
    return devices


def planned_val(val):
    """A fake result's dtype, sizes and strides as a meta tensor (picklable), where they are plain ints."""
    if isinstance(val, (tuple, list)):
        return type(val)(planned_val(v) for v in val)
    if not isinstance(val, torch.Tensor) or not all(type(s) is int for s in (*val.shape, *val.stride())):
        return None
    return torch.empty_strided(tuple(val.shape), val.stride(), dtype=val.dtype, device="meta")
