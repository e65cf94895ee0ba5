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


# --- an empty dim: CPU's result is empty; jnp.max over it has no identity to start from ---


@pytest.mark.parametrize("dtype", HALF)
@pytest.mark.parametrize("fn", [torch.log_softmax, torch.softmax], ids=["log_softmax", "softmax"])
def test_half_softmax_over_an_empty_last_dim(fn, dtype):
    """The half last-dim log_softmax (CPU's lastdim kernel's roundings) raised jnp's ValueError."""
    on_both(lambda d: fn(torch.empty(3, 0, dtype=dtype, device=d), -1))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("shape,dim", [((3, 0), -1), ((0, 5), 0), ((2, 0, 3), 1), ((0, 4), -1)])
@pytest.mark.parametrize("fn", [torch.log_softmax, torch.softmax], ids=["log_softmax", "softmax"])
def test_own_softmax_over_an_empty_dim(fn, shape, dim, dtype, tpu_policy):
    """Where jaxdev's own functions are chosen (a TPU), softmax and log_softmax take the max of the dim
    themselves: an empty one raised jnp's ValueError (XLA's jax.nn.softmax starts from -inf)."""
    on_both(lambda d: fn(torch.empty(shape, dtype=dtype, device=d), dim))
