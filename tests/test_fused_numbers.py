"""Fused eager's lifted numbers (jaxdev/fused/numbers.py): a single-tensor optimizer's step sizes, which
change every step, are program data, so its steps replay one program as the foreach ones do; floats
the kernels must read in Python (beside integer tensors, past float16's range) stay in the key."""

from __future__ import annotations

import warnings

import pytest
import torch
from torch import nn

import jaxdev
from jaxdev.fused import recorder

STATS = recorder.STATS
optim = torch.optim


pytestmark = pytest.mark.usefixtures("per_op_after")


# name -> (optimizer on the parameters, steps until no new program: a new step structure compiles its
# program, then its donating twin at the next step)
OPTIMIZERS = {
    "adam": (lambda ps, cap: optim.Adam(ps, lr=0.01, foreach=False, capturable=cap), 2),
    "adamw-amsgrad": (lambda ps, cap: optim.AdamW(ps, lr=0.01, amsgrad=True, foreach=False, capturable=cap), 2),
    "nadam": (lambda ps, cap: optim.NAdam(ps, lr=0.01, foreach=False, capturable=cap), 2),
    "radam": (lambda ps, cap: optim.RAdam(ps, lr=0.01, foreach=False, capturable=cap), 7),  # rectified from step 6
    "adamax": (lambda ps, cap: optim.Adamax(ps, lr=0.01, foreach=False, capturable=cap), 2),
    "rmsprop": (
        lambda ps, cap: optim.RMSprop(ps, lr=0.01, momentum=0.9, centered=True, foreach=False, capturable=cap),
        2,
    ),
    "adagrad": (lambda ps, cap: optim.Adagrad(ps, lr=0.01, lr_decay=0.01, foreach=False), 2),  # clr changes
    "sgd": (lambda ps, cap: optim.SGD(ps, lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.01, foreach=False), 3),
}
CASES = [(name, False) for name in OPTIMIZERS] + [("adam", True), ("nadam", True), ("radam", True)]


