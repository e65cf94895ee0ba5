"""Scatter, gather and the index_* writes given operands whose shapes, dims or index dtype do not fit:
the same error (type and words) as CPU PyTorch, or the same values where CPU accepts them. Before,
index_add and index_copy broadcast mismatched sources into silently wrong results, and 0-dim
operands CPU accepts (a 0-dim src or index beside a vector) raised from inside the kernels."""

from __future__ import annotations

import pytest
import torch
from jaxdev_testing import JAX, assert_same, same_outcome


def t(device, values, dtype=None):
    return torch.tensor(values, device=device, dtype=dtype)


def zeros(device, *shape):
    return torch.zeros(*shape, device=device)


def ones(device, *shape):
    return torch.ones(*shape, device=device)


# (self, dim, index, src): each is run by scatter, scatter_add, scatter_reduce (amax; mean without
# self) and gather
SCATTER_CASES = {
    "2d self and index, 0-dim src": (lambda d: zeros(d, 2, 3), 1, lambda d: t(d, [[1]]), lambda d: t(d, 5.0)),
    "2d index, 1d src": (lambda d: zeros(d, 2, 3), 1, lambda d: t(d, [[1], [2]]), lambda d: t(d, [5.0, 6.0])),
    "1d, 2d src": (lambda d: zeros(d, 3), 0, lambda d: t(d, [1]), lambda d: t(d, [[5.0]])),
    "0-dim self, 1d index, 0-dim src": (lambda d: zeros(d), 0, lambda d: t(d, [0]), lambda d: t(d, 5.0)),
    "0-dim self and index, 1d src": (lambda d: zeros(d), 0, lambda d: t(d, 0), lambda d: t(d, [5.0])),
    "1d self, 0-dim index and src": (lambda d: zeros(d, 3), 0, lambda d: t(d, 2), lambda d: t(d, 5.0)),
    "1d self, 1d index, 0-dim src": (lambda d: zeros(d, 3), 0, lambda d: t(d, [1]), lambda d: t(d, 5.0)),
    "1d self, 2d index": (lambda d: zeros(d, 3), 0, lambda d: t(d, [[1]]), lambda d: t(d, [[5.0]])),
    "2d self and index, 3d src": (lambda d: zeros(d, 2, 3), 1, lambda d: t(d, [[1]]), lambda d: t(d, [[[5.0]]])),
}
SCATTER_OPS = {
    "scatter": lambda s, dim, i, src: s.scatter(dim, i, src),
    "scatter_add": lambda s, dim, i, src: s.scatter_add(dim, i, src),
    "scatter_reduce amax": lambda s, dim, i, src: s.scatter_reduce(dim, i, src, "amax"),
    "scatter_reduce mean": lambda s, dim, i, src: s.scatter_reduce(dim, i, src, "mean", include_self=False),
    "gather": lambda s, dim, i, src: s.gather(dim, i),
}

