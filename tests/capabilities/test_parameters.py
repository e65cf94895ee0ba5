"""Moving modules to and from jax keeps Parameter objects, so weight ties and optimizer state hold."""

from __future__ import annotations

import weakref

import pytest
import torch
from jaxdev_testing import JAX
from torch import nn


class TiedLM(nn.Module):
    """GPT-2's shape in plain torch: the output projection is the token embedding."""

    def __init__(self, vocab=50, d=16):
        super().__init__()
        self.wte = nn.Embedding(vocab, d)
        self.wpe = nn.Embedding(8, d)
        self.block = nn.Sequential(nn.LayerNorm(d), nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))
        self.lm_head = nn.Linear(d, vocab, bias=False)
        self.lm_head.weight = self.wte.weight

    def forward(self, tokens):
        h = self.wte(tokens) + self.wpe(torch.arange(tokens.shape[1], device=tokens.device))
        return self.lm_head(h + self.block(h))


def _steps(model, device, opt, steps=3):
    losses = []
    for i in range(steps):
        g = torch.Generator().manual_seed(i)
        x, y = torch.randint(0, 50, (4, 8), generator=g), torch.randint(0, 50, (4, 8), generator=g)
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(x.to(device)).reshape(-1, 50), y.to(device).reshape(-1))
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def test_tied_weights_stay_tied_and_train_like_cpu():
    torch.manual_seed(0)
    cpu = TiedLM()
    on_jax = TiedLM()
    on_jax.load_state_dict(cpu.state_dict())
    opt = torch.optim.AdamW(on_jax.parameters(), lr=1e-2)  # made before the move: it must keep working
    on_jax.to("jax")
    assert on_jax.lm_head.weight is on_jax.wte.weight and on_jax.wte.weight.device.type == "jax"
    expected = _steps(cpu, "cpu", torch.optim.AdamW(cpu.parameters(), lr=1e-2))
    torch.testing.assert_close(_steps(on_jax, JAX, opt), expected, rtol=1e-5, atol=1e-5)
    for name, p in cpu.state_dict().items():
        torch.testing.assert_close(on_jax.state_dict()[name].cpu(), p, rtol=1e-4, atol=1e-5, msg=name)


def test_ties_survive_every_conversion():
    model = TiedLM()
    for convert in (
        lambda m: m.jax(),
        lambda m: m.cpu(),
        lambda m: m.to("jax", torch.float64),
        lambda m: m.float(),
        lambda m: m.to(torch.device("cpu")),
    ):
        weight = model.wte.weight
        convert(model)
        assert model.lm_head.weight is model.wte.weight is weight
    model.to("jax").load_state_dict(TiedLM().state_dict())
    assert model.lm_head.weight is model.wte.weight


def test_gradients_move_with_their_parameters():
    model = nn.Linear(3, 2)
    model(torch.randn(4, 3)).sum().backward()
    grad = model.weight.grad.clone()
    model.to("jax")
    assert model.weight.grad.device.type == "jax"
    torch.testing.assert_close(model.weight.grad.cpu(), grad)


def test_conversions_without_jax_are_left_to_pytorch():
    assert not torch.__future__.get_swap_module_params_on_conversion()
    model = nn.Linear(2, 2)
    weight = model.weight
    model.double()
    assert model.weight is weight  # PyTorch's own set_data route, untouched
    assert not torch.__future__.get_swap_module_params_on_conversion()


def _trained_on_cpu(model):
    """Gradients on every parameter, as a model has them mid-training."""
    model(torch.randint(0, 50, (2, 8))).sum().backward()
    return {name: (p.detach().clone(), p.grad.clone()) for name, p in model.named_parameters()}


def _assert_moved_like_cpu(model, expected, before):
    """Same Parameter objects (so the tie), on jax with CPU's values and gradients; then training on jax
    follows a CPU twin, gradients through the moved Parameters included."""
    assert model.wte.weight is before and model.lm_head.weight is model.wte.weight
    for name, p in model.named_parameters():
        assert p.device.type == "jax" and p.grad.device.type == "jax", name
        torch.testing.assert_close((p.cpu(), p.grad.cpu()), expected[name], rtol=0, atol=0, msg=name)
    twin = TiedLM()
    twin.load_state_dict({name: p.cpu() for name, p in model.state_dict().items()})
    cpu_losses = _steps(twin, "cpu", torch.optim.SGD(twin.parameters(), lr=0.1))
    jax_losses = _steps(model, JAX, torch.optim.SGD(model.parameters(), lr=0.1))
    torch.testing.assert_close(jax_losses, cpu_losses, rtol=1e-5, atol=1e-5)


def test_move_while_a_weakref_is_held():
    # swap_tensors refuses any weakref; CUDA's `param.data = ...` does not care, nor does jaxdev.
    model = TiedLM()
    expected = _trained_on_cpu(model)
    weight, grad = model.wte.weight, model.wte.weight.grad
    refs = [weakref.ref(weight), weakref.ref(grad)]
    model.to("jax")
    assert refs[0]() is weight and refs[1]() is weight.grad  # they see the moved tensors, as on CUDA
    _assert_moved_like_cpu(model, expected, weight)


def test_move_while_a_cpu_graph_is_alive():
    # The live graph saved the LayerNorm weight: a second owner of its TensorImpl, which swap_tensors refuses.
    model = TiedLM()
    expected = _trained_on_cpu(model)
    weight = model.wte.weight
    ref = model(torch.randint(0, 50, (2, 8)))
    model.to("jax")
    assert ref.device.type == "cpu"  # computed before the move, it keeps its values
    with pytest.raises(RuntimeError, match=r"recorded before its module's parameters moved|poisoned by swap_tensors"):
        ref.sum().backward()  # its gradients would land in CPU tensors no module holds any more;
        # PyTorch's own swap refuses it too
    _assert_moved_like_cpu(model, expected, weight)


def test_move_after_compiling_on_cpu():
    model = TiedLM()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)

    @torch.compile(backend="eager")
    def step(tokens):
        opt.zero_grad()
        model(tokens).sum().backward()
        opt.step()

    step(torch.randint(0, 50, (2, 8)))
    weight = model.wte.weight
    assert weakref.getweakrefs(weight), "the compiled step no longer holds weakrefs: this test tests nothing"
    expected = _trained_on_cpu(model)
    model.to("jax")
    _assert_moved_like_cpu(model, expected, weight)
    model.cpu()  # and back, still the same objects
    assert model.wte.weight is weight is model.lm_head.weight and weight.device.type == "cpu"


def test_swap_tensors_refuses_as_before_outside_jax_conversions():
    first, second = torch.zeros(2), torch.ones(2)
    ref = weakref.ref(first)
    with pytest.raises(RuntimeError, match="weakref"):
        torch.utils.swap_tensors(first, second)
    assert ref() is first and first.sum() == 0
