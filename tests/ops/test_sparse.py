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


def _coo_parts(t):
    """What CPU's result is made of: shape, sparse/dense dims, coalesced flag, indices and values."""
    t = t.cpu()
    return (
        tuple(t.shape),
        t.sparse_dim(),
        t.dense_dim(),
        t.is_coalesced(),
        t._indices().tolist(),
        t._values().tolist(),
    )


def _coo(d, *, coalesced, dense=False):
    i = torch.tensor([[0, 1, 2, 0], [2, 0, 1, 2]])
    v = torch.arange(8.0).reshape(4, 2) if dense else torch.tensor([1.0, 2, 3, 4])
    s = torch.sparse_coo_tensor(i, v, (3, 4, 2) if dense else (3, 4))
    return (s.coalesce() if coalesced else s).to(d)


SPARSE_VIEWS = {
    "unsqueeze(0)": lambda s: s.unsqueeze(0),
    "unsqueeze(-1)": lambda s: s.unsqueeze(-1),  # a dense dim when the tensor has one
    "permute": lambda s: s.permute(1, 0, *range(2, s.dim())),
    "movedim": lambda s: s.movedim(0, 1),
    "stack": lambda s: torch.stack([s, s]),
    "_sparse_broadcast_to": lambda s: torch._sparse_broadcast_to(s, (2, *s.shape)),
    "cat along the last dim": lambda s: torch.cat([s, s], -1),
}


@pytest.mark.usefixtures("no_fallback")
@pytest.mark.parametrize("dense", [False, True], ids=["sparse dims only", "a dense dim"])
@pytest.mark.parametrize("coalesced", [True, False], ids=["coalesced", "uncoalesced"])
@pytest.mark.parametrize("view", SPARSE_VIEWS.values(), ids=SPARSE_VIEWS.keys())
def test_views_cpu_computes_for_sparse_coo_as_cpu(view, coalesced, dense):
    """unsqueeze, permute and _sparse_broadcast_to of a COO tensor are CPU's SparseCPU kernels over its
    parts (its result uncoalesced even from a coalesced input); jax refused them (as_strided)."""
    assert _coo_parts(view(_coo("jax", coalesced=coalesced, dense=dense))) == _coo_parts(
        view(_coo("cpu", coalesced=coalesced, dense=dense))
    )


@pytest.mark.parametrize(
    "view",
    [lambda s: s.narrow(0, 1, 2), lambda s: s[1:], lambda s: s.view(12), lambda s: s.unsqueeze(0).expand(2, 3, 4)],
    ids=["narrow", "slice", "view", "expand"],
)
def test_views_cpu_refuses_for_sparse_coo_raise_its_error(view):
    """narrow/slicing (as_strided) and view have no sparse kernel on CPU either: CPU's error type and first
    words, one sentence (CPU's own is a dispatcher dump); expand raises CPU's own sentence."""
    with pytest.raises(Exception) as cpu:
        view(_coo("cpu", coalesced=True))
    with pytest.raises(type(cpu.value)) as on_jax:
        view(_coo("jax", coalesced=True))
    expected = str(cpu.value).split(" backend")[0].replace("SparseCPU", "SparsePrivateUse1")
    assert str(on_jax.value).startswith(expected)
    assert "\n" not in str(on_jax.value)
