"""Moving modules to and from jax keeps Parameter objects, so weight ties and optimizer state hold."""

from __future__ import annotations

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
