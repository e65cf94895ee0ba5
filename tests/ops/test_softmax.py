"""jaxdev/ops/softmax.py: log_softmax in half precision against CPU PyTorch."""

from __future__ import annotations

import pytest
import torch
from jaxdev_testing import on_both, seeded_randn

pytestmark = pytest.mark.usefixtures("no_fallback")  # tests/conftest.py

HALF = [torch.bfloat16, torch.float16]


# --- log_softmax over the last dim in half: CPU keeps the row's sum and its log in the half dtype ---


@pytest.mark.parametrize("dtype", HALF)
@pytest.mark.parametrize(
    "shape,dim", [((5, 5), 1), ((5, 5), 0), ((7, 40), -1), ((3, 100, 2), 1), ((2, 1000), 1), ((), 0)]
)
def test_log_softmax_half(dtype, shape, dim):
    x = seeded_randn(*shape, scale=4, dtype=dtype)
    on_both(lambda d: torch.log_softmax(x.to(d), dim))
