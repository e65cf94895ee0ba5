"""jaxdev/ops/group_norm.py: group norm against CPU PyTorch."""

from __future__ import annotations

import pytest
import torch

pytestmark = pytest.mark.usefixtures("no_fallback")


@pytest.mark.parametrize("shape, groups", [((0, 2), 1), ((0, 6, 2, 2), 3)])
def test_group_norm_of_an_empty_batch_as_cpu(shape, groups):
    # reshape(N, group, -1) raised JAX's ZeroDivisionError for N = 0 (OpInfo's reference inputs)
    x = torch.randn(shape, dtype=torch.float64)
    w, b = torch.randn(shape[1], dtype=torch.float64), torch.randn(shape[1], dtype=torch.float64)
    hxw = int(torch.tensor(shape[2:], dtype=torch.int64).prod())
    args = (shape[0], shape[1], hxw, groups, 1e-5)
    want = torch.ops.aten.native_group_norm(x, w, b, *args)
    got = torch.ops.aten.native_group_norm(x.to("jax"), w.to("jax"), b.to("jax"), *args)
    assert [(t.shape, t.dtype) for t in got] == [(t.shape, t.dtype) for t in want]
    xr, wr = x.to("jax").requires_grad_(), w.to("jax").requires_grad_()
    torch.nn.functional.group_norm(xr, groups, wr).sum().backward()
    assert xr.grad.shape == x.shape and torch.equal(wr.grad.cpu(), torch.zeros_like(w))
