"""Fused eager's programs update what they overwrite in place (XLA donation): an optimizer's parameters and
state, with or without value checks in the program (jaxdev/fused/program.py's _candidates)."""

from __future__ import annotations

import jax
import pytest
import torch
from torch import nn

import jaxdev
from jaxdev import tensor as tensor_module

pytestmark = pytest.mark.usefixtures("per_op_after")


def test_parameters_are_updated_in_their_own_buffers():
    """The optimizer's in-place updates give the old buffers to the program (XLA donation): the step's
    results land in memory the old values held, so no second copy of the state is alive during it.
    (Without donation the old buffers are still held while the program runs: no result can reuse one.)"""
    model = nn.Linear(64, 64).to("jax")
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    x = torch.randn(8, 64).to("jax")

    def pointers():
        state = [opt.state[p]["momentum_buffer"] for p in model.parameters()] if opt.state else []
        held = [*model.parameters(), *state, *(p.grad for p in model.parameters() if p.grad is not None)]
        return {tensor_module.box_of(t)._array.unsafe_buffer_pointer() for t in held}

    with jaxdev.eager_mode("fused"):
        for _ in range(4):  # the first steps trace, and learn what a step overwrites
            opt.zero_grad(set_to_none=False)
            model(x).square().mean().backward()
            opt.step()
        before = pointers()
        opt.zero_grad(set_to_none=False)
        model(x).square().mean().backward()
        opt.step()
        assert pointers() & before


def test_an_array_held_besides_its_box_is_left_to_its_holder():
    """A parameter's jax array held outside its box keeps its buffer through a step: the flush's call gives
    its program only the arrays their boxes alone hold (program._arrays_donated: natively where it can)."""
    model = nn.Linear(16, 16).to("jax")
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    x = torch.randn(4, 16).to("jax")

    def step():
        opt.zero_grad(set_to_none=False)
        model(x).square().mean().backward()
        opt.step()

    with jaxdev.eager_mode("fused"):
        for _ in range(4):
            step()
        held = tensor_module.box_of(model.weight)._array
        expected = model.weight.detach().cpu()
        step()
        assert not held.is_deleted()
        assert torch.equal(torch.from_numpy(jax.device_get(held)).reshape(expected.shape), expected)
        assert not torch.equal(model.weight.detach().cpu(), expected)


def _classifier_steps(mode: str, steps: int, targets=None):
    """An embedding classifier's AdamW steps (its program checks the indices and the targets): the
    parameters after them, the buffers the state held before the last step and after it, the error one
    more step with `targets` raised, and with it the parameters and optimizer state after that step."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Embedding(50, 16), nn.ReLU(), nn.Linear(16, 10)).to("jax")
    opt = torch.optim.AdamW(model.parameters(), lr=0.1)
    i, y = torch.randint(0, 50, (8,)).to("jax"), torch.randint(0, 10, (8,)).to("jax")

    def pointers():
        held = [*model.parameters(), *(s for st in opt.state.values() for s in st.values() if s.dim())]
        return {tensor_module.box_of(t)._array.unsafe_buffer_pointer() for t in held}

    def step(target):
        opt.zero_grad()
        nn.functional.cross_entropy(model(i), target).backward()
        opt.step()

    error = None
    with jaxdev.eager_mode(mode):
        for _ in range(steps - 1):
            step(y)
        before = pointers()
        step(y)
        after = pointers()
        values = [p.detach().cpu() for p in model.parameters()]
        if targets is not None:
            try:
                step(targets.to("jax"))
                torch.jax.synchronize()
            except Exception as e:  # the error is what is compared
                error = (type(e), str(e))
            values += [p.detach().cpu() for p in model.parameters()]
            # AdamW's step counts live on the host: the fused step ran them on (eager mode had raised first)
            values += [s.cpu() for st in opt.state.values() for s in st.values() if s.device.type == "jax"]
    return values, before, after, error


def test_a_step_with_value_checks_updates_in_place_and_still_raises_the_ops_error():
    """A step whose program checks values (an embedding's indices, cross entropy's targets) gives the
    storages it overwrites and its checks do not read to the program (donation), as one without checks
    does: the parameters and AdamW's state land in their old buffers. A bad target still raises the
    op's own error, from the eager rerun of the step (zeros in the donated storages' place), and the
    failed step has written nothing: parameters and state are eager mode's, where cross entropy raised
    before the backward and the optimizer ran (they had taken a step on the bad targets' garbage)."""
    bad = torch.full((8,), 12)
    expected, _, _, error = _classifier_steps("op", 5, bad)
    got, before, after, fused_error = _classifier_steps("fused", 5, bad)
    for g, e in zip(got, expected):
        torch.testing.assert_close(g, e)
    assert before & after
    assert error is not None and fused_error == error


def test_a_check_that_reads_an_overwritten_storage_keeps_it():
    """Indices written by the step itself, then checked: that storage is not donated (the rerun after a
    failed check reads it), and the error is the op's."""
    table = torch.randn(6, 3)

    def run(device):
        idx, w = torch.tensor([1, 2]).to(device), table.to(device)
        with jaxdev.eager_mode("fused" if device == "jax" else "op"):
            for _ in range(3):
                idx.add_(2)
                try:
                    out = nn.functional.embedding(idx, w)
                    out.cpu()
                except Exception as e:  # compared below
                    return type(e), str(e).splitlines()[0]
        return None

    assert run("jax") == run("cpu") is not None


def test_a_failed_check_leaves_what_the_failing_op_would_have_written_alone():
    """A division by zero in place (a deferred value check) raises CPU's error at the next read, and the
    storage holds what eager mode left: the writes before the failing op, not the failing op's or any
    after it in the same program."""
    i = torch.randint(1, 5, (16, 16), dtype=torch.int32)
    zero = torch.zeros(16, 16, dtype=torch.int32)
    with pytest.raises(Exception) as on_cpu:
        i.clone().add_(1).div_(zero, rounding_mode="floor")
    x, z = i.to("jax"), zero.to("jax")
    with jaxdev.eager_mode("fused"):
        x.add_(1)
        x.div_(z, rounding_mode="floor")
        x.mul_(3)
        with pytest.raises(on_cpu.type, match="ZeroDivisionError"):
            x.cpu()
        assert torch.equal(x.cpu(), i + 1)
