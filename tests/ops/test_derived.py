"""jaxdev/ops/derived.py: in-place and out= variants derived from functional kernels (resizing rules)."""

from __future__ import annotations

import pytest
import torch
from jaxdev_testing import JAX

pytestmark = pytest.mark.usefixtures("no_fallback")  # tests/conftest.py


def test_in_place_out_that_is_an_input_is_not_resized():
    """x.ldexp_(y) is mul(x, 2**y, out=x): CPU raises rather than grow x to the broadcast shape."""
    x = torch.ones(5, 1, device=JAX)
    with pytest.raises(RuntimeError, match=r"output with shape \[5, 1\] doesn't match the broadcast shape \[5, 5\]"):
        x.ldexp_(torch.ones(5, 5, device=JAX))
    assert x.shape == (5, 1)
    # An out= that is not an input still resizes (with PyTorch's deprecation warning).
    out = torch.empty(5, 1, device=JAX)
    with pytest.warns(UserWarning, match="was resized"):
        torch.mul(x, torch.ones(5, 5, device=JAX), out=out)
    assert out.shape == (5, 5)
