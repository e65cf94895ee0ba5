"""jaxdev/ops/reorder.py: roll and flip's checks against CPU PyTorch."""

from __future__ import annotations

import pytest
import torch
from jaxdev_testing import on_both, raises_as_cpu

pytestmark = pytest.mark.usefixtures("no_fallback")  # tests/conftest.py


@pytest.mark.parametrize("shifts,dims", [([5, 1], [0, 0]), ([-2], [-1]), (1, 0)])
def test_roll_of_a_0_dim_tensor_along_a_dim_is_an_index_error(shifts, dims):
    raises_as_cpu(lambda d: torch.roll(torch.tensor(3.0, device=d), shifts, dims))
    on_both(lambda d: torch.roll(torch.tensor(3.0, device=d), 1))


@pytest.mark.parametrize("dims", [[-1, -1, -(2**40)], [0, 0], [1, 1, 9], [0, -2]])
def test_flip_reports_a_repeated_dim_before_an_out_of_range_one(dims):
    raises_as_cpu(lambda d: torch.flip(torch.zeros(2, 3, device=d), dims))
    raises_as_cpu(lambda d: torch.flip(torch.tensor(1.0, device=d), dims))
