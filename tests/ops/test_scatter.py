"""jaxdev/ops/scatter.py: scatter accumulation in half precision against CPU PyTorch."""

from __future__ import annotations

import pytest
import torch
from jaxdev_testing import JAX, assert_same

pytestmark = pytest.mark.usefixtures("no_fallback")  # tests/conftest.py


# --- scatter accumulation in half precision ------------------------------------------------------------


SCATTERS = {
    "scatter_add": (lambda z, i, s: z.scatter_add(0, i, s), 1.0),
    "scatter reduce=add": (lambda z, i, s: z.scatter(0, i, s, reduce="add"), 1.0),
    "scatter reduce=multiply": (lambda z, i, s: z.scatter(0, i, s, reduce="multiply"), 1.001),
    "scatter_reduce sum": (lambda z, i, s: z.scatter_reduce(0, i, s, "sum"), 1.0),
    "scatter_reduce prod": (lambda z, i, s: z.scatter_reduce(0, i, s, "prod"), 1.001),
    "scatter_reduce mean": (lambda z, i, s: z.scatter_reduce(0, i, s, "mean"), 3.0),
    "scatter_reduce mean without self": (lambda z, i, s: z.scatter_reduce(0, i, s, "mean", include_self=False), 3.0),
    "index_reduce prod": (lambda z, i, s: z.index_reduce(0, i, s, "prod"), 1.001),  # CPU: in the dtype itself
}


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("name", list(SCATTERS))
def test_scatter_accumulates_half_like_cpu(name, dtype):
    # CPU's scatter kernels accumulate half in float: 3000 float16 ones add up to 3000, where a
    # float16 accumulator stops at 2048
    fn, v = SCATTERS[name]
    idx = torch.zeros(3000, dtype=torch.long)
    src = torch.full((3000,), v, dtype=dtype)
    z = torch.ones(2, dtype=dtype)
    assert_same(fn(z.to(JAX), idx.to(JAX), src.to(JAX)), fn(z, idx, src))


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("alpha", [1, 0.3])
def test_index_add_into_1d_half_adds_one_value_at_a_time_as_cpu(dtype, alpha):
    """CPU's loop for a 1-d self adds each (alpha * source) value in index order, every sum rounded to
    the half dtype; jax summed duplicates in float32 and rounded once (PyTorch's test_put, whose
    reference is index_add_ on a flattened tensor, failed on jax in bfloat16 and float16)."""
    gen = torch.Generator().manual_seed(0)
    for _ in range(20):
        dst = (torch.randn(20, generator=gen) * 5).to(dtype)
        idx = torch.randint(0, 3, (8,), generator=gen)  # many duplicates
        src = (torch.randn(8, generator=gen) * 5).to(dtype)
        want = dst.index_add(0, idx, src, alpha=alpha)
        got = dst.to(JAX).index_add(0, idx.to(JAX), src.to(JAX), alpha=alpha).cpu()
        assert torch.equal(got, want)
