"""jaxdev/capabilities/host_methods.py: Tensor.apply_, map_ and map2_ on jax tensors as on CPU (PyTorch itself runs
them on CPU tensors only)."""

from __future__ import annotations

import pytest
import torch
from jaxdev_testing import CPU, JAX


def _calls(device):
    a = torch.arange(6.0, device=device).reshape(2, 3)
    b = torch.tensor([10.0, 20.0, 30.0], device=device)
    c = torch.tensor([[1.0], [2.0]], device=device)
    view = a.t()
    return [
        lambda: a.clone().apply_(lambda v: v * v + 1),
        lambda: a.clone().map_(b, lambda x, y: x - y),  # broadcast other
        lambda: a.clone().map2_(b, c, lambda x, y, z: x + y * z),
        lambda: view.clone().t().map_(a, max),
        lambda: torch.ones(3, dtype=torch.int64, device=device).apply_(lambda v: v * 7),
        lambda: a.clone().map_(torch.ones(3, dtype=torch.float64, device=device), min),  # TypeError
        lambda: a.clone().requires_grad_().map_(b, min),  # RuntimeError: requires grad
        lambda: a.clone().map_(torch.ones(4, device=device), min),  # not broadcastable
        lambda: a.clone().map2_(b, torch.ones(2, 3, dtype=torch.int32, device=device), min),
        lambda: a.clone().apply_(lambda v: "no"),
    ]


@pytest.mark.parametrize("case", range(10))
def test_as_cpu(case):
    results = []
    for device in (CPU, JAX):
        try:
            out = _calls(device)[case]()
            results.append(("ok", out.dtype, out.cpu().tolist()))
        except Exception as e:  # the same error, in the same words (the tensor type named per device)
            results.append((type(e).__name__, str(e).replace("torch.jax.", "torch.")))
    assert results[0] == results[1]


def test_the_tensor_is_written_in_place():
    t = torch.arange(4.0, device=JAX)
    view = t[1:3]
    version = t._version
    assert view.apply_(lambda v: -v) is view
    assert t.cpu().tolist() == [0.0, -1.0, -2.0, 3.0] and t._version > version