def _train(name: str, capturable: bool, device: str, mode: str | None, steps: int, schedule: bool = False):
    """Two Linear layers trained `steps` steps: the parameters, the programs built at each step, the ops
    run eagerly meanwhile (by op and reason)."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 4)).to(device)
    x, y = torch.randn(5, 8).to(device), torch.randn(5, 4).to(device)
    opt = OPTIMIZERS[name][0](list(model.parameters()), capturable)
    scheduler = optim.lr_scheduler.ExponentialLR(opt, gamma=0.9) if schedule else None  # lr: ever new numbers
    built, eager = [], dict(STATS.eager)
    with jaxdev.eager_mode(mode or "op"):
        for _ in range(steps):
            before = STATS.programs
            opt.zero_grad()
            ((model(x) - y) ** 2).mean().backward()
            opt.step()
            if scheduler is not None:
                scheduler.step()
            if device == "jax":
                torch.jax.synchronize()
            built.append(STATS.programs - before)
        eager = {k: n - eager.get(k, 0) for k, n in STATS.eager.items() if n != eager.get(k, 0)}
    return [p.detach().cpu() for p in model.parameters()], built, eager


@pytest.mark.parametrize(("name", "capturable"), CASES, ids=[f"{n}{'-capturable' if c else ''}" for n, c in CASES])
def test_single_tensor_steps_replay_one_program(name, capturable):
    """After the settling steps, a step builds no program, runs no op eagerly (the storm guard took
    Adam's addcdiv_ and div before), and the parameters are per-op mode's and CPU's."""
    settle = OPTIMIZERS[name][1]
    steps = settle + 3
    expected, _, _ = _train(name, capturable, "jax", "op", steps)
    cpu, _, _ = _train(name, False, "cpu", None, steps)  # (CPU has no capturable step)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no storm guard's note, every segment one program
        got, built, eager = _train(name, capturable, "jax", "fused", steps)
    assert built[settle:] == [0] * 3, built
    assert not eager, eager
    for g, e, c in zip(got, expected, cpu):
        # not bit for bit: XLA fuses an op's multiply with the next op's add into one rounding (as for
        # foreach steps); the lifted numbers themselves change no bit (checked: same params before/after)
        torch.testing.assert_close(g, e, rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(g, c, rtol=1e-4, atol=1e-5)


def test_a_changing_learning_rate_replays():
    """SGD under a schedule: add_'s alpha=-lr is new every step, and a keyword lifted like value=."""
    expected, _, _ = _train("sgd", False, "jax", "op", 6, schedule=True)
    got, built, eager = _train("sgd", False, "jax", "fused", 6, schedule=True)
    assert built[3:] == [0] * 3, built
    assert not eager, eager
    for g, e in zip(got, expected):
        torch.testing.assert_close(g, e, rtol=1e-5, atol=1e-6)


def test_a_changing_learning_rate_replays_foreach():
    """Foreach SGD (torch.optim's default on jax) under a schedule: `_foreach_add_(params, grads,
    alpha=-lr)` lifts its alpha too. It had stayed in the key: a new program each step, then the storm
    guard's warning and the op run op by op from the fourth step."""

    def train(mode, steps=6):
        torch.manual_seed(0)
        model = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 4)).to("jax")
        x, y = torch.randn(5, 8).to("jax"), torch.randn(5, 4).to("jax")
        opt = optim.SGD(model.parameters(), lr=0.1, momentum=0.9, foreach=True)
        scheduler = optim.lr_scheduler.ExponentialLR(opt, gamma=0.9)
        built, eager = [], dict(STATS.eager)
        with jaxdev.eager_mode(mode):
            for _ in range(steps):
                before = STATS.programs
                opt.zero_grad()
                ((model(x) - y) ** 2).mean().backward()
                opt.step()
                scheduler.step()
                torch.jax.synchronize()
                built.append(STATS.programs - before)
        eager = {k: n - eager.get(k, 0) for k, n in STATS.eager.items() if n != eager.get(k, 0)}
        return [p.detach().cpu() for p in model.parameters()], built, eager

    expected, _, _ = train("op")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no storm guard's note
        got, built, eager = train("fused")
    assert built[2:] == [0] * 4, built
    assert not eager, eager
    for g, e in zip(got, expected):
        torch.testing.assert_close(g, e, rtol=1e-5, atol=1e-6)


def test_numbers_beside_integer_tensors_stay_in_the_key():
    """An integer tensor's float operand changes its result's dtype and addcmul truncates an integer's
    value= in Python: kept constants, the results are CPU's."""
    n = torch.arange(6, device="jax")
    with jaxdev.eager_mode("fused"):
        for step in range(3):
            got = [n.add(step + 0.5), n * (step + 1.5), torch.addcmul(n, n, n, value=step + 1.9)]
            want = [
                n.cpu().add(step + 0.5),
                n.cpu() * (step + 1.5),
                torch.addcmul(n.cpu(), n.cpu(), n.cpu(), value=step + 1.9),
            ]
            for g, w in zip(got, want):
                assert g.dtype == w.dtype
                torch.testing.assert_close(g.cpu(), w)


def test_a_number_past_half_range_is_checked_at_the_call():
    """add_'s alpha must fit a half tensor's dtype (c10's checked conversion): a lifted alpha would skip
    that check, so a float past float16's range stays in the key and the call raises CPU's error."""
    h, g = torch.ones(4, dtype=torch.float16, device="jax"), torch.ones(4, dtype=torch.float16, device="jax")
    with jaxdev.eager_mode("fused"):
        for step in range(3):
            h.add_(g, alpha=0.5 + step)  # lifted: the trie expects add_ here
        with pytest.raises(RuntimeError, match="without overflow"):
            h.add_(g, alpha=1e5)
        torch.testing.assert_close(h.cpu(), torch.full((4,), 1 + 0.5 + 1.5 + 2.5, dtype=torch.float16))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.float16])
