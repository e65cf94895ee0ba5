"""A recorded op's results (jaxdev/fused/results.py): made natively from a plan (jaxdev/csrc/fused_results.cpp)
or by the Python loops, the same tensors, boxes, segment entries, writes and version bumps."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import jaxdev
from jaxdev.fused import boxes, learn, recorder, results
from jaxdev.tensor import BOXES

pytestmark = [
    pytest.mark.skipif(results._native_results is None, reason="needs jaxdev's native module"),
    pytest.mark.usefixtures("per_op_after"),
]
F32 = torch.float32


def _learned(out, storages=(), writes=(), bumps=()) -> learn.Learned:
    learned = learn.Learned()
    learned.out, learned.storages, learned.writes, learned.bumps = out, list(storages), list(writes), list(bumps)
    return learned


def _described(seg, tensors: list, out) -> tuple:
    """What make left: each result's layout, version, storage (an argument's, or its slot) and box;
    the arguments' versions and box classes; the segment's pending, written and slot entries."""

    def one(o):
        if not isinstance(o, torch.Tensor):
            return ("not a tensor", o)
        address = boxes.address(o)
        where = next((("arg", i) for i, t in enumerate(tensors) if boxes.address(t) == address), None)
        box = BOXES[address]
        version = None if where else o._version  # an argument's: compared as the bumps
        return (
            (o.dtype, tuple(o.shape), o.stride(), o.storage_offset(), o.device.type, version, o.requires_grad),
            where or seg.slots[address],
            (type(box).__name__, box.numel, box.dtype),
        )

    return (
        type(out).__name__,
        [one(o) for o in (out if isinstance(out, (tuple, list)) else [out])],
        [type(BOXES[boxes.address(t)]).__name__ for t in tensors],
        [(type(b).__name__, node, m, b.numel, b.dtype) for b, node, m in seg.pending],
        [type(b).__name__ for b in seg.written],
        list(seg.slots.values()),
    )


SPECS = {
    "fresh": ("one", ("fresh", 0, F32, (2, 3))),
    "new": ("one", ("new", 0, F32, (3, 2), (1, 3), 0)),
    "view": ("one", ("view", 1, F32, (6, 4), (1, 6), 2)),
    "arg": ("one", ("arg", 0)),
    "none": ("none", None),
    "many": (
        tuple,
        [("fresh", 0, F32, (4,)), ("new", 1, F32, (2, 3), (3, 1), 0), ("new", 1, torch.int32, (6,), (1,), 0)]
        + [("value", 7), None, ("arg", 1), ("view", 0, F32, (2, 2), (4, 1), 1), ("fresh", 2, torch.int64, (0, 3))],
    ),
    "list": (list, [("fresh", 0, F32, (5,)), ("fresh", 1, F32, (1, 2))]),
}
STORAGES = {
    "fresh": [(6, F32)],
    "new": [(6, F32)],
    "many": [(4, F32), (6, F32), (0, torch.int64)],
    "list": [(5, F32), (2, F32)],
}


@pytest.mark.parametrize("name", SPECS)
@pytest.mark.parametrize("written", [False, True])
def test_native_results_are_the_python_loops(name, written):
    x, y = torch.randn(4, 6, device="jax"), torch.randn(30, device="jax")
    torch.jax.synchronize()  # their values made (JAXDEV_EAGER=fused records them): plain boxes, as the specs assume
    learned = _learned(
        SPECS[name], STORAGES.get(name, ()), writes=[0, 1] if written else [], bumps=[1] if written else []
    )
    described, versions = [], []
    for make in (results.make, results.made_in_python):
        seg = recorder.Segment()
        seg.nodes.extend([None] * 3)  # the op is the segment's fourth: its entries say node 3
        before = (x._version, y._version)
        out = make(seg, learned, [x, y])
        described.append(_described(seg, [x, y], out))
        versions.append((x._version - before[0], y._version - before[1]))
        boxes.unwrite_all(seg.written)  # the segment never runs: its new boxes are settled empty
        boxes.settle_all(seg.pending, (False,) * len(seg.pending), [])
    assert described[0] == described[1]
    assert versions[0] == versions[1] == ((0, 1) if written else (0, 0))
    if written:
        assert described[0][2] == ["WrittenBox", "WrittenBox"]


def test_a_plan_is_refused_for_a_spec_it_does_not_know():
    assert (
        results._native_plan(("one", ("later", 0)), [], [], [], boxes.PendingBox, boxes.WrittenBox, boxes.PENDING)
        is None
    )


def test_an_inference_tensor_is_not_bumped_as_in_python():
    """torch._C._increment_version leaves an inference tensor (it has no version counter) alone."""
    with torch.inference_mode():
        x = torch.randn(3, device="jax")
    learned = _learned(("none", None), bumps=[0])
    for make in (results.make, results.made_in_python):
        assert make(recorder.Segment(), learned, [x]) is None


def _train(make, monkeypatch) -> list:
    """Four training steps of attention (results on new storages shared by several, a number) with a
    foreach AdamW (written boxes, bumped versions, a list of fresh results), fused, with `make`."""
    monkeypatch.setattr(results, "make", make)
    torch.manual_seed(0)
    w = torch.randn(8, 24, device="jax", requires_grad=True)
    x = torch.randn(2, 5, 8, device="jax")
    opt = torch.optim.AdamW([w], lr=0.01, foreach=True)
    losses = []
    with jaxdev.eager_mode("fused"):
        for _ in range(4):
            opt.zero_grad(set_to_none=True)
            q, k, v = (x @ w).reshape(2, 5, 3, 8).unbind(2)
            loss = F.scaled_dot_product_attention(q, k, v, is_causal=True).square().mean()
            loss.backward()
            opt.step()
            losses.append(loss)
        recorder.flush()
    return [*losses, w.detach()]


def test_training_with_native_results_is_training_with_python_ones(monkeypatch):
    native = _train(results.make, monkeypatch)
    python = _train(results.made_in_python, monkeypatch)
    for a, b in zip(native, python):
        torch.testing.assert_close(a.cpu(), b.cpu(), rtol=0, atol=0)
