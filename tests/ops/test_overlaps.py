"""CPU's overlap checks of written tensors (jaxdev/ops/kit/overlaps.py): CPU refuses a written tensor passed
as its own index or source (assert_no_overlap: a full overlap, not only a partial one) for index_add_,
index_copy_, index_reduce_, index_fill_'s index, scatter_ and its siblings, put_, index_put_ and the out=
of index_select, gather, take, masked_select; jax computed all of these (PyTorch's test_torch
index_add_ overlap test). And CPU reads index_fill_'s and masked_fill_'s value tensor as a number, never
checked: jax refused a value that was a view of self."""

from __future__ import annotations

import pytest
import torch
from jaxdev_testing import same_outcome


def t(d):
    return torch.tensor([0, 1, 2, 3], device=d)


def i(d):
    return torch.tensor([0, 1, 2, 3], device=d)


def true(d):
    return torch.ones(4, dtype=torch.bool, device=d)


FULL = {
    "index_add_ index": lambda d, x: x.index_add_(0, x, i(d)),
    "index_add_ source": lambda d, x: x.index_add_(0, i(d), x),
    "index_copy_ source": lambda d, x: x.index_copy_(0, i(d), x),
    "index_reduce_ index": lambda d, x: x.index_reduce_(0, x, i(d), "amax"),
    "index_fill_ index": lambda d, x: x.index_fill_(0, x, 1),
    "scatter_ index": lambda d, x: x.scatter_(0, x, i(d)),
    "scatter_ value's index": lambda d, x: x.scatter_(0, x, 1),
    "scatter_add_ src": lambda d, x: x.scatter_add_(0, i(d), x),
    "scatter_reduce_ src": lambda d, x: x.scatter_reduce_(0, i(d), x, "sum"),
    "put_ index": lambda d, x: x.put_(x, i(d)),
    "put_ accumulating source": lambda d, x: x.put_(i(d), x, accumulate=True),
    "index_put_ values": lambda d, x: x.index_put_((i(d),), x),
    "index_put_ index": lambda d, x: x.index_put_((x,), i(d)),
    "setitem": lambda d, x: x.__setitem__(i(d), x),
    "_index_put_impl_ values": lambda d, x: torch.ops.aten._index_put_impl_(x, (i(d),), x),
    "index_select out=self": lambda d, x: torch.index_select(x, 0, i(d), out=x),
    "index_select out=index": lambda d, x: torch.index_select(i(d), 0, x, out=x),
    "gather out=self": lambda d, x: torch.gather(x, 0, i(d), out=x),
    "take out=index": lambda d, x: torch.take(i(d), x, out=x),
    "masked_select out=self": lambda d, x: torch.masked_select(x, true(d), out=x),
    "index_add out=source": lambda d, x: torch.index_add(i(d), 0, i(d), x, out=x),
    "scatter out=index": lambda d, x: torch.scatter(i(d), 0, x, i(d), out=x),
    # what CPU lets through
    "index_add out=self": lambda d, x: torch.index_add(x, 0, i(d), i(d), out=x),
    "gather out=index": lambda d, x: torch.gather(i(d), 0, x, out=x),
    "masked_scatter_ source": lambda d, x: x.masked_scatter_(true(d), x),
    "index_fill_ value, a view of self": lambda d, x: x.index_fill_(0, i(d)[:2], x[1]),
    "masked_fill_ value, a view of self": lambda d, x: x.masked_fill_(true(d), x[0]),
    # a partial overlap, refused before and still
    "index_add_ source, a slice of self": lambda d, x: x.index_add_(0, i(d)[:2], x[1:3]),
}


@pytest.mark.parametrize("write", FULL.values(), ids=FULL.keys())
def test_overlapping_writes_as_cpu(write):
    same_outcome(lambda d: (lambda x: (write(d, x), x)[1])(t(d)))


def _expanded(d, *shape):
    return torch.arange(3.0, device=d).reshape(3, 1, 1)[: shape[0]].expand(*shape)


EXPANDED_FILLS = {
    "masked_fill_": lambda d: _expanded(d, 3, 4, 2).masked_fill_(
        torch.tensor([[True, False], [False, False], [False, False], [True, True]], device=d), -1.0
    ),
    "masked_fill_ NaN": lambda d: _expanded(d, 3, 4, 2).masked_fill_(_expanded(d, 3, 4, 2) > 0.5, float("nan")),
    "index_fill_ along an expanded dim": lambda d: _expanded(d, 3, 4, 2).index_fill_(
        1, torch.tensor([2], device=d), 7.0
    ),
    "index_fill_ along a real dim": lambda d: _expanded(d, 3, 4, 2).index_fill_(0, torch.tensor([1], device=d), 7.0),
}


@pytest.mark.parametrize("fill", EXPANDED_FILLS.values(), ids=EXPANDED_FILLS.keys())
def test_fills_of_an_expanded_tensor_warn_and_write_as_cpu(fill):
    """CPU runs masked_fill_ and index_fill_ on a tensor whose elements share memory with a deprecation
    warning (each location filled if any element sharing it is); jax raised the internal-overlap error."""
    results = {}
    for d in ("cpu", "jax"):
        with pytest.warns(UserWarning, match="on expanded tensors is deprecated") as caught:
            x = fill(d)
        said = [str(w.message).split(" (Triggered internally")[0] for w in caught]
        results[d] = (x.stride(), repr(x.cpu().tolist()), said)
    assert results["jax"] == results["cpu"]
