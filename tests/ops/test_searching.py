"""jaxdev/ops/searching/: unique_dim and histograms against CPU PyTorch."""

from __future__ import annotations

import pytest
import torch
from jaxdev_testing import like_cpu, on_both

pytestmark = pytest.mark.usefixtures("no_fallback")  # tests/conftest.py

aten = torch.ops.aten


# --- unique_dim / unique_dim_consecutive / unique_consecutive(dim=) ------------------------------------


def _rows():
    g = torch.Generator().manual_seed(0)
    return torch.randint(0, 2, (2, 3, 5, 2), generator=g)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.int64, torch.uint8, torch.bool, torch.float16])
@pytest.mark.parametrize("dim", [0, 1, 2, 3, -1, -2])
def test_unique_dim_like_cpu(dtype, dim):
    x = _rows().to(dtype)
    # CPU always computes the inverse and the counts; the unique slices are laid out moved from dim 0.
    like_cpu(lambda d: aten.unique_dim(x.to(d), dim))
    like_cpu(lambda d: aten.unique_dim(x.to(d), dim, True, True, True))
    like_cpu(lambda d: aten.unique_dim_consecutive(x.to(d), dim))
    like_cpu(lambda d: torch.unique(x.to(d), dim=dim, return_inverse=True, return_counts=True))
    like_cpu(lambda d: torch.unique_consecutive(x.to(d), dim=dim, return_counts=True))


def test_unique_dim_sorted_rows_inverse_counts():
    x = torch.tensor([[1.0, 2, 3], [0, 1, 2], [1, 2, 3], [0, 1, 2], [-0.0, 1, 2.5]])
    r = like_cpu(lambda d: aten.unique_dim(x.to(d), 0))
    assert r[0].cpu().tolist() == [[0, 1, 2], [0, 1, 2.5], [1, 2, 3]]
    assert r[1].cpu().tolist() == [2, 0, 2, 0, 1]
    assert r[2].cpu().tolist() == [2, 1, 2]
    like_cpu(lambda d: aten.unique_dim(x.to(d), 1))
    like_cpu(lambda d: aten.unique_dim_consecutive(x.to(d), 0, True, True))
    like_cpu(lambda d: aten.unique_consecutive(x.to(d), True, True, 1))
    like_cpu(lambda d: aten.unique_consecutive(x.to(d), True, True))  # dim=None: flat, as before


def test_unique_dim_edges_like_cpu():
    x = _rows().float()
    like_cpu(lambda d: aten.unique_dim(x[0, 0, 0, 0].to(d), 0))  # 0-dim: IndexError
    like_cpu(lambda d: aten.unique_dim(x[0, 0, 0].to(d), -1))
    like_cpu(lambda d: aten.unique_dim(x.to(d), 4))
    like_cpu(lambda d: aten.unique_dim(x.to(torch.complex64).to(d), 0))  # NotImplementedError
    like_cpu(lambda d: aten.unique_dim_consecutive(x.to(torch.complex64).to(d), 0))
    like_cpu(lambda d: aten.unique_dim(x[:0].to(d), 0))  # the selected dim is empty
    like_cpu(lambda d: aten.unique_dim(x[:, :0].to(d), 0))  # another dim is
    like_cpu(lambda d: aten.unique_dim(torch.zeros(0, 0).to(d), 0))  # more than one is
    like_cpu(lambda d: aten.unique_dim(torch.zeros(4, 0, 2).to(d), 1))


@pytest.mark.parametrize("op", [aten.unique_dim.out, aten.unique_dim_consecutive.out])
def test_unique_dim_out_like_cpu(op):
    x = _rows().float()

    def run(d, dtypes=(torch.float32, torch.int64, torch.int64)):
        outs = [torch.empty(0, dtype=t, device=d) for t in dtypes]
        r = op(x.to(d), 1, out0=outs[0], out1=outs[1], out2=outs[2])
        assert all(a is b for a, b in zip(r, outs))
        return outs

    like_cpu(run)
    like_cpu(lambda d: run(d, (torch.float32, torch.int64, torch.int32)))  # exact dtypes: RuntimeError
    like_cpu(lambda d: run(d, (torch.float16, torch.int64, torch.int64)))


