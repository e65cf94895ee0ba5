"""jaxdev/ops/segment_reduce.py: segment_reduce and its backward against CPU PyTorch."""

from __future__ import annotations

import pytest
import torch
from jaxdev_testing import check, on_both

pytestmark = pytest.mark.usefixtures("no_fallback")  # tests/conftest.py


# --- segment_reduce -------------------------------------------------------------------------------------

_SEG_DATA = torch.tensor(
    [[1.0, 2.0], [3.0, 3.0], [float("nan"), 0.0], [-1.0, 5.0], [5.0, 5.0], [2.0, -3.0], [0.0, 0.0], [4.0, 4.0]],
    dtype=torch.float64,
)
_SEG_LENGTHS = torch.tensor([2, 0, 3, 3])  # an empty segment, NaN, ties and zeros (prod's exclusive product)


@pytest.mark.parametrize("use_offsets", [False, True])
@pytest.mark.parametrize("initial", [None, 2.5])
@pytest.mark.parametrize("reduce", ["max", "min", "sum", "mean", "prod", "amax"])
def test_segment_reduce_and_backward_like_cpu(reduce, initial, use_offsets):
    lengths = _SEG_LENGTHS
    offsets = torch.cat([torch.zeros(1, dtype=torch.long), lengths.cumsum(0)])

    def run(x):
        bounds = {"offsets": offsets.to(x.device)} if use_offsets else {"lengths": lengths.to(x.device)}
        return torch.segment_reduce(x, reduce, initial=initial, unsafe=False, **bounds).nan_to_num(nan=7.0)

    check(run, _SEG_DATA)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("reduce", ["max", "min", "sum", "mean", "prod"])
def test_segment_reduce_inner_axis_like_cpu(reduce, dtype):
    data = torch.randn(3, 6, 2).to(dtype)
    lengths = torch.tensor([[1, 5], [3, 3], [0, 6]])
    tol = 1e-5 if dtype == torch.float32 else 2e-2
    check(lambda x: torch.segment_reduce(x, reduce, lengths=lengths.to(x.device), axis=1), data, rtol=tol, atol=tol)


@pytest.mark.parametrize(
    "fn,match",
    [
        (
            lambda d: torch.segment_reduce(torch.randn(6, device=d), "max", lengths=torch.tensor([2, 3], device=d)),
            "sum to",
        ),
        (
            lambda d: torch.segment_reduce(torch.randn(6, device=d), "max", lengths=torch.tensor([2, -1, 5], device=d)),
            "negative",
        ),
        (
            lambda d: torch.segment_reduce(torch.randn(6, device=d), "foo", lengths=torch.tensor([2, 4], device=d)),
            "got foo",
        ),
        (lambda d: torch.segment_reduce(torch.randn(6, device=d), "sum"), "Either lengths or offsets"),
        (
            lambda d: torch.segment_reduce(
                torch.randn(6, 2, device=d), "sum", lengths=torch.tensor([2, 4], device=d), axis=1
            ),
            "last dimension",
        ),
        (
            lambda d: torch.segment_reduce(torch.arange(6, device=d), "sum", lengths=torch.tensor([2, 4], device=d)),
            "Long",
        ),
    ],
)
def test_segment_reduce_errors_like_cpu(fn, match):
    on_both(fn, match=match)
