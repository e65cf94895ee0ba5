"""Foreach ops over 0-dim tensor lists run once over their stacked vector (jaxdev/compiler/scalar_lists.py):
a compiled capturable AdamW step's bias corrections are a few vector ops, not a chain per parameter,
with the per-tensor path's bits."""

from __future__ import annotations

import warnings

import jax
import pytest
import torch
from torch import nn
from torch.fx.experimental.proxy_tensor import make_fx

import jaxdev
from jaxdev import rng
from jaxdev.compiler import scalar_lists
from jaxdev.graphs import program
from jaxdev.ops.kit import transcendentals as tm

PARAMS = 6  # three Linear layers: a weight and a bias each


@pytest.fixture(autouse=True)
def fresh_dynamo(monkeypatch):
    # and fresh traces: a kernel traced before keeps the functions (own or XLA's) it was traced with;
    # no on-disk graph cache, whose key does not see the pass patched out (one side would load the other's)
    monkeypatch.delenv("JAXDEV_COMPILE_CACHE", raising=False)
    torch._dynamo.reset()
    jax.clear_caches()
    yield
    torch._dynamo.reset()
    jax.clear_caches()
    jaxdev.eager_mode("op")


def _count(jaxpr, name: str) -> int:
    """Equations of primitive `name` in `jaxpr`, those of the jaxprs it calls counted at every call."""
    n = 0
    for eqn in jaxpr.eqns:
        n += eqn.primitive.name == name
        for param in eqn.params.values():
            for sub in param if isinstance(param, (list, tuple)) else (param,):
                inner = getattr(sub, "jaxpr", sub)
                if hasattr(inner, "eqns"):
                    n += _count(inner, name)
    return n


def _model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 8), nn.Tanh(), nn.Linear(8, 3))


def _train(model, device: str, compiled: bool, steps: int = 4, mode: str = "op"):
    """Weights after `steps` AdamW steps; after the first under eager mode `mode`. The first makes the
    optimizer's state: recorded into fused eager's program with it, the step counts would be constants
    there, and XLA folds constant scalar chains with its own arithmetic, not the program's."""
    model = model.to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.01)
    step = torch.compile(opt.step, backend="jax") if compiled else opt.step
    for i in range(steps):
        torch.manual_seed(i)
        x, y = torch.randn(5, 4), torch.randn(5, 3)
        with jaxdev.eager_mode(mode if i else "op"), warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # dynamo's notes on graph breaks
            opt.zero_grad(set_to_none=True)
            nn.functional.mse_loss(model(x.to(device)), y.to(device)).backward()
            step()
    return [p.detach().cpu() for p in model.parameters()]


def _traced_programs(monkeypatch) -> list:
    """(specialisation, its arguments' shapes) of every program traced from now on."""
    seen, run = [], program.Specialisation.run

    def spy(self, args, inputs, first=False):
        if first:
            avals = [jax.ShapeDtypeStruct(a.shape, a.dtype) for a in inputs.arrays_as(self.array_shapes)]
            seen.append((self, avals))
        return run(self, args, inputs, first)

    monkeypatch.setattr(program.Specialisation, "run", spy)
    return seen


@pytest.mark.parametrize("batched", [True, False])
def test_the_compiled_adamw_step_takes_two_pows_not_two_per_parameter(batched, monkeypatch):
    if not batched:
        monkeypatch.setattr(scalar_lists, "batch", lambda gm: 0)
    seen = _traced_programs(monkeypatch)
    with tm.forced("own"):  # the pow a TPU traces: jaxdev's own, ~190 scalar instructions a call
        _train(_model(), "jax", compiled=True, steps=1)
        pows = sum(_count(jax.make_jaxpr(s._trace)(avals, rng.traced_base()).jaxpr, "pow") for s, avals in seen)
    assert pows == (2 if batched else 2 * PARAMS)  # beta1 ** step and beta2 ** step


@pytest.mark.parametrize("mode", ["op", "fused"])
@pytest.mark.parametrize("math", ["auto", "own"])
def test_weights_after_compiled_steps_are_the_per_tensor_paths_bits(mode, math, monkeypatch):
    expected = _train(_model(), "cpu", compiled=False)
    runs = []
    for batched in (False, True):
        torch._dynamo.reset()
        jax.clear_caches()  # each side traced afresh
        with monkeypatch.context() as m, tm.forced(math):
            if not batched:
                m.setattr(scalar_lists, "batch", lambda gm: 0)
            runs.append(_train(_model(), "jax", compiled=True, mode=mode))
    for unbatched, batched, cpu in zip(*runs, expected):
        assert torch.equal(batched, unbatched), (batched - unbatched).abs().max()
        torch.testing.assert_close(batched, cpu, rtol=1e-5, atol=1e-6)


def _graph(fn, *args):
    return make_fx(fn, tracing_mode="fake")(*args)


def test_a_chain_stacks_once_and_its_pieces_do_not_share_storage():
    def chain(steps):
        powers = torch._foreach_pow(0.9, torch._foreach_add(steps, 1))
        return torch._foreach_sqrt(torch._foreach_sub(powers, 0.5))

    steps = [torch.tensor(float(i), device="jax") for i in range(5)]
    gm = _graph(chain, steps)
    assert scalar_lists.batch(gm) == 4
    targets = [n.target for n in gm.graph.nodes if n.op == "call_function"]
    assert targets.count(torch.ops.aten.stack.default) == 1
    got = program.GraphProgram(gm, wrap_outputs=True)(steps)
    want = chain([s.cpu() for s in steps])
    for g, w in zip(got, want):
        assert g.shape == () and torch.equal(g.cpu(), w)
    got[0].add_(1)  # each result is a tensor of its own, as the foreach op's results are
    assert torch.equal(got[1].cpu(), want[1])


def _zero_dim(dtype=torch.float32, n=3):
    return [torch.tensor(1.0 + i, dtype=dtype, device="jax") for i in range(n)]


@pytest.mark.parametrize(
    "fn,args",
    [
        (lambda xs, t: torch._foreach_mul(xs, t), (_zero_dim(), torch.tensor(2.0, dtype=torch.float64))),  # promotes
        (lambda xs, t: torch._foreach_add(xs, [1.0, 2.0, 3.0]), (_zero_dim(), None)),  # a number per index
        (lambda xs, t: torch._foreach_add(xs, 1), (_zero_dim() + [torch.ones(2, device="jax")], None)),  # a vector
        (lambda xs, t: torch._foreach_neg(xs), (_zero_dim(torch.int64), None)),  # not floating
        (lambda xs, t: torch._foreach_neg(xs), (_zero_dim(n=1), None)),  # one tensor: nothing to stack
        (lambda xs, t: torch._foreach_norm(xs), (_zero_dim(), None)),  # a reduction of each tensor
        (lambda xs, t: torch._foreach_max(xs), (_zero_dim(), None)),
    ],
)
def test_calls_whose_stacking_could_change_a_value_are_left(fn, args):
    gm = _graph(fn, *args)
    assert scalar_lists.batch(gm) == 0
