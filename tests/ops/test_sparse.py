"""jaxdev/ops/sparse/ against CPU: dense <-> sparse conversions."""

from __future__ import annotations

import pytest
import torch

import jaxdev


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


def test_copy_between_sparse_tensors_on_jax():
    """copy_ of one sparse COO jax tensor into another: copy_'s SparseCPU kernel calls
    copy_sparse_to_sparse_, which had no jax kernel, fell back to CPU, whose write-back was a sparse copy_
    again: an endless recursion. Now a metadata kernel, as copy_ is; no fallback."""
    src = torch.sparse_coo_tensor([[0, 1], [1, 0]], [1.0, 2.0], (2, 2))
    dst = torch.sparse_coo_tensor([[0], [0]], [5.0], (2, 2))
    on_jax = dst.to("jax")
    jaxdev.reset_fallback_counts()
    on_jax.copy_(src.to("jax"))
    assert jaxdev.fallback_counts() == {}
    assert on_jax.device.type == "jax" and on_jax._values().device.type == "jax"
    torch.testing.assert_close(on_jax.to_dense().cpu(), dst.copy_(src).to_dense())


@pytest.mark.usefixtures("no_fallback")
def test_view_as_real_and_complex_of_sparse_coo_as_cpu():
    """view_as_real/view_as_complex of a sparse COO tensor (and so .real/.imag of a complex one) are
    CPU's SparseCPU metadata kernels over the values: jax refused them as views it could not fall back
    for (PyTorch's test_view_ops). Writes through the view reach the original, as on CPU."""
    results = {}
    for d in ("cpu", "jax"):
        x = torch.tensor([[1 + 2j, 0], [0, 3 - 1j]], device=d).to_sparse()
        pairs = torch.tensor([[[1.0, 2], [0, 0]], [[0, 0], [3, -1]]], device=d).to_sparse(2)
        real = torch.view_as_real(x)
        real._values().mul_(2)
        results[d] = [
            (t.layout, t.dtype, t.to_dense().cpu()) for t in (real, x, x.real, x.imag, torch.view_as_complex(pairs))
        ]
        with pytest.raises(RuntimeError, match="only supported for sparse tensors with the last dim == 2"):
            torch.view_as_complex(pairs.to_dense().to_sparse())
    for (layout, dtype, value), (cpu_layout, cpu_dtype, cpu_value) in zip(results["jax"], results["cpu"]):
        assert (layout, dtype) == (cpu_layout, cpu_dtype)
        assert torch.equal(value, cpu_value)
