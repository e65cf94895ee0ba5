"""The bound on live XLA executables: past the budget of memory mappings jaxdev drops JAX's
compiled executables at a safe point, and work goes on with the same results."""

from __future__ import annotations

import pytest
import torch

from jaxdev.programs import executables


@pytest.mark.cpu_fact("each XLA:CPU executable maps host memory regions (a TPU's live on the chip: no drop comes)")
def test_executables_are_dropped_past_the_map_budget_and_work_goes_on(monkeypatch):
    assert executables.map_limit() and executables.budget == executables.map_limit() // 2
    monkeypatch.setattr(executables, "CHECK_EVERY", 8)
    monkeypatch.setattr(executables, "budget", executables.mapped_regions() + 90)  # ~15 executables more
    kept = torch.arange(6.0, device="jax").view(2, 3)
    before = executables.drops
    for n in range(1, 40):  # each size is a new signature: new executables
        y = torch.arange(float(n), device="jax") * 3 + 1
        assert y[-1].item() == 3 * (n - 1) + 1
    assert executables.drops > before, "no drop although the mappings passed the budget"
    assert executables.mapped_regions() < executables.budget + 400
    assert (kept.t() @ kept).cpu().tolist() == [[9.0, 12.0, 15.0], [12.0, 17.0, 22.0], [15.0, 22.0, 29.0]]
