"""jaxdev/ops/ternary.py: clamp's dtype checks against CPU PyTorch."""

from __future__ import annotations

import math

import pytest
import torch
from jaxdev_testing import on_both

pytestmark = pytest.mark.usefixtures("no_fallback")  # tests/conftest.py


_B = torch.tensor(True)


@pytest.mark.parametrize(
    "lo,hi", [(True, True), (True, None), (None, False), (_B, _B), (_B, None), (None, _B), (0, None), (1, _B)]
)
def test_clamp_of_bool_tensors_is_refused_as_on_cpu(lo, hi):
    def fn(d):
        on = [v.to(d) if isinstance(v, torch.Tensor) else v for v in (lo, hi)]
        return torch.clamp(torch.tensor([True, False], device=d), *on)

    on_both(fn)


@pytest.mark.parametrize("lo,hi", [(-math.inf, torch.tensor(1 + 1j)), (1 + 1j, None), (1 + 0j, None), (None, 2j)])
def test_clamp_with_a_complex_bound_is_not_implemented(lo, hi):
    def fn(d):
        on = [v.to(d) if isinstance(v, torch.Tensor) else v for v in (lo, hi)]
        return torch.clamp(torch.tensor([3, -2], dtype=torch.int8, device=d), *on)

    on_both(fn)
