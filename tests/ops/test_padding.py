"""jaxdev/ops/padding.py: reflection/replication pad backward against CPU PyTorch."""

from __future__ import annotations

import math

import pytest
import torch
from jaxdev_testing import JAX, assert_same, on_both

pytestmark = pytest.mark.usefixtures("no_fallback")  # tests/conftest.py

HALF = [torch.float16, torch.bfloat16]


def _gen(seed=0):
    return torch.Generator().manual_seed(seed)


# --- reflection/replication pad backward: CPU adds in the output's order, rounding each sum ---------

_PADS = [
    ((5, 6, 4, 4), (5, -4, -4, 3), "replicate"),  # OpInfo pad.replicate_negative: 15 gradients into one
    ((2, 3, 7, 9), (3, 2, 1, 4), "replicate"),
    ((2, 3, 7), (4, 5), "replicate"),
    ((2, 2, 4, 5, 6), (3, 1, 2, 2, 1, 3), "replicate"),
    ((2, 3, 7, 9), (3, 2, 1, 4), "reflect"),
    ((2, 3, 4, 5, 6), (2, 1, 3, 2, 1, 3), "reflect"),
    ((4, 5, 6), (1, 1, 1, 1), "reflect"),
]


@pytest.mark.parametrize("case", range(len(_PADS)))
@pytest.mark.parametrize("dtype", [*HALF, torch.float32])
def test_pad_backward_as_cpu(dtype, case):
    shape, pad, mode = _PADS[case]
    x = torch.randn(shape, generator=_gen(case)).to(dtype)
    grads = []
    for device in ("cpu", JAX):
        xx = x.to(device).requires_grad_()
        y = torch.nn.functional.pad(xx, pad, mode=mode)
        g = torch.randn(y.shape, generator=_gen(100 + case)).to(dtype).to(device)
        grads.append(torch.autograd.grad(y, xx, g)[0])
    if dtype == torch.float32:
        assert_same(grads[1], grads[0], rtol=1e-6, atol=1e-6)
    else:
        assert_same(grads[1], grads[0])


@pytest.mark.parametrize(
    "shape,pad",
    [((5, 0, 0, 4), [-3, 5, 1, 2, 5, -3, 2, 5]), ((2, 3), [-4, 1]), ((2, 3), [1, -4]), ((2, 3), [-3, -1]),
     ((2, 3), [2, -3, -1, 0]), ((1, 2, 3), [0, -1, -5, 7]), ((3,), [-3, 5]), ((2, 3), [-2, -1, 1, 0])],
)  # fmt: skip
def test_constant_pad_narrows_for_negative_pads_first(shape, pad):
    x = torch.arange(float(math.prod(shape))).reshape(shape)
    on_both(lambda d: torch.nn.functional.pad(x.to(d), pad))
