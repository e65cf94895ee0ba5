"""Foreach ops as one program per call (jaxdev/ops/foreach.py): bit-identical to PyTorch's own loop of
per-tensor ops on the jax device, close to CPU, in-place results in donated buffers, and every case
the program does not take (mixed dtypes, aliasing, CPU tensors, bad lists) left to the loop, which
behaves as on CPU."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from jaxdev_testing import JAX, foreach_in_python, on_both

import jaxdev
from jaxdev import tensor
from jaxdev.ops import foreach

aten = torch.ops.aten
CPU_KEYS = torch._C.DispatchKeySet(torch._C.DispatchKey.CPU)
FLOATS = [torch.float32, torch.float64, torch.bfloat16, torch.float16]
SHAPES = [(3, 4), (5,), (2, 3, 2), ()]


@pytest.fixture
def ran(monkeypatch):
    """The calls the one-program path took (its results), in order; None where it handed over to the loop.
    The native replay of a key met before (kit/foreach_replay.py) is off meanwhile: every call runs _run."""
    taken = []
    real = foreach._run

    def spy(*args, **kwargs):
        out = real(*args, **kwargs)
        taken.append(out is not None)
        return out

    monkeypatch.setattr(foreach, "_run", spy)
    with foreach_in_python():
        yield taken


def tensors(dtype, seed, positive=False, shapes=SHAPES):
    g = torch.Generator().manual_seed(seed)
    out = [torch.randn(s, generator=g) for s in shapes]
    return [(t.abs() + 0.5 if positive else t).to(dtype) for t in out]


def loop(op, *args, **kwargs):
    """PyTorch's own loop of per-tensor ops (CompositeExplicitAutograd's kernel), on whatever device."""
    return op._handle.redispatch_boxed(CPU_KEYS, *args, **kwargs)


# (op, argument maker(dtype) -> (self list, other args), kwargs)
CASES = {
    "add_.List alpha": (aten._foreach_add_.List, lambda d: ([tensors(d, 1)], [tensors(d, 2)]), {"alpha": -0.37}),
    "add_.List": (aten._foreach_add_.List, lambda d: ([tensors(d, 1)], [tensors(d, 2)]), {}),
    "add.Scalar": (aten._foreach_add.Scalar, lambda d: ([tensors(d, 1)], [0.1]), {}),
    "add_.ScalarList": (aten._foreach_add_.ScalarList, lambda d: ([tensors(d, 1)], [[1, -2.5, 3e-3, 7]]), {}),
    "add_.Tensor": (aten._foreach_add_.Tensor, lambda d: ([tensors(d, 1)], [torch.tensor(0.3).to(d)]), {"alpha": 2}),
    "sub_.List alpha": (aten._foreach_sub_.List, lambda d: ([tensors(d, 1)], [tensors(d, 2)]), {"alpha": 0.5}),
    "sub.ScalarList": (aten._foreach_sub.ScalarList, lambda d: ([tensors(d, 1)], [[1, 2, 3, 4.5]]), {}),
    "mul_.Scalar": (aten._foreach_mul_.Scalar, lambda d: ([tensors(d, 1)], [0.999]), {}),
    "mul_.Tensor": (aten._foreach_mul_.Tensor, lambda d: ([tensors(d, 1)], [torch.tensor(0.77).to(d)]), {}),
    "mul.List": (aten._foreach_mul.List, lambda d: ([tensors(d, 1)], [tensors(d, 2)]), {}),
    "div_.ScalarList": (aten._foreach_div_.ScalarList, lambda d: ([tensors(d, 1)], [[0.3, 7, 1e-3, -2.0]]), {}),
    "div.List": (aten._foreach_div.List, lambda d: ([tensors(d, 1)], [tensors(d, 2, positive=True)]), {}),
    "maximum_.List": (aten._foreach_maximum_.List, lambda d: ([tensors(d, 1)], [tensors(d, 2)]), {}),
    "minimum.List": (aten._foreach_minimum.List, lambda d: ([tensors(d, 1)], [tensors(d, 2)]), {}),
    "lerp_.Scalar": (aten._foreach_lerp_.Scalar, lambda d: ([tensors(d, 1)], [tensors(d, 2), 0.1]), {}),
    "lerp.List": (aten._foreach_lerp.List, lambda d: ([tensors(d, 1)], [tensors(d, 2), tensors(d, 3)]), {}),
    "lerp_.ScalarList": (
        aten._foreach_lerp_.ScalarList,
        lambda d: ([tensors(d, 1)], [tensors(d, 2), [0.1, 0.9, 0.5, 2]]),
        {},
    ),
    "addcmul_.Scalar": (
        aten._foreach_addcmul_.Scalar,
        lambda d: ([tensors(d, 1)], [tensors(d, 2), tensors(d, 2), 0.001]),
        {},
    ),
    "addcdiv_.ScalarList": (
        aten._foreach_addcdiv_.ScalarList,
        lambda d: ([tensors(d, 1)], [tensors(d, 2), tensors(d, 3, positive=True), [-0.1, -1e-3, 3, 0.5]]),
        {},
    ),
    "addcdiv.Scalar": (
        aten._foreach_addcdiv.Scalar,
        lambda d: ([tensors(d, 1)], [tensors(d, 2), tensors(d, 3, positive=True), 2]),
        {},
    ),
    "sqrt": (aten._foreach_sqrt.default, lambda d: ([tensors(d, 1, positive=True)], []), {}),
    "exp_": (aten._foreach_exp_.default, lambda d: ([tensors(d, 1)], []), {}),
    "neg_": (aten._foreach_neg_.default, lambda d: ([tensors(d, 1)], []), {}),
    "reciprocal": (aten._foreach_reciprocal.default, lambda d: ([tensors(d, 1, positive=True)], []), {}),
    "sigmoid_": (aten._foreach_sigmoid_.default, lambda d: ([tensors(d, 1)], []), {}),
}


def _to(value, device):
    if isinstance(value, torch.Tensor):
        return value.to(device)
    if isinstance(value, list) and value and isinstance(value[0], torch.Tensor):
        return [t.to(device) for t in value]
    return value


def _outputs(op, selfs, result):
    return list(result) if result is not None else list(selfs)


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
@pytest.mark.parametrize("case", list(CASES))
def test_one_program_is_the_loop_bit_for_bit_and_close_to_cpu(case, dtype, ran):
    op, make, kwargs = CASES[case]
    (selfs,), others = make(dtype)
    cpu_selfs = [t.clone() for t in selfs]
    expected = _outputs(op, cpu_selfs, op(cpu_selfs, *others, **kwargs))

    looped_selfs = [t.to(JAX) for t in selfs]
    looped = _outputs(op, looped_selfs, loop(op, looped_selfs, *[_to(o, JAX) for o in others], **kwargs))
    one_selfs = [t.to(JAX) for t in selfs]
    ran.clear()
    one = _outputs(op, one_selfs, op(one_selfs, *[_to(o, JAX) for o in others], **kwargs))
    assert ran == [True], "the one-program path did not take the call"

    tol = {torch.float32: 2e-6, torch.float64: 1e-12, torch.bfloat16: 1e-2, torch.float16: 2e-3}[dtype]
    for a, b, c in zip(one, looped, expected):
        assert a.device == JAX and a.dtype == dtype and a.shape == c.shape
        torch.testing.assert_close(a.cpu(), b.cpu(), rtol=0, atol=0, equal_nan=True)  # bit for bit
        torch.testing.assert_close(a.cpu(), c, rtol=tol, atol=tol, equal_nan=True)


@pytest.mark.per_op_mode("per-op buffer donation")
def test_in_place_results_take_the_old_buffers_unless_something_else_holds_them(ran):
    # Made on the device: a buffer copied in from host memory may be the host's, which XLA copies from.
    xs = [torch.randn(64, 64, device=JAX) for _ in range(3)]
    ys = [torch.randn(64, 64, device=JAX) for _ in range(3)]
    before = [buffer(x) for x in xs]
    torch._foreach_add_(xs, ys, alpha=0.5)
    assert ran == [True] and [buffer(x) for x in xs] == before  # written where the old values were

    exported = jaxdev.to_jax(xs[1])  # handed out: never donated
    kept = exported.copy()
    torch._foreach_mul_(xs, 2.0)
    assert ran == [True, True] and not exported.is_deleted()
    assert torch.equal(host(exported), host(kept))
    torch.testing.assert_close(xs[1].cpu(), host(kept) * 2)


def buffer(t) -> int:
    return tensor.box_of(t)._array.unsafe_buffer_pointer()


def host(a) -> torch.Tensor:
    return torch.from_numpy(np.array(a))


@pytest.mark.per_op_mode("per-op program cache counts")
def test_a_changing_scalar_list_does_not_compile_a_program_per_call(ran):
    """Adam's step sizes change every step: they are the program's arguments, not its constants."""
    xs = [torch.randn(8).to(JAX) for _ in range(4)]
    ds = [torch.rand(8).add(1).to(JAX) for _ in range(4)]
    cpu = [x.cpu() for x in xs]
    programs = foreach._program.cache_info().currsize
    for step in range(1, 6):
        sizes = [-0.01 / (1 - 0.9**step) * (i + 1) for i in range(4)]
        torch._foreach_addcdiv_(xs, xs, ds, sizes)
        torch._foreach_addcdiv_(cpu, cpu, [d.cpu() for d in ds], sizes)
    assert ran == [False] * 5  # tensor1 is self's own list: the loop's order, so the loop
    # Without the alias, one program per call, and the same program every step:
    ran.clear()
    ms = [torch.randn(8).to(JAX) for _ in range(4)]
    for step in range(1, 6):
        sizes = [-0.01 / (1 - 0.9**step) * (i + 1) for i in range(4)]
        torch._foreach_addcdiv_(xs, ms, ds, sizes)
        torch._foreach_addcdiv_(cpu, [m.cpu() for m in ms], [d.cpu() for d in ds], sizes)
    assert ran == [True] * 5
    assert foreach._program.cache_info().currsize <= programs + 1
    for x, c in zip(xs, cpu):
        torch.testing.assert_close(x.cpu(), c)


@pytest.mark.per_op_mode("which path per-op mode takes (the order of results is checked against CPU in any mode)")
def test_self_aliasing_an_argument_takes_the_loop_and_its_order(ran):
    def scenario(device):
        a = torch.arange(4.0, device=device)
        b = torch.arange(4.0, device=device) * 10
        torch._foreach_add_([a, b], [b, a])  # the second add sees the first one's result, as on CPU
        return a, b

    on_both(scenario)
    assert ran == [False]


@pytest.mark.parametrize(
    "scenario",
    [
        lambda d: torch._foreach_add_([torch.ones(2, device=d)], [torch.ones(2, device=d)] * 2),
        lambda d: torch._foreach_add_([], []),
        lambda d: torch._foreach_mul_([torch.ones(2, device=d)], [1.0, 2.0]),
        lambda d: torch._foreach_add_([torch.ones(2, device=d)], [torch.ones(3, device=d)]),
        lambda d: torch._foreach_add_([torch.ones(2, device=d)], [torch.ones(2, dtype=torch.float64, device=d)]),
        lambda d: torch._foreach_add([torch.ones(2, dtype=torch.int64, device=d)], 3),
        lambda d: torch._foreach_add_([torch.ones(2, device=d)], [torch.ones(2, device=d)], alpha=True),
        lambda d: torch._foreach_mul([torch.ones(2, device=d), torch.ones(3, dtype=torch.float64, device=d)], 1j),
        lambda d: torch._foreach_div([torch.ones(2, device=d)], [torch.zeros(2, device=d)]),
        lambda d: torch._foreach_add([torch.ones(2, device=d)], 2**60),
        lambda d: torch._foreach_mul_([torch.ones(2, device=d)], torch.tensor([1.0, 2.0], device=d)),
    ],
    ids=[
        "unequal lists",
        "empty",
        "scalar list too long",
        "shapes differ",
        "dtypes differ",
        "integers",
        "bool alpha",
        "complex scalar",
        "division by zero",
        "huge int",
        "non-scalar tensor",
    ],
)
def test_what_the_program_does_not_take_the_loop_does_as_on_cpu(scenario):
    on_both(scenario)


def test_a_cpu_tensor_in_the_lists_is_refused_as_pytorch_refuses_it():
    xs = [torch.ones(2, device=JAX)]
    with pytest.raises(RuntimeError):
        torch._foreach_add_(xs, [torch.ones(2)])


def test_adam_and_sgd_step_as_on_cpu_and_as_the_loop(monkeypatch):
    def train(device, opt_cls, **kw):
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.Tanh(), torch.nn.Linear(8, 3)).to(device)
        opt = opt_cls(model.parameters(), foreach=True, **kw)
        sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.7)  # a new lr (alpha) every step
        x, y = torch.randn(16, 6).to(device), torch.randn(16, 3).to(device)
        for _ in range(4):
            opt.zero_grad()
            torch.nn.functional.mse_loss(model(x), y).backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 0.5)
            opt.step()
            sched.step()
        return [p.detach().cpu() for p in model.parameters()]

    for opt_cls, kw in [
        (torch.optim.Adam, {"lr": 0.01}),
        (torch.optim.AdamW, {"lr": 0.01, "weight_decay": 0.1}),
        (torch.optim.SGD, {"lr": 0.05, "momentum": 0.9, "weight_decay": 1e-3, "nesterov": True}),
    ]:
        one = train(JAX, opt_cls, **kw)
        cpu = train("cpu", opt_cls, **kw)
        with monkeypatch.context() as m, foreach_in_python():
            m.setattr(foreach, "_run", lambda *a, **k: None)  # PyTorch's loop, per tensor
            looped = train(JAX, opt_cls, **kw)
        for a, b, c in zip(one, looped, cpu):
            if jaxdev.get_eager_mode() == "fused":  # XLA may fuse across ops there: the last bit may differ
                torch.testing.assert_close(a, b, rtol=1e-6, atol=1e-7, msg=opt_cls.__name__)
            else:
                assert torch.equal(a, b), opt_cls.__name__
            torch.testing.assert_close(a, c, rtol=1e-5, atol=1e-5)


def test_gradients_flow_through_functional_foreach_ops():
    def scenario(device):
        xs = [torch.randn(3, generator=torch.Generator().manual_seed(i)).to(device).requires_grad_() for i in range(2)]
        ys = [torch.randn(3, generator=torch.Generator().manual_seed(9 + i)).to(device) for i in range(2)]
        out = torch._foreach_mul(torch._foreach_add(xs, ys, alpha=0.5), 3.0)
        sum(o.sum() for o in torch._foreach_sqrt(torch._foreach_mul(out, out))).backward()
        return [x.grad for x in xs]

    on_both(scenario, rtol=1e-6, atol=1e-6)


def test_zero_(ran):
    def scenario(device):
        xs = [torch.randn(3).to(device), torch.randn(2, 2).to(device, torch.bfloat16)]
        torch._foreach_zero_(xs)
        return xs

    on_both(scenario)


def test_inside_torch_compile_the_loop_traces():
    def fn(xs, ys):
        return torch._foreach_add(xs, ys, alpha=2.0)

    xs = [torch.randn(4), torch.randn(2, 3)]
    ys = [torch.randn(4), torch.randn(2, 3)]
    expected = fn(xs, ys)
    got = torch.compile(fn, backend="jax")([x.to(JAX) for x in xs], [y.to(JAX) for y in ys])
    for g, e in zip(got, expected):
        torch.testing.assert_close(g.cpu(), e)


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
@pytest.mark.parametrize("ord", [2, 2.0, 1, float("inf"), float("-inf"), 0, 3.5], ids=repr)
def test_foreach_norm_is_the_loop_bit_for_bit_and_close_to_cpu(ord, dtype):
    xs = tensors(dtype, 5, shapes=[(30, 40), (7,), (), (3, 2, 5)])
    expected = torch._foreach_norm(xs, ord)
    on_jax = [x.to(JAX) for x in xs]
    looped = loop(aten._foreach_norm.Scalar, on_jax, ord)
    one = torch._foreach_norm(on_jax, ord)
    for a, b, c in zip(one, looped, expected):
        assert a.device == JAX and a.dtype == c.dtype and a.shape == c.shape
        torch.testing.assert_close(a.cpu(), b.cpu(), rtol=0, atol=0)
        torch.testing.assert_close(a.cpu(), c, rtol=2e-6 if dtype != torch.float64 else 1e-12, atol=1e-3)


@pytest.mark.parametrize(
    "scenario",
    [
        lambda d: torch._foreach_norm([torch.ones(2, dtype=torch.int64, device=d)]),
        lambda d: torch._foreach_norm([torch.ones(3, device=d)], 2, dtype=torch.float64),
        lambda d: torch._foreach_norm([], 2),
        lambda d: torch._foreach_norm([torch.ones(3, dtype=torch.complex64, device=d)], 2),
    ],
    ids=["integers", "dtype given", "empty", "complex"],
)
def test_foreach_norm_cases_the_program_leaves_to_the_loop(scenario):
    on_both(scenario)


def test_clip_grad_norm_as_on_cpu():
    def scenario(device):
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(5, 7), torch.nn.Linear(7, 2)).to(device)
        model(torch.randn(4, 5).to(device)).square().sum().backward()
        total = torch.nn.utils.clip_grad_norm_(model.parameters(), 0.1)
        return [total] + [p.grad for p in model.parameters()]

    on_both(scenario, rtol=1e-6, atol=1e-7)


def test_gradients_flow_through_foreach_norm():
    def scenario(device):
        xs = [torch.randn(4, generator=torch.Generator().manual_seed(i)).to(device).requires_grad_() for i in range(3)]
        sum(torch._foreach_norm(xs, 2)).backward()
        return [x.grad for x in xs]

    on_both(scenario, rtol=1e-6, atol=1e-7)


def test_in_place_foreach_bumps_versions_so_autograd_sees_the_change(ran):
    """A saved tensor changed in place must fail backward, as the loop's per-tensor ops make it."""

    def scenario(device):
        w = torch.ones(3, device=device, requires_grad=True)
        y = (w * w).sum()
        with torch.no_grad():
            torch._foreach_add_([w], 1.0)
        y.backward()

    on_both(scenario, match="modified by an inplace operation")
    versions = []
    xs = [torch.randn(3, device=JAX)]
    for op in (lambda: torch._foreach_add_(xs, 1.0), lambda: torch._foreach_zero_(xs), lambda: torch._foreach_exp_(xs)):
        op()
        versions.append(xs[0]._version)
    assert versions == [1, 2, 3]


def test_inference_tensors_outside_inference_mode_are_refused_as_on_cpu():
    def scenario(device, op):
        with torch.inference_mode():
            xs = [torch.ones(3, device=device)]
        op(xs)

    for op in (lambda xs: torch._foreach_mul_(xs, 2.0), torch._foreach_zero_):
        on_both(lambda d, op=op: scenario(d, op))
