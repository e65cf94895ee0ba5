"""Foreach ops over lists of 0-dim tensors run once over their stacked vector (issue 37).

A capturable torch.optim step keeps one 0-dim step count per parameter on the device, and AdamW's bias
corrections are foreach ops over those counts: `_foreach_pow(beta1, steps)`, `_foreach_sub`, `_neg`,
`_div`, `_reciprocal`, `_sqrt`, one element per parameter. Traced, a foreach op is PyTorch's loop of
per-tensor ops (or, under fused eager, a program with one body per index), so the GPT LM's step
program held 152 float32 pows of about 190 scalar instructions each where jaxdev's own pow runs (off
XLA's CPU backend): ~29.5k scalar instructions in the step's entry computation, a TPU compile past
100 s. Here such a call becomes the same foreach op over one tensor, the lists' values stacked:

    _foreach_pow(0.9, [s0, ..., sn])  ->  unbind_copy(_foreach_pow(0.9, [stack([s0, ..., sn])])[0])

so the chain runs as a few vector ops. A list that is exactly the pieces of an earlier rewrite's
unbind_copy, in order, is that vector itself: a chain of foreach ops never stacks in between.

Each element computes what its per-tensor op computed: the ops are elementwise, and the tensors'
dimensions do not enter type promotion where every tensor argument and result has one floating dtype
(a 0-dim tensor beside a dimensioned one of another dtype would promote differently, and a 0-dim second
operand of another dtype is read unrounded by the exact-number kernels: neither is taken). Numbers
stay the op's numbers; a scalar list (one number per index) is not taken. unbind_copy, not unbind: its
pieces are separate tensors, as the foreach op's results were, so writing one cannot change another.
The kernels give each element the same computation; XLA's simplifier does not always treat a scalar
and a vector alike, so an element can differ in its last bit: a scalar's x / 0.01 became x * 100 where
the vector's stayed a division (capturable Adamax, 1 ulp, the vector's being CPU's), and where the step
counts are constants of the program (fused eager's first step, which also makes the optimizer's state)
the constant chain 1/(b/lr) was folded as lr * (1/b) for one and not the other. AdamW, Adam, SGD,
RMSprop, Adagrad, NAdam, RAdam, ASGD and Adadelta steps after their first were bit-equal (a review).
"""

from __future__ import annotations

import operator

import torch
import torch.fx

aten = torch.ops.aten
_FLOATS = (torch.float16, torch.bfloat16, torch.float32, torch.float64)
_UNBIND = aten.unbind_copy.int
# Foreach ops that reduce each tensor: over the stacked vector they would reduce across the list
_REDUCTIONS = ("aten::_foreach_norm", "aten::_foreach_max")


def batch(gm: torch.fx.GraphModule) -> int:
    """Rewrites `gm`'s foreach calls over 0-dim tensor lists in place; the number rewritten."""
    pieces = [_rewrite(gm.graph, node) for node in list(gm.graph.nodes) if _takes(node)]
    for p in pieces:  # unbound where a later call took the whole vector: nothing left to trace
        for item in [u for u in p.users if not u.users]:
            gm.graph.erase_node(item)
        if not p.users:
            gm.graph.erase_node(p)
    if pieces:
        gm.graph.lint()
        gm.recompile()
    return len(pieces)


def _val(node):
    return node.meta.get("val") if isinstance(node, torch.fx.Node) else None


def _is_tensor_list(arg) -> bool:
    return isinstance(arg, (list, tuple)) and bool(arg) and all(isinstance(a, torch.fx.Node) for a in arg)


def _takes(node: torch.fx.Node) -> bool:
    """A functional elementwise foreach call whose tensors (list elements, a lone tensor, results) are all 0-dim of
    one floating dtype on one device, with at least two per list and no number lists."""
    target = node.target
    if node.op != "call_function" or not isinstance(target, torch._ops.OpOverload):
        return False
    schema = target._schema
    if not schema.name.startswith("aten::_foreach_") or schema.is_mutable or schema.name in _REDUCTIONS:
        return False
    lists = [a for a in (*node.args, *node.kwargs.values()) if isinstance(a, (list, tuple))]
    if not lists or not all(map(_is_tensor_list, lists)) or len({len(a) for a in lists}) != 1 or len(lists[0]) < 2:
        return False
    loose = [a for a in (*node.args, *node.kwargs.values()) if isinstance(a, torch.fx.Node)]
    out = node.meta.get("val")
    if not isinstance(out, (list, tuple)) or len(out) != len(lists[0]):
        return False
    tensors = [_val(a) for lst in lists for a in lst] + [_val(a) for a in loose] + list(out)
    if not all(isinstance(t, torch.Tensor) and t.dim() == 0 for t in tensors):
        return False
    return (
        len({t.dtype for t in tensors}) == 1 and tensors[0].dtype in _FLOATS and len({t.device for t in tensors}) == 1
    )


def _rewrite(graph: torch.fx.Graph, node: torch.fx.Node) -> torch.fx.Node:
    def stacked(arg):
        return _vector(graph, arg) if isinstance(arg, (list, tuple)) else arg

    with graph.inserting_before(node):
        args = tuple(stacked(a) for a in node.args)
        kwargs = {k: stacked(v) for k, v in node.kwargs.items()}
        one = graph.call_function(node.target, args, kwargs)
        vector = graph.call_function(operator.getitem, (one, 0))
        pieces = graph.call_function(_UNBIND, (vector, 0))
    pieces.meta["scalar_lists"] = len(node.meta["val"])  # the pieces' count, for a later call's vector
    node.replace_all_uses_with(pieces)
    graph.erase_node(node)
    return pieces


def _vector(graph: torch.fx.Graph, items) -> list:
    """A one-tensor list holding `items` stacked: the unbound vector itself where `items` are all its
    pieces, in order."""
    source = items[0].args[0] if items[0].target is operator.getitem else None
    whole = (
        isinstance(source, torch.fx.Node)
        and source.meta.get("scalar_lists") == len(items)
        and all(i.target is operator.getitem and i.args[0] is source and i.args[1] == k for k, i in enumerate(items))
    )
    if whole:
        return [source.args[0]]
    return [graph.call_function(aten.stack.default, (list(items), 0))]
