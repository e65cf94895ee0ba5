"""slice_backward as one program (jaxdev/ops/slice_grad.py): what PyTorch's composite (zeros, slice,
copy_) gives, bit for bit and laid out alike, on the jax device and as on CPU, for every slice a
gradient fills; the composite itself where copy_ would broadcast or the gradient is empty."""

from __future__ import annotations

import pytest
import torch

aten = torch.ops.aten
CPU = torch._C.DispatchKeySet(torch._C.DispatchKey.CPU)
SLICES = [
    ((6, 8), 1, 0, 4, 1),  # a qkv split's first part
    ((6, 8), 1, 4, 8, 1),
    ((6, 8), 0, 1, 5, 2),  # strided
    ((6, 8), -1, -5, 100, 3),  # negative dim and start, end past the size
    ((2, 3, 12), 2, 4, 8, 1),
    ((5,), 0, -100, -1, 2),
    ((4, 4), 1, 3, 1, 1),  # empty: the composite
]
DTYPES = [torch.float32, torch.bfloat16, torch.float64, torch.int64, torch.bool, torch.complex64]


def _composite(*args):
    return aten.slice_backward.default._handle.redispatch_boxed(CPU, *args)


def _same(a, b):
    assert (a.dtype, a.shape, a.stride()) == (b.dtype, b.shape, b.stride())
    assert torch.equal(a.cpu(), b.cpu())


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("sizes, dim, start, end, step", SLICES)
def test_slice_backward_is_the_composites_result(sizes, dim, start, end, step, dtype):
    shape = aten.slice.Tensor(torch.zeros(sizes), dim % len(sizes), start, end, step).shape
    g = (torch.randn(shape, generator=torch.Generator().manual_seed(0)) * 10).to(dtype)
    args = (list(sizes), dim, start, end, step)
    want = aten.slice_backward.default(g, *args)
    for _ in range(3):  # learned, then replayed by the memo kernel
        got = aten.slice_backward.default(g.to("jax"), *args)
        _same(got, want)
        _same(got, _composite(g.to("jax"), *args))


@pytest.mark.parametrize("grad", ["broadcast", "transposed"])
def test_other_gradients_as_the_composite_takes_them(grad):
    g = torch.randn(6, 1) if grad == "broadcast" else torch.randn(4, 6).t()
    got = aten.slice_backward.default(g.to("jax") if grad == "broadcast" else g.t().to("jax").t(), [6, 8], 1, 0, 4, 1)
    _same(got, aten.slice_backward.default(g, [6, 8], 1, 0, 4, 1))


def test_a_split_trains_as_on_cpu():
    x = torch.randn(3, 12, requires_grad=True)
    xj = x.detach().to("jax").requires_grad_()
    for t in (x, xj):
        q, k, v = t.split(4, dim=1)
        (q * 2 + k * 3 + v.square()).sum().backward()
    assert torch.equal(x.grad, xj.grad.cpu())