# --- histogram / histogramdd -------------------------------------------------------------------------------

_X50 = torch.randn(50)
_W50 = torch.rand(50)
_X30 = torch.randn(30, 3)
_W30 = torch.rand(30)

HISTOGRAMS = {
    "counts": lambda d, dt: torch.histogram(_X50.to(d, dt), 7),
    "density": lambda d, dt: torch.histogram(_X50.to(d, dt), 7, density=True),
    "range_weight": lambda d, dt: torch.histogram(_X50.to(d, dt), 5, range=(-1.0, 1.0), weight=_W50.to(d, dt)),
    "edges_tensor": lambda d, dt: torch.histogram(
        _X50.to(d, dt), torch.tensor([-1.0, 0.0, 0.5, 2.0], dtype=dt, device=d), density=True
    ),
    "degenerate_range": lambda d, dt: torch.histogram(torch.tensor([1.0, 1.0], dtype=dt, device=d), 2),
    "empty": lambda d, dt: torch.histogram(torch.tensor([], dtype=dt, device=d), 2),
    "last_edge_inclusive": lambda d, dt: torch.histogram(
        torch.tensor([0.0, 1.0, 2.0, 3.0, 3.0], dtype=dt, device=d), 3
    ),
    "outside_and_nan_dropped": lambda d, dt: torch.histogram(
        torch.tensor([-5.0, 0.0, float("nan"), 0.5, 9.0], dtype=dt, device=d), 2, range=(0.0, 1.0)
    ),
    "dd_counts": lambda d, dt: torch.histogramdd(_X30.to(d, dt), [2, 3, 4]),
    "dd_density_weight": lambda d, dt: torch.histogramdd(
        _X30.to(d, dt), [2, 3, 4], density=True, weight=_W30.to(d, dt)
    ),
    "dd_tensors": lambda d, dt: torch.histogramdd(
        _X30.to(d, dt),
        [torch.tensor(e, dtype=dt, device=d) for e in ([-1.0, 0, 1], [0.0, 1], [-2.0, 2.0])],
    ),
    "dd_range": lambda d, dt: torch.histogramdd(_X30.to(d, dt), 3, range=[-1.0, 1.0, 0.0, 1.0, -2.0, 2.0]),
}


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("name", list(HISTOGRAMS))
def test_histogram_like_cpu(name, dtype):
    on_both(lambda d: tuple(HISTOGRAMS[name](d, dtype)), rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize(
    "fn,match",
    [
        (lambda d: torch.histogram(torch.tensor([1.0, float("nan")], device=d), 3), "is not finite"),
        (lambda d: torch.histogram(torch.tensor([1.0, float("inf")], device=d), 3), "range [1, inf] is not finite"),
        (lambda d: torch.histogram(torch.randn(5, device=d), 3, range=(2.0, 1.0)), "min should not exceed max"),
        (lambda d: torch.histogram(torch.randn(5, device=d), 0), "bins must be > 0"),
        (lambda d: torch.histogram(torch.randn(5, device=d).half(), 3), "Half"),
        (lambda d: torch.histogram(torch.randn(5, device=d), torch.ones(2, 2, device=d)), "one dimension"),
        (lambda d: torch.histogram(torch.randn(5, device=d), torch.ones(2, device=d).double()), "same dtype"),
        (lambda d: torch.histogram(torch.randn(5, device=d), 3, weight=torch.ones(4, device=d)), "weight"),
        (lambda d: torch.ops.aten._histogramdd_from_bin_cts(torch.randn(5, 2, device=d), [2, 0]), "for dimension 1"),
        (lambda d: torch.ops.aten._histogramdd_bin_edges(torch.randn(5, device=d), [2]), "at least 2 dimensions"),
        (lambda d: torch.histogramdd(torch.randn(5, 2, device=d), [2, 3], range=[0.0, 1.0]), "should have 4"),
    ],
)
def test_histogram_errors_like_cpu(fn, match):
    on_both(fn, match=match)
