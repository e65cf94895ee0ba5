"""jaxdev/ops/sparse/ against CPU: dense <-> sparse conversions."""

from __future__ import annotations

import pytest
import torch

import jaxdev  # noqa: F401


@pytest.mark.parametrize("value", [3.0, 0.0])
def test_a_0_dim_tensor_to_sparse_and_back(value):
    """No sparse dims: one stored value if it is nonzero, none if zero (JAX's nonzero refused 0-d input)."""
    cpu = torch.tensor(value).to_sparse()
    got = torch.tensor(value, device="jax").to_sparse()
    assert (got.sparse_dim(), got.dense_dim(), got._nnz()) == (cpu.sparse_dim(), cpu.dense_dim(), cpu._nnz())
    assert got.indices().shape == cpu.indices().shape
    torch.testing.assert_close(got.values().cpu(), cpu.values())
    torch.testing.assert_close(got.to_dense().cpu(), cpu.to_dense())


def test_dense_to_sparse_round_trip_matches_cpu():
    x = torch.tensor([[0.0, 1.5, 0.0], [2.0, 0.0, -1.0]])
    got = x.to("jax").to_sparse()
    cpu = x.to_sparse()
    torch.testing.assert_close(got.indices().cpu(), cpu.indices())
    torch.testing.assert_close(got.values().cpu(), cpu.values())
    torch.testing.assert_close(got.to_dense().cpu(), x)
