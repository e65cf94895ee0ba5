"""jaxdev/ops/distributions.py: normal's out= shapes and the samplers' distributions."""

from __future__ import annotations

import pytest
import torch
from jaxdev_testing import JAX, like_cpu

pytestmark = pytest.mark.usefixtures("no_fallback")  # tests/conftest.py

aten = torch.ops.aten


# --- normal.Tensor_float_out: out's own shape broadcasts with mean's ------------------------------------------------


@pytest.mark.parametrize(
    "mean_shape, out_shape",
    [((), (0,)), ((), (3,)), ((2, 3), (0,)), ((2, 3), (3, 2)), ((2, 3), (1, 3)), ((1, 3), (2, 1)), ((2, 3), (2, 3))],
)
def test_normal_tensor_float_out_shape_like_cpu(mean_shape, out_shape):
    mean = torch.zeros(mean_shape)

    def run(d):
        out = torch.empty(out_shape, device=d)
        r = aten.normal.Tensor_float_out(mean.to(d), 1.0, out=out)
        assert r is out
        return out.shape, out.dtype, out.stride()

    like_cpu(run)


def test_normal_tensor_float_out_values_and_errors():
    out = torch.empty(20000, dtype=torch.float64, device=JAX)
    aten.normal.Tensor_float_out(torch.tensor(3.0, device=JAX), 2.0, out=out)
    assert out.dtype == torch.float64
    assert abs(out.mean().item() - 3.0) < 0.1 and abs(out.std().item() - 2.0) < 0.1
    like_cpu(lambda d: aten.normal.Tensor_float_out(torch.zeros(2, device=d), -1.0, out=torch.empty(0, device=d)))
    like_cpu(lambda d: aten.normal.Tensor_float_out(torch.zeros(2, device=d), 1.0, out=torch.empty(0, device=d).long()))
    # the other overloads broadcast mean with std only (out resized to that), as before
    for d_ in ((2, 1), (3,)):
        like_cpu(
            lambda d, s=d_: (
                aten.normal.Tensor_Tensor_out(
                    torch.zeros(2, 1, device=d), torch.ones(s, device=d), out=torch.empty(0, device=d)
                ).shape
            )
        )
    like_cpu(lambda d: torch.normal(torch.zeros(2, 3, device=d), torch.ones(3, 2, device=d)))


def test_samplers_follow_their_distributions():
    torch.manual_seed(0)
    x = torch.empty(200_000, device=JAX)
    assert abs(x.exponential_(2.0).mean().item() - 0.5) < 0.01
    assert abs(x.geometric_(0.25).mean().item() - 4.0) < 0.05
    assert (x == x.round()).all() and x.min().item() >= 1
    assert abs(x.log_normal_(0.5, 0.5).log().std().item() - 0.5) < 0.01
    assert abs(x.cauchy_(1.0, 2.0).median().item() - 1.0) < 0.05
    m = torch.normal(torch.full((100_000,), 3.0, device=JAX), torch.full((100_000,), 2.0, device=JAX))
    assert abs(m.mean().item() - 3.0) < 0.03 and abs(m.std().item() - 2.0) < 0.03
    torch.manual_seed(5)
    a = torch.empty(8, device=JAX).cauchy_()
    torch.manual_seed(5)
    assert torch.equal(a.cpu(), torch.empty(8, device=JAX).cauchy_().cpu())
