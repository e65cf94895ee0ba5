"""Fused eager mode on whole models: a ResNet-style training step (BatchNorm's running statistics, in-place
ReLU, `out += identity`, views) gives per-op mode's losses and state, and the size bound cuts a loop that
never flushes at a stable point, so it replays a bounded set of programs."""

from __future__ import annotations

import warnings

import pytest
import torch
from torch import nn

import jaxdev
from jaxdev.fused import recorder
from jaxdev.fused.program import FusedGraphWarning

STATS = recorder.STATS


pytestmark = pytest.mark.usefixtures("per_op_after")


class Block(nn.Module):
    """torchvision's BasicBlock, with a strided 1x1 conv + BatchNorm shortcut."""

    def __init__(self, cin: int, cout: int, stride: int):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        out += self.down(x)
        return self.relu(out)


def _resnet():
    torch.manual_seed(0)
    return nn.Sequential(
        nn.Conv2d(3, 4, 3, 1, 1, bias=False),
        nn.BatchNorm2d(4),
        nn.ReLU(inplace=True),
        nn.MaxPool2d(3, 2, 1),
        Block(4, 8, 2),
        nn.AdaptiveAvgPool2d((1, 1)),
        nn.Flatten(),
        nn.Linear(8, 5),
    )


def _train_resnet(mode: str, steps: int = 5):
    model = _resnet().to("jax")
    torch.manual_seed(1)
    x, y = torch.randn(4, 3, 8, 8).to("jax"), torch.randint(0, 5, (4,)).to("jax")
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)
    losses = []
    with jaxdev.eager_mode(mode):
        for _ in range(steps):
            opt.zero_grad(set_to_none=True)
            loss = nn.functional.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            losses.append(loss.item())
    with jaxdev.eager_mode("op"):  # read back after the loop, in the mode a JAXDEV_EAGER=fused run leaves outside it
        return losses, {k: v.detach().cpu() for k, v in model.state_dict().items()}


def test_resnet_training_matches_per_op_mode():
    losses, state = _train_resnet("op")
    STATS.reset()
    with warnings.catch_warnings():
        warnings.simplefilter("error", FusedGraphWarning)  # every segment ran as one program
        fused_losses, fused_state = _train_resnet("fused")
    assert fused_losses == pytest.approx(losses, rel=1e-5, abs=1e-6)
    assert losses[-1] < losses[0]  # it trains
    for name, value in state.items():  # weights, running means and variances, num_batches_tracked
        torch.testing.assert_close(fused_state[name], value, rtol=1e-5, atol=1e-6, msg=name)
    assert fused_state["1.num_batches_tracked"].item() == 5
    # forward, backward and SGD recorded; only the loss's .item() ran eagerly
    assert {name for name, _ in STATS.eager} == {"aten::_local_scalar_dense"}
    assert STATS.programs <= 3  # the first step, the second (momentum buffers exist), nothing after


def _loop_programs(monkeypatch, limit: int, iterations: int) -> list[int]:
    """A loop that never reads a value nor calls optimizer.step(): only the size bound flushes it. Returns
    the programs built during each iteration."""
    monkeypatch.setattr(recorder, "MAX_OPS", limit)
    w = torch.randn(6, 6).to("jax")
    x = torch.randn(6, 6).to("jax")
    built = []
    with jaxdev.eager_mode("fused"):
        for _ in range(iterations):
            before = STATS.programs
            h = x
            for _ in range(6):  # 27 ops an iteration (6 x mm, tanh, mul, add; t, mul, sub_): odd, the bound 64
                h = torch.tanh(h @ w) * 0.5 + x
            w.sub_(h.t() * 1e-3)
            built.append(STATS.programs - before)
    torch.jax.synchronize()
    return built


def test_the_size_bound_cuts_a_loop_at_a_stable_point(monkeypatch):
    """A segment cut by the bound at a different op of the loop each time would be a new program each
    time (a 27-op loop and a bound of 64 make 27 different cut points: 26 programs in 200 iterations
    before): the cut moves to an op where an earlier cut fell, so the loop settles on few programs (7)
    and then only replays them."""
    STATS.reset()
    built = _loop_programs(monkeypatch, limit=64, iterations=200)
    assert sum(built[100:]) == 0  # settled
    assert sum(built) <= 10
    # and the values are per-op mode's
    torch.manual_seed(3)
    fused_w = torch.randn(6, 6).to("jax")
    torch.manual_seed(3)
    op_w = torch.randn(6, 6).to("jax")
    x = torch.randn(6, 6).to("jax")
    for mode, w in (("fused", fused_w), ("op", op_w)):
        with jaxdev.eager_mode(mode):
            h = x
            for _ in range(40):
                h = torch.tanh(h @ w) * 0.5 + x
                w.sub_(h.t() * 1e-3)
    torch.testing.assert_close(fused_w.cpu(), op_w.cpu(), rtol=1e-5, atol=1e-6)


def test_lifted_numbers_reach_the_program_and_a_failed_check_reruns_with_them():
    """A segment's lifted numbers (a foreach op's scalar) go to its program as host data beside a stand-in
    tensor; each step's new scalar gives the per-op values from one program, and a deferred value check
    that fails in such a segment reruns it with those numbers and raises CPU's exception."""
    ws = [torch.ones(3).to("jax") for _ in range(2)]
    x = torch.arange(5.0).to("jax")
    STATS.reset()
    with jaxdev.eager_mode("fused"):
        for step in range(4):
            if step == 2:  # the first call, then its donating form: then only replays
                built = STATS.programs
            torch._foreach_add_(ws, 0.1 * (step + 1))
            ws[0].cpu()
        assert STATS.programs == built
        torch._foreach_add_(ws, 0.5)
        y = x[torch.tensor([7]).to("jax")]
        with pytest.raises(IndexError, match="index 7 is out of bounds for dimension 0 with size 5"):
            y.cpu()
    expected = 1 + 0.1 + 0.2 + 0.3 + 0.4 + 0.5
    torch.testing.assert_close(ws[1].cpu(), torch.full((3,), expected), rtol=1e-6, atol=1e-6)
