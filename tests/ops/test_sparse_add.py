"""add / add_ with sparse COO tensors on jax (jaxdev/ops/sparse_add.py) against CPU: sparse + sparse
(coalesced or not, hybrid, alpha, promotion), dense + sparse in and out of place, CPU's refusals, and
no CPU fallback."""

from __future__ import annotations

import pytest
import torch
from jaxdev_testing import JAX

pytestmark = [
    pytest.mark.usefixtures("no_fallback"),
    pytest.mark.filterwarnings("ignore:Sparse invariant checks"),
]


def _coo(indices, values, size, coalesce=False):
    t = torch.sparse_coo_tensor(torch.tensor(indices), torch.tensor(values), size)
    return t.coalesce() if coalesce else t


A = ([[0, 1, 1], [2, 0, 2]], [3.0, 4.0, 5.0], (2, 3))
B = ([[0, 1, 0], [2, 1, 2]], [1.0, 2.0, 7.0], (2, 3))


def _same_sparse(actual, expected):
    assert actual.layout == torch.sparse_coo and actual.device == JAX and actual.dtype == expected.dtype
    assert actual.is_coalesced() == expected.is_coalesced()
    if expected.is_coalesced():  # then the entries themselves are CPU's
        assert torch.equal(actual._indices().cpu(), expected._indices())
        assert torch.equal(actual._values().cpu(), expected._values())
    assert torch.equal(actual.to_dense().cpu(), expected.to_dense())


@pytest.mark.parametrize("coalesced", [False, True])
@pytest.mark.parametrize("alpha", [1, 2.5, -1])
def test_sparse_plus_sparse(coalesced, alpha):
    a, b = _coo(*A, coalesce=coalesced), _coo(*B, coalesce=coalesced)
    _same_sparse(torch.add(a.to(JAX), b.to(JAX), alpha=alpha), torch.add(a, b, alpha=alpha))
    target = a.clone()
    target_jax = a.to(JAX)
    result = target_jax.add_(b.to(JAX), alpha=alpha)
    assert result is target_jax
    _same_sparse(target_jax, target.add_(b, alpha=alpha))


def test_hybrid_and_promotion():
    a = torch.sparse_coo_tensor(torch.tensor([[0, 2]]), torch.tensor([[1.0, 2.0], [3.0, 4.0]]), (3, 2)).coalesce()
    b = torch.sparse_coo_tensor(
        torch.tensor([[2, 1]]), torch.tensor([[1.0, 1.0], [5.0, 6.0]], dtype=torch.float64), (3, 2)
    )
    b = b.coalesce()
    _same_sparse(a.to(JAX) + b.to(JAX), a + b)  # float32 + float64: float64
    ints = _coo(A[0], [1, 2, 3], A[2])
    _same_sparse(ints.to(JAX) + ints.to(JAX), ints + ints)
    _same_sparse(ints.to(JAX).add_(ints.to(JAX), alpha=2.7), ints.clone().add_(ints, alpha=2.7))  # alpha cast
    with pytest.raises(RuntimeError, match="argument alpha must not be a floating point number"):
        torch.add(ints.to(JAX), ints.to(JAX), alpha=2.7)  # checked out of place only, as on CPU


@pytest.mark.parametrize("alpha", [1, -1.5])
def test_dense_plus_sparse(alpha):
    dense = torch.randn(2, 3, generator=torch.Generator().manual_seed(0))
    b = _coo(*B)
    expected = dense.clone().add_(b, alpha=alpha)
    target = dense.to(JAX)
    assert target.add_(b.to(JAX), alpha=alpha) is target
    torch.testing.assert_close(target.cpu(), expected, rtol=1e-6, atol=1e-6)
    view = torch.zeros(3, 4).to(JAX)[1:, 1:]  # written through its strides
    view.add_(b.to(JAX), alpha=alpha)
    torch.testing.assert_close(view.cpu(), torch.zeros(2, 3).add_(b, alpha=alpha))
    out = dense.to(JAX).requires_grad_()
    total = torch.add(out, b.to(JAX), alpha=alpha)
    assert total.layout == torch.strided
    torch.testing.assert_close(total.detach().cpu(), torch.add(dense, b, alpha=alpha), rtol=1e-6, atol=1e-6)
    total.sum().backward()
    torch.testing.assert_close(out.grad.cpu(), torch.ones(2, 3))


def test_refusals_as_cpu():
    a, b = _coo(*A), _coo(*B)
    cases = [
        (lambda t: t(a) + t(torch.ones(2, 3)), "add\\(sparse, dense\\) is not supported"),
        (lambda t: t(a) + t(_coo([[0], [0]], [1.0], (3, 3))), "expected sizes of 'self' and 'other' to match"),
        (lambda t: t(torch.ones(3, 3)).add_(t(b)), "expected 'self' and 'other' to have same size"),
        (lambda t: t(_coo(A[0], [1, 2, 3], A[2])).add_(t(b)), "Can't convert result type Float to output Long"),
    ]
    for run, message in cases:
        with pytest.raises(RuntimeError, match=message):
            run(lambda x: x)
        with pytest.raises(RuntimeError, match=message):
            run(lambda x: x.to(JAX))
