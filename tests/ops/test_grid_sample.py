"""grid_sample's bicubic mode bit for bit against CPU. test_ops' compare_cpu found jaxdev off by up to
2.7e-3 on OpInfo's reference input (a 345x456 image of 0..255 under a rotation): jaxdev unnormalized
as CPU's scalar kernel does, ((g + 1) * size - 1) / 2, where the vectorized kernel CPU runs computes
(g + 1) * (size / 2) - 0.5, and an ulp in the coordinate moves the result by up to 255 * ulp through
the image's 255 -> 0 steps; and it rounded the multiply-adds as XLA fuses them, not as GCC fused them
in CPU's kernel."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from jaxdev_testing import JAX, assert_same

COMBINATIONS = [(p, a) for p in ("zeros", "border", "reflection") for a in (False, True)]


@pytest.mark.parametrize(("padding", "align"), [("zeros", False), ("reflection", True)])
def test_opinfo_reference_input(padding, align):
    from torch.testing._internal.common_methods_invocations import op_db

    op = next(o for o in op_db if o.name == "nn.functional.grid_sample")
    sample = next(s for s in op.reference_inputs("cpu", torch.float32) if s.args[1:] == ("bicubic", padding, align))
    image, grid = sample.input, sample.args[0]
    assert_same(
        F.grid_sample(image.to(JAX), grid.to(JAX), "bicubic", padding, align),
        F.grid_sample(image, grid, "bicubic", padding, align),
    )


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize(("padding", "align"), COMBINATIONS)
def test_random(padding, align, dtype):
    """Coordinates beyond the image (every padding's taps), a NaN, and (float32) far-off ones; the halves
    round each step to their dtype as CPU's Vectorized<Half> does. (CPU converts a half's tap to int16:
    a tap past 32767 wraps onto some pixel there, which jaxdev does not reproduce.)"""
    g = torch.Generator().manual_seed(0)
    image = (torch.randn(2, 3, 9, 11, generator=g) * 10).to(dtype)
    grid = torch.rand(2, 13, 12, 2, generator=g) * 2.6 - 1.3
    grid[0, 0, 0, 0], grid[0, 0, 1] = float("nan"), torch.tensor([1e7, -1e7] if dtype == torch.float32 else [9.0, -9.0])
    grid = grid.to(dtype)
    assert_same(
        F.grid_sample(image.to(JAX), grid.to(JAX), "bicubic", padding, align),
        F.grid_sample(image, grid, "bicubic", padding, align),
    )


@pytest.mark.parametrize("padding", ["zeros", "reflection"])
def test_gradients(padding):
    g = torch.Generator().manual_seed(1)
    image, grid = torch.randn(2, 3, 7, 9, generator=g), torch.rand(2, 5, 6, 2, generator=g) * 2.4 - 1.2
    results = []
    for device in ("cpu", JAX):
        x, z = image.to(device).detach().requires_grad_(), grid.to(device).detach().requires_grad_()
        F.grid_sample(x, z, "bicubic", padding, False).square().sum().backward()
        results.append((x.grad, z.grad))
    assert_same(results[1][0], results[0][0], rtol=1e-5, atol=1e-5)
    assert_same(results[1][1], results[0][1], rtol=1e-5, atol=1e-4)
