"""torch.optim's foreach calls replayed natively (jaxdev/csrc/foreach_ops.cpp, jaxdev/ops/kit/foreach_replay.py):
a call keyed as met before runs the program its Python kernel ran, with new numbers, and leaves what that
kernel leaves, bit for bit: the values in the same storages, version counters, box writes, donated
buffers, fresh results; a call the Python kernel hands to PyTorch's loop (aliasing, inference tensors,
bools) runs in Python every time, as do fused eager's calls."""

from __future__ import annotations

import copy

import pytest
import torch

import jaxdev
from jaxdev import native, tensor
from jaxdev.ops.kit import foreach_replay

pytestmark = [
    pytest.mark.skipif(native.module is None, reason="the foreach replay is native"),
    pytest.mark.per_op_mode("per-op eager's native kernels; fused mode records these ops"),
]
aten = torch.ops.aten
SHAPES = [(5, 3), (3,), (2, 2, 2), ()]


def _python(op):
    """The op's Python kernel (jaxdev_slow::op runs it with no frame: never learned, never replayed)."""
    return getattr(getattr(torch.ops.jaxdev_slow, op._schema.name.removeprefix("aten::")), op._overloadname)


def _lists(seed: int, count: int, dtypes=(torch.float32,), positive=False):
    """Two twin lists of `count` fresh jax lists each (the same values, arrays of their own)."""
    g = torch.Generator().manual_seed(seed)
    made = []
    for _ in range(count):
        cpu = [torch.randn(s, generator=g).to(dtypes[i % len(dtypes)]) for i, s in enumerate(SHAPES)]
        made.append([(x.abs() + 0.5 if positive else x) for x in cpu])
    return [[x.to("jax") for x in lst] for lst in made], [[x.to("jax") for x in lst] for lst in made]


def _bits(t):
    x = t.cpu()
    return x.view(torch.int16 if x.element_size() == 2 else torch.int32) if x.is_floating_point() else x


def _same(a, b):
    assert (a.dtype, a.shape, a.stride(), a.storage_offset()) == (b.dtype, b.shape, b.stride(), b.storage_offset())
    assert torch.equal(_bits(a), _bits(b))


def _box(t):
    return tensor.BOXES[torch._C._data_address(t)]


def _numbers(step: int):
    return [-0.001 / (1 - 0.9**step) * (i + 1) for i in range(len(SHAPES))]


# name -> (op, lists made, positive values, the call's other arguments after the lists, at step s)
CASES = {
    "lerp_ by a number": (aten._foreach_lerp_.Scalar, 2, False, lambda s: (0.1 * s,)),
    "mul_ by a number": (aten._foreach_mul_.Scalar, 1, False, lambda s: (0.999 - s / 100,)),
    "mul_ by an int": (aten._foreach_mul_.Scalar, 1, False, lambda s: (s,)),
    "addcmul_ of one list twice": (aten._foreach_addcmul_.Scalar, 3, False, lambda s: (1e-3 * s,)),
    "sqrt": (aten._foreach_sqrt.default, 1, True, lambda s: ()),
    "div_ by a number list": (aten._foreach_div_.ScalarList, 1, True, lambda s: (_numbers(s),)),
    "add_ a number": (aten._foreach_add_.Scalar, 1, False, lambda s: (1e-8 * s,)),
    "addcdiv_ by a number list": (aten._foreach_addcdiv_.ScalarList, 3, True, lambda s: (_numbers(s),)),
    "add_ a list, alpha": (aten._foreach_add_.List, 2, False, lambda s: ({"alpha": -0.1 * s},)),
    "add_ a list": (aten._foreach_add_.List, 2, False, lambda s: ()),
    "add a list, alpha": (aten._foreach_add.List, 2, False, lambda s: ({"alpha": 0.01 * s},)),
    "sub_ a list, int alpha": (aten._foreach_sub_.List, 2, False, lambda s: ({"alpha": s + 1},)),
    "maximum": (aten._foreach_maximum.List, 2, False, lambda s: ()),
    "lerp_ by a list": (aten._foreach_lerp_.List, 3, False, lambda s: ()),
}


def _call(op, lists, extra):
    kwargs = extra[-1] if extra and isinstance(extra[-1], dict) else {}
    args = extra[:-1] if kwargs else extra
    if op._schema.name.endswith("::_foreach_addcmul_"):  # tensor1 and tensor2 the same list
        lists = [lists[0], lists[1], lists[1]]
    return op(*lists, *args, **kwargs)


@pytest.mark.parametrize("dtypes", [(torch.float32,), (torch.float32, torch.bfloat16)], ids=["f32", "f32 and bf16"])
@pytest.mark.parametrize("name", list(CASES))
def test_a_replay_leaves_what_the_python_kernel_leaves(name, dtypes):
    op, count, positive, extra = CASES[name]
    mine, twin = _lists(len(name), count, dtypes, positive)
    slow = foreach_replay.STATS.slow
    for step in range(1, 4):
        got = _call(op, mine, extra(step))
        want = _call(_python(op), twin, extra(step))
        for a, b in zip([t for lst in mine for t in lst], [t for lst in twin for t in lst]):
            _same(a, b)
            assert a._version == b._version and _box(a).writes == _box(b).writes
        if want is None:
            assert got is None
        else:  # fresh tensors on storages of their own
            assert len(got) == len(want)
            for a, b in zip(got, want):
                _same(a, b)
                assert _box(a).logical is None and _box(a).array is not _box(mine[0][0]).array
    assert foreach_replay.STATS.slow == slow + 4  # learned at step 1, replayed at 2 and 3; the twins' three


