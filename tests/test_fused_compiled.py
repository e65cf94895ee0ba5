"""Compiled graphs in fused eager mode: `torch.compile(backend="jax")` graphs join the pending segment
as one op each, so a compiled training step (forward, backward, optimizer) runs as one XLA program."""

from __future__ import annotations

import warnings

import pytest
import torch
from torch import nn

import jaxdev
from jaxdev import tensor as tensor_module
from jaxdev.fused import recorder
from jaxdev.graphs import program as compiled

pytestmark = pytest.mark.usefixtures("per_op_after")


def _train(mode: str, steps: int = 6):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(12, 32), nn.ReLU(), nn.Dropout(0.2), nn.Linear(32, 5)).to("jax")
    torch.manual_seed(1)
    x, y = torch.randn(8, 12).to("jax"), torch.randint(0, 5, (8,)).to("jax")
    opt = torch.optim.Adam(model.parameters(), lr=0.01, capturable=True)

    @torch.compile(backend="jax")
    def forward_backward():
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        return loss

    step_opt = torch.compile(opt.step, backend="jax")
    losses, counts = [], []
    with jaxdev.eager_mode(mode), warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # dynamo's notes on the backward graph break
        for _ in range(steps):
            before = (recorder.STATS.flushes, compiled.STATS.calls, recorder.STATS.programs, compiled.STATS.programs)
            opt.zero_grad(set_to_none=True)
            loss = forward_backward()
            step_opt()
            losses.append(loss.item())
            after = (recorder.STATS.flushes, compiled.STATS.calls, recorder.STATS.programs, compiled.STATS.programs)
            counts.append(tuple(a - b for a, b in zip(after, before)))
    return losses, [p.detach().cpu() for p in model.parameters()], counts


def test_a_compiled_training_step_runs_as_one_program():
    losses, weights, _ = _train("op")
    fused_losses, fused_weights, counts = _train("fused")
    # dropout included: the one program draws what the compiled graphs draw on their own
    assert fused_losses == pytest.approx(losses, rel=1e-6, abs=1e-7)
    for a, b in zip(weights, fused_weights):
        torch.testing.assert_close(b, a, rtol=1e-5, atol=1e-6)
    # settled steps: one program run (the flush at the end of opt.step()), no graph run on its own,
    # nothing built
    assert counts[-1] == (1, 0, 0, 0), counts
    assert counts[-2] == (1, 0, 0, 0), counts


def test_an_inference_graph_that_writes_its_inputs():
    """BatchNorm in training mode under no_grad: the compiled graph updates the running stats in
    place (keep_inference_input_mutations); recorded, the write lands in the same buffers."""
    torch.manual_seed(0)
    bn_cpu = nn.BatchNorm1d(6)
    bn = nn.BatchNorm1d(6).to("jax")
    f = torch.compile(bn, backend="jax")
    xs = [torch.randn(10, 6) for _ in range(3)]
    with torch.no_grad():
        expected = [bn_cpu(x) for x in xs]
        with jaxdev.eager_mode("fused"):
            got = [f(x.to("jax")) for x in xs]
            version = bn.running_mean._version
            assert recorder.pending_ops() > 0  # nothing read yet
            torch.testing.assert_close(bn.running_mean.cpu(), bn_cpu.running_mean)
    assert version > 0
    for g, e in zip(got, expected):
        torch.testing.assert_close(g.cpu(), e)
    torch.testing.assert_close(bn.running_var.cpu(), bn_cpu.running_var)
    assert int(bn.num_batches_tracked) == 3


def test_a_compiled_graphs_results_and_pending_inputs_mix():
    """A graph takes results of pending eager ops, and eager ops take its results, all in one segment."""
    x = torch.randn(8, 8, device="jax")
    f = torch.compile(lambda a: (a @ a).relu().sum(0), backend="jax")
    expected = ((x.cpu() * 2) @ (x.cpu() * 2)).relu().sum(0) + 1
    with jaxdev.eager_mode("fused"):
        before = recorder.STATS.flushes
        z = f(x * 2) + 1
        assert recorder.pending_ops() >= 3 and recorder.STATS.flushes == before
        torch.testing.assert_close(z.cpu(), expected, rtol=1e-5, atol=1e-5)


def test_a_value_error_in_a_recorded_graph_raises_at_the_read():
    table = torch.randn(5, 3, device="jax")
    f = torch.compile(lambda t, i: t[i] * 2, backend="jax")
    f(table, torch.tensor([1, 2], device="jax"))  # compiled once with valid indices
    with jaxdev.eager_mode("fused"):
        out = f(table, torch.tensor([1, 7], device="jax"))
        with pytest.raises(IndexError):
            out.cpu()


def test_a_compiled_steps_updates_land_in_the_old_buffers():
    """The one program gets the parameters' and momentum's buffers (XLA donation), as fused eager's own
    steps do: no second copy of the state is alive during the step."""
    model = nn.Linear(64, 64).to("jax")
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    x = torch.randn(8, 64).to("jax")

    @torch.compile(backend="jax")
    def forward_backward():
        model(x).square().mean().backward()

    step_opt = torch.compile(opt.step, backend="jax")

    def pointers():
        held = [*model.parameters(), *(opt.state[p]["momentum_buffer"] for p in model.parameters())]
        return {tensor_module.box_of(t)._array.unsafe_buffer_pointer() for t in held}

    with jaxdev.eager_mode("fused"), warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        for _ in range(4):  # the first steps trace, and learn what a step overwrites
            opt.zero_grad(set_to_none=False)
            forward_backward()
            step_opt()
        before = pointers()
        opt.zero_grad(set_to_none=False)
        forward_backward()
        step_opt()
        assert pointers() & before
