"""Real models train on jax exactly as on CPU, with stock torch.optim and no CPU fallback."""

from __future__ import annotations

import pytest
import torch
from models import MODELS, OPTIMIZERS, batch, loss_fn, train, twin

import jaxdev

FAMILIES = list(MODELS)


@pytest.fixture
def no_fallback(monkeypatch):
    """Any op without a jax kernel raises instead of running on CPU, and the counters stay empty."""
    monkeypatch.setenv("JAXDEV_FALLBACK", "error")
    jaxdev.reset_fallback_counts()
    yield
    assert jaxdev.fallback_counts() == {}


def _noise_driven(family: str, optimizer: str) -> dict[str, torch.Tensor]:
    """Elements whose CPU gradient is zero up to rounding (a conv bias before BatchNorm, attention's
    key bias): adaptive optimizers turn their rounding noise into full-size steps on any device, so
    they are left out of the weight comparison for Adam/AdamW/RMSprop."""
    if optimizer == "sgd":
        return {}
    cpu, _ = twin(family)
    x, y = batch(family)
    loss_fn(family, cpu(x), y).backward()
    return {name: p.grad.abs() < 1e-6 for name, p in cpu.named_parameters() if p.grad is not None}


@pytest.mark.parametrize("optimizer", list(OPTIMIZERS))
@pytest.mark.parametrize("family", FAMILIES)
def test_trains_like_cpu(family, optimizer, no_fallback):
    cpu, on_jax = twin(family)
    assert next(on_jax.parameters()).device.type == "jax"
    cpu_losses, cpu_state = train(cpu, family, "cpu", optimizer, steps=3)
    jax_losses, jax_state = train(on_jax, family, "jax", optimizer, steps=3)
    torch.testing.assert_close(jax_losses, cpu_losses, rtol=1e-5, atol=1e-5)
    skip = _noise_driven(family, optimizer)
    for name, expected in cpu_state.items():
        got = jax_state[name]
        assert got.dtype == expected.dtype and got.shape == expected.shape, name
        if name in skip:
            keep = ~skip[name]
            got, expected = got[keep], expected[keep]
        torch.testing.assert_close(got, expected, rtol=1e-4, atol=1e-5, msg=lambda m, name=name: f"{name}: {m}")


def test_gradients_land_on_jax(no_fallback):
    _, on_jax = twin("cnn")
    x, y = (t.to("jax") for t in batch("cnn"))
    loss_fn("cnn", on_jax(x), y).backward()
    for name, p in on_jax.named_parameters():
        assert p.grad is not None and p.grad.device.type == "jax", name


def test_zero_grad_set_to_none(no_fallback):
    _, on_jax = twin("mlp")
    opt = torch.optim.SGD(on_jax.parameters(), lr=0.1)
    x, y = (t.to("jax") for t in batch("mlp"))
    loss_fn("mlp", on_jax(x), y).backward()
    opt.zero_grad(set_to_none=True)
    assert all(p.grad is None for p in on_jax.parameters())