INDEX_CASES = {
    "copy: slice shapes differ": lambda d: zeros(d, 2, 3, 4).index_copy(0, t(d, [0]), ones(d, 1, 3, 5)),
    "copy: slice shapes differ at dim 1": lambda d: zeros(d, 2, 3, 4).index_copy(1, t(d, [0]), ones(d, 2, 1, 5)),
    "copy: index count": lambda d: zeros(d, 2, 3, 4).index_copy(0, t(d, [0, 1]), ones(d, 1, 3, 4)),
    "copy: dtypes": lambda d: zeros(d, 2, 3, 4).index_copy(0, t(d, [0]), ones(d, 1, 3, 4).double()),
    "copy: 2d index": lambda d: zeros(d, 2, 3, 4).index_copy(0, t(d, [[0]]), ones(d, 1, 3, 4)),
    "copy: dims differ": lambda d: zeros(d, 3).index_copy(0, t(d, []).long(), ones(d, 0, 2)),
    "copy: 0-dim src, two indices": lambda d: zeros(d, 3).index_copy(0, t(d, [1, 2]), t(d, 1.0)),
    "copy: 0-dim self, 1d src": lambda d: zeros(d).index_copy(0, t(d, [0]), ones(d, 1)),
    "copy: 0-dim self, 2d src": lambda d: zeros(d).index_copy(0, t(d, [0]), ones(d, 1, 1)),
    "copy: 0-dim src": lambda d: zeros(d, 1).index_copy(0, t(d, [0]), t(d, 2.0)),
    "copy: 0-dim index": lambda d: zeros(d, 3).index_copy(0, t(d, 1), t(d, 2.0)),
    "copy: out of range": lambda d: zeros(d, 2, 3).index_copy(0, t(d, [5]), ones(d, 1, 3)),
    "add: 0-dim src": lambda d: zeros(d, 3).index_add(0, t(d, [1]), t(d, 5.0)),
    "add: index count": lambda d: zeros(d, 3).index_add(0, t(d, [0, 1]), t(d, [5.0])),
    "add: 0-dim self, 1d src": lambda d: zeros(d).index_add(0, t(d, [0]), t(d, [5.0])),
    "add: 0-dim self and src": lambda d: zeros(d).index_add(0, t(d, [0]), t(d, 5.0)),
    "add: other sizes differ": lambda d: zeros(d, 2, 3).index_add(0, t(d, [0]), ones(d, 1, 2)),
    "add: src lacks dim": lambda d: zeros(d, 2, 3).index_add(1, t(d, [0]), ones(d, 2)),
    "add: src of 3 dims": lambda d: zeros(d, 2, 3).index_add(0, t(d, [0]), ones(d, 1, 3, 1)),
    "add: no index, 0-dim src": lambda d: zeros(d, 3).index_add(0, t(d, []).long(), t(d, 5.0)),
    "add: float index": lambda d: zeros(d, 2, 3).index_add(0, t(d, [0.0]), ones(d, 1, 3)),
    "add: 2d index": lambda d: zeros(d, 2, 3).index_add(0, t(d, [[0]]), ones(d, 1, 3)),
    "add: int32 index": lambda d: zeros(d, 2, 3).index_add(0, t(d, [1], torch.int32), ones(d, 1, 3)),
    "add: out of range": lambda d: zeros(d, 2, 3).index_add(0, t(d, [5]), ones(d, 1, 3)),
    "reduce: 0-dim src": lambda d: zeros(d, 3).index_reduce(0, t(d, [1]), t(d, 5.0), "amax"),
    "reduce: index count": lambda d: zeros(d, 3).index_reduce(0, t(d, [0, 1]), t(d, [5.0]), "amax"),
    "reduce: dtypes": lambda d: zeros(d, 2, 3).index_reduce(0, t(d, [0]), ones(d, 1, 3).double(), "amax"),
    "reduce: float index": lambda d: zeros(d, 2, 3).index_reduce(0, t(d, [0.0]), ones(d, 1, 3), "amax"),
    "reduce: int32 index": lambda d: zeros(d, 2, 3).index_reduce(0, t(d, [1], torch.int32), ones(d, 1, 3), "amax"),
    "reduce: out of range": lambda d: zeros(d, 2, 3).index_reduce(0, t(d, [5]), ones(d, 1, 3), "amax"),
    "reduce: other sizes differ": lambda d: zeros(d, 2, 3).index_reduce(0, t(d, [0]), ones(d, 1, 2), "prod"),
    "fill: 2d index": lambda d: zeros(d, 2, 3).index_fill(0, t(d, [[0]]), 1.0),
    "fill: int32 index": lambda d: zeros(d, 2, 3).index_fill(0, t(d, [0], torch.int32), 1.0),
    "fill: out of range": lambda d: zeros(d, 2, 3).index_fill(0, t(d, [-5]), 1.0),
}


@pytest.mark.parametrize("op", list(SCATTER_OPS))
@pytest.mark.parametrize("case", list(SCATTER_CASES))
def test_scatter_and_gather_shapes_as_on_cpu(case, op):
    self, dim, index, src = SCATTER_CASES[case]
    same_outcome(lambda d: SCATTER_OPS[op](self(d), dim, index(d), src(d)))


@pytest.mark.filterwarnings("ignore:index_reduce\\(\\) is in beta")
@pytest.mark.parametrize("case", list(INDEX_CASES))
def test_index_writes_check_as_on_cpu(case):
    same_outcome(INDEX_CASES[case])


def test_a_0_dim_src_scatters_with_its_gradient():
    grads = []
    for device in ("cpu", JAX):
        src = torch.tensor(5.0, device=device, requires_grad=True)
        torch.zeros(3, device=device).scatter(0, torch.tensor([1], device=device), src).sum().backward()
        grads.append(src.grad)
    assert_same(grads[1], grads[0])
