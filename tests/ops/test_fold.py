"""jaxdev/ops/fold.py: unfold_backward (Tensor.unfold's gradient) against CPU PyTorch."""

from __future__ import annotations

import pytest
import torch
from jaxdev_testing import JAX, like_cpu

pytestmark = pytest.mark.usefixtures("no_fallback")  # tests/conftest.py

aten = torch.ops.aten


# --- unfold_backward ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "grad_shape, sizes, dim, size, step",
    [
        ((3, 2, 2), [3, 3], 1, 2, 1),  # overlapping windows add up
        ((2, 2, 2), [5, 2], 0, 2, 2),
        ((2, 1), [3, 2], 0, 1, 2),  # a position no window covers stays zero
        ((3, 2), [4], 0, 2, 1),
        ((1,), [], 0, 1, 1),  # a 0-dim input: one window of one element
        ((), [1], 0, 1, 1),  # the audit's trial: step >= size copies a grad that broadcasts, as CPU
        ((), [], 0, 1, 1),
        ((1, 1, 1), [1], 0, 1, 1),  # does not broadcast: copy_'s error
        ((2, 1), [3], 0, 1, 2),
        ((2, 2), [3], 0, 1, 2),
        ((2, 1), [3], 0, 1, 0),  # step 0: ValueError
        ((2, 1), [3], 2, 1, 1),  # dim out of range: IndexError
        ((2, 1), [3], 0, -1, 1),
    ],
)
def test_unfold_backward_like_cpu(grad_shape, sizes, dim, size, step):
    g = torch.arange(1.0, 1.0 + torch.Size(grad_shape).numel()).reshape(grad_shape)
    like_cpu(lambda d: aten.unfold_backward(g.to(d), sizes, dim, size, step))
    like_cpu(lambda d: aten.unfold_backward(g.bool().to(d), sizes, dim, size, step))
    like_cpu(lambda d: aten.unfold_backward.out(g.to(d), sizes, dim, size, step, out=torch.empty(0, device=d)))


def test_unfold_backward_refuses_what_cpu_reads_out_of_bounds():
    # Overlapping windows with a grad of another shape: CPU's kernel reads past it (garbage); refused here.
    with pytest.raises(RuntimeError, match="unfolding a tensor of shape"):
        aten.unfold_backward(torch.tensor(2.5, device=JAX), [3], 0, 2, 1)
    with pytest.raises(RuntimeError, match="maximum size for tensor at dimension 0 is 3 but size is 5"):
        aten.unfold_backward(torch.ones(2, 1, device=JAX), [3], 0, 5, 2)


def test_unfold_backward_is_tensor_unfold_gradient():
    x = torch.randn(7, 3)

    def run(d):
        t = x.to(d).requires_grad_()
        (t.unfold(0, 3, 1) * torch.arange(15.0).reshape(5, 3, 3).to(d)).sum().backward()
        return t.grad

    like_cpu(run, rtol=1e-6, atol=1e-6)