def test_lifted_numbers_keep_the_arithmetic(dtype):
    """Lifted numbers reach a kernel as weakly typed traced scalars, as jit gives a Python float to its
    body in per-op mode: a float32 tensor's arithmetic stays float32 (a strong float64 would promote
    `a + b * alpha`), a half's in its opmath, so each op's bits are per-op mode's."""
    x, y = (torch.randn(256, device="jax").to(dtype) for _ in range(2))
    d = y.abs() + 1
    calls = [
        lambda k: x.add(y, alpha=0.1 * k),
        lambda k: x.sub(y, alpha=0.3 * k),
        lambda k: x + 0.2 * k,
        lambda k: x - 0.6 * k,
        lambda k: x * (1.7 * k),
        lambda k: x / (0.7 * k),
        lambda k: torch.ops.aten.mul.Scalar(x, 0.9 * k),
        lambda k: torch.addcdiv(x, y, d, value=-0.03 * k),
        lambda k: torch.addcmul(x, y, d, value=0.01 * k),
        lambda k: torch.lerp(x, y, 0.1 * k),
    ]
    with jaxdev.eager_mode("op"):
        want = [[f(k).cpu() for f in calls] for k in range(1, 5)]
    with warnings.catch_warnings(), jaxdev.eager_mode("fused"):
        warnings.simplefilter("error")
        before = STATS.programs
        got = [[f(k).cpu() for f in calls] for k in range(1, 5)]  # each read: one op a program
        assert STATS.programs - before <= 2 * len(calls)  # k = 1 and 2 (its donating twin), then none
    for gs, ws in zip(got, want):
        for g, w in zip(gs, ws):
            assert g.dtype == dtype and torch.equal(g, w)


def test_foreach_numbers_where_the_call_is_not_one_program():
    """A foreach call with lifted numbers over a tensor that is not its whole storage (a transposed view;
    a storage over a mesh likewise) takes PyTorch's per-tensor loop inside the program, each index's
    kernel given the traced number. It had sent the tracer through the dispatcher, which refuses it as
    a Scalar: the segment ran op by op for good, with a FusedGraphWarning."""
    base = torch.randn(6, 4)
    plain, ends, denoms = torch.randn(5), [torch.randn(4, 6), torch.randn(5)], [torch.rand(4, 6) + 1, torch.rand(5) + 1]

    def steps(device, mode):
        a, b = base.clone().to(device), plain.clone().to(device)
        e, d = [t.to(device) for t in ends], [t.to(device) for t in denoms]
        made = []
        with jaxdev.eager_mode(mode or "op"):
            for k in range(1, 4):
                selfs = [a.t(), b]
                torch._foreach_mul_(selfs, 0.5 * k)
                torch._foreach_add_(selfs, [0.1 * k, -0.2 * k])
                torch._foreach_sub_(selfs, e, alpha=0.4 * k)
                torch._foreach_lerp_(selfs, e, 0.3 / k)
                torch._foreach_addcdiv_(selfs, e, d, [0.01 * k, 0.02 * k])
                made += torch._foreach_div(selfs, 1.5 * k)
                made.append(a.sum())
            torch.jax.synchronize() if device == "jax" else None
        return [a, b, *made]

    want = steps("cpu", None)
    per_op = [t.cpu() for t in steps("jax", "op")]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no FusedGraphWarning: every segment one program
        eager = dict(STATS.eager)
        got = steps("jax", "fused")
        assert {k: n for k, n in STATS.eager.items() if n != eager.get(k, 0)} == {}
    for g, p, w in zip((t.cpu() for t in got), per_op, want):
        torch.testing.assert_close(g, p)  # not bit for bit: XLA fuses one op's multiply with the next's add
        torch.testing.assert_close(g, w)