def test_in_place_results_donate_the_buffers_where_the_python_kernel_does(monkeypatch):
    """The program donating the selfs' buffers where nothing but their boxes holds their arrays, the one
    keeping them where a reference is held elsewhere, as _run decides at every call."""
    from jaxdev.ops import foreach

    program, donated = foreach._program, []

    def watched(*args):
        run = program(*args)
        return lambda *values: donated.append(args[-1]) or run(*values)

    monkeypatch.setattr(foreach, "_program", watched)
    mine, twin = ([torch.full((7, 11), 1.0 + i, device="jax") for i in range(3)] for _ in range(2))  # a new key
    aten._foreach_mul_.Scalar(mine, 2.0)  # learned (the programs it learns are watched)
    _python(aten._foreach_mul_.Scalar)(twin, 2.0)
    for held in (False, True, False):
        kept = [_box(mine[1]).array, _box(twin[1]).array] if held else None
        donated.clear()
        aten._foreach_mul_.Scalar(mine, 3.0)
        _python(aten._foreach_mul_.Scalar)(twin, 3.0)
        assert donated == [not held] * 2
        if held:
            assert not any(a.is_deleted() for a in kept)
        del kept
    for a, b in zip(mine, twin):
        _same(a, b)


@pytest.mark.parametrize("how", ["self twice", "other on self", "bool number"])
def test_what_the_loop_runs_is_never_replayed(how):
    (mine, other), (twin, twin_other) = _lists(2, 2)
    slow = foreach_replay.STATS.slow
    for _ in range(3):
        if how == "self twice":
            aten._foreach_add_.List(mine + mine[:1], other + other[:1], alpha=0.5)
            _python(aten._foreach_add_.List)(twin + twin[:1], twin_other + twin_other[:1], alpha=0.5)
        elif how == "other on self":
            aten._foreach_add_.List(mine, mine)
            _python(aten._foreach_add_.List)(twin, twin)
        else:
            aten._foreach_mul_.Scalar(mine, True)
            _python(aten._foreach_mul_.Scalar)(twin, True)
        for a, b in zip(mine, twin):
            _same(a, b)
            assert a._version == b._version
    assert foreach_replay.STATS.slow == slow + 6


def test_inference_tensors_written_outside_inference_mode_raise_every_time():
    with torch.inference_mode():
        xs = [torch.ones(3, device="jax") for _ in range(2)]
        aten._foreach_add_.Scalar(xs, 1.0)
        aten._foreach_add_.Scalar(xs, 1.0)  # replayed inside inference mode
    assert torch.equal(xs[0].cpu(), torch.full((3,), 3.0))
    for _ in range(2):
        with pytest.raises(RuntimeError, match=r"[Ii]nplace update to inference tensor"):
            aten._foreach_add_.Scalar(xs, 1.0)


def test_a_replayed_write_is_seen_by_autograd():
    x = torch.randn(4, device="jax", requires_grad=True)
    ys = [torch.randn(4, device="jax") for _ in range(2)]
    aten._foreach_mul_.Scalar(ys, 2.0)  # learned
    out = (x * ys[0]).sum()  # ys[0] saved for backward
    aten._foreach_mul_.Scalar(ys, 2.0)  # replayed: the version bump must show
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        out.backward()


def test_fused_eager_sees_every_call():
    (mine,), (twin,) = _lists(3, 1)
    with jaxdev.eager_mode("fused"):
        slow = foreach_replay.STATS.slow
        for _ in range(3):
            aten._foreach_mul_.Scalar(mine, 1.5)
        assert foreach_replay.STATS.slow == slow + 3
    for _ in range(3):
        _python(aten._foreach_mul_.Scalar)(twin, 1.5)
    for a, b in zip(mine, twin):
        _same(a, b)


@pytest.mark.parametrize(
    "make",
    [
        lambda ps: torch.optim.AdamW(ps, lr=1e-2, weight_decay=0.1, foreach=True),
        lambda ps: torch.optim.Adam(ps, lr=1e-2, foreach=True, amsgrad=True),
        lambda ps: torch.optim.SGD(ps, lr=0.1, momentum=0.9, foreach=True),
        lambda ps: torch.optim.SGD(ps, lr=0.1, momentum=0.9, nesterov=True, weight_decay=1e-2, foreach=True),
    ],
    ids=["AdamW", "Adam amsgrad", "SGD momentum", "SGD nesterov, weight decay"],
)
def test_optimizer_steps_equal_the_python_kernels(make):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.Tanh(), torch.nn.Linear(8, 3))
    runs = []
    for replaying in (True, False):
        net = copy.deepcopy(model).to("jax")
        opt = make(list(net.parameters()))
        before = native.module.foreach_replay(replaying)
        try:
            for step in range(4):
                opt.zero_grad()
                x = torch.randn(5, 6, generator=torch.Generator().manual_seed(step)).to("jax")
                net(x).square().sum().backward()
                opt.step()
        finally:
            native.module.foreach_replay(before)
        state = [v for s in opt.state.values() for v in s.values() if isinstance(v, torch.Tensor)]
        runs.append(list(net.parameters()) + state)
    for a, b in zip(*runs):
        _same(a.detach(), b.detach())
        assert a._version == b._version
