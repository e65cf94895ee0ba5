"""A compiled graph builds at most dynamo's recompile limit of programs (one per input layout); new
layouts beyond it run op by op, with one warning, and give the same values."""

from __future__ import annotations

import warnings

import pytest
import torch
import torch._dynamo

import jaxdev  # noqa: F401
from jaxdev.graphs import program


@pytest.mark.per_op_mode("a graph's own programs, counted: fused eager traces a graph into its segment's program")
def test_sizes_beyond_the_limit_run_op_by_op():
    def f(x):
        return (x * 2).softmax(0).sum(0)

    compiled = torch.compile(f, backend="jax", dynamic=True)
    before = program.STATS.programs
    with torch._dynamo.config.patch(recompile_limit=2), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for n in (3, 5, 9, 11, 3):
            x = torch.randn(n, 4)
            torch.testing.assert_close(compiled(x.to("jax")).cpu(), f(x))
    assert program.STATS.programs - before == 2  # sizes 3 and 5; 9 and 11 ran op by op, 3 reused its program
    limit = [w for w in caught if issubclass(w.category, program.RecompileLimitWarning)]
    assert len(limit) == 1, [str(w.message) for w in caught]
    assert "recompile_limit" in str(limit[0].message)


def test_the_limit_is_dynamos():
    with torch._dynamo.config.patch(recompile_limit=5):
        assert program._limit() == 5
    assert program._limit() == torch._dynamo.config.recompile_limit
