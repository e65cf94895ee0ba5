"""jaxdev/ops/amp.py: the grad scaler's non-finite check and unscale, against CPU PyTorch."""

from __future__ import annotations

import pytest
import torch
from jaxdev_testing import assert_same

pytestmark = pytest.mark.usefixtures("no_fallback")  # tests/conftest.py


def _train_with_grad_scaler(device, poison_step):
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 3).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler(
        device if isinstance(device, str) else device.type, init_scale=2.0**10, growth_interval=2
    )
    scales = []
    for step in range(5):
        x = torch.randn(8, 4).to(device)
        loss = model(x).pow(2).mean()
        if step == poison_step:
            loss = loss * float("inf")
        opt.zero_grad()
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        scales.append(scaler.get_scale())
    return scales, [p.detach() for p in model.parameters()]


def test_grad_scaler_skips_overflow_and_grows_like_cpu():
    cpu_scales, cpu_params = _train_with_grad_scaler("cpu", poison_step=2)
    jax_scales, jax_params = _train_with_grad_scaler("jax", poison_step=2)
    assert jax_scales == cpu_scales
    for j, c in zip(jax_params, cpu_params):
        assert_same(j, c, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("factor", [16.0, 1.1])
def test_update_scale_never_grows_into_inf_as_cpu(factor):
    """CPU keeps the scale when growing it would overflow float32 (PyTorch's
    test_grad_scale_will_not_overflow), and multiplies by the double factor in double."""
    got, want = [], []
    for out, device in ((got, "jax"), (want, "cpu")):
        for start in (1e38, 3.0e38, 1.7):
            s = torch.tensor([start], device=device)
            tracker = torch.tensor([0], dtype=torch.int32, device=device)
            torch._amp_update_scale_(s, tracker, torch.tensor([0.0], device=device), factor, 0.3, 1)
            torch._amp_update_scale_(s, tracker, torch.tensor([1.0], device=device), factor, 0.3, 1)
            out.append((s.item(), tracker.item()))
    assert got == want
