"""index_put_ (`t[idx] = v`) into an expanded tensor (jaxdev/ops/expanded_put.py): CPU warns that it is
deprecated and writes in its loop's order, the last write to a shared memory location winning (with
accumulate: every write adds into it); jax raised the internal-overlap error."""

from __future__ import annotations

import warnings

import pytest
import torch
from jaxdev_testing import same_outcome


def _expanded(d, base, shape, perm=None):
    """arange over `base` (permuted by `perm`), expanded to `shape`: stride 0 along the broadcast dims."""
    b = torch.arange(float(torch.tensor(base).prod()), device=d).reshape(base)
    return (b.permute(perm) if perm else b).expand(shape)


def _set(t, index, value):
    t[index] = value
    return t


def _i(d, *rows):
    return torch.tensor(rows, device=d)


PUTS = {
    # several rows of one location: the loop's last one wins
    "rows into an expanded dim": lambda d: _expanded(d, [1, 3], [4, 3]).index_put_(
        (_i(d, 0, 2, 1),), torch.tensor([[1.0, 2, 3], [4, 5, 6], [7, 8, 9]], device=d)
    ),
    "duplicate indices, values transposed": lambda d: _expanded(d, [4, 1], [4, 3]).index_put_(
        (_i(d, [1, 1, 0], [1, 0, 1]), _i(d, [2, 0, 0], [1, 2, 0])),
        torch.tensor([[1.0, 2], [3, 4], [5, 6]], device=d).t(),
    ),
    "non-adjacent indices (moved to the front)": lambda d: _set(
        _expanded(d, [3, 1, 2], [2, 4, 3], [2, 1, 0]),
        (_i(d, 1, 0, 1), slice(None), _i(d, 2, 2, 0)),
        torch.tensor([[1.0], [2], [3]], device=d).expand(3, 4),
    ),
    "a transposed base": lambda d: _set(
        _expanded(d, [3, 1, 2], [2, 4, 3], [2, 1, 0]),
        (slice(None), _i(d, 3, 0, 3)),
        torch.tensor([[10.0, 20, 30], [40, 50, 60], [70, 80, 90]], device=d).t(),
    ),
    "accumulate": lambda d: _expanded(d, [1, 3], [4, 3]).index_put_(
        (_i(d, 0, 2, 2),), torch.tensor([1.0, 2, 4], device=d), accumulate=True
    ),
    "accumulate bool": lambda d: (
        torch.tensor([True, False, False], device=d)
        .expand(2, 3)
        .index_put_((_i(d, 1, 0), _i(d, 1, 2)), torch.tensor([True, False], device=d), accumulate=True)
    ),
    "mask, a row per true element": lambda d: _expanded(d, [3, 1], [3, 4]).index_put_(
        (torch.tensor([[True, False, True, False], [False] * 4, [True] * 4], device=d),),
        torch.arange(6.0, device=d) + 10,
    ),
}


@pytest.mark.usefixtures("no_fallback")
@pytest.mark.parametrize("put", PUTS.values(), ids=PUTS.keys())
def test_index_put_into_an_expanded_tensor_as_cpu(put):
    results = {}
    for d in ("cpu", "jax"):
        with pytest.warns(UserWarning, match="Use of index_put_ on expanded tensors is deprecated"):
            x = put(d)
        results[d] = (x.stride(), repr(x.cpu().tolist()))
    assert results["jax"] == results["cpu"]


@pytest.mark.usefixtures("no_fallback")
def test_setitem_of_a_number_through_a_mask_warns_twice_as_cpu():
    """CPU's index_put_ of one number through one mask is masked_fill_, which warns on its own."""
    said = {}
    for d in ("cpu", "jax"):
        t = _expanded(d, [1, 3], [4, 3])
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            t[torch.tensor([True, False, True, False], device=d)] = 7.0
        said[d] = ([str(w.message).split(" (Triggered internally")[0] for w in caught], t.cpu().tolist())
    assert said["jax"] == said["cpu"]
    assert len(said["cpu"][0]) == 2


@pytest.mark.usefixtures("no_fallback")
@pytest.mark.per_op_mode("a failed check raises at the op; fused mode defers it to the sync")
@pytest.mark.filterwarnings("ignore:Use of index_put_")
@pytest.mark.parametrize(
    "put",
    [
        lambda d, t: t.index_put_((_i(d, 0, 1),), t),  # self as its own values: a full overlap
        lambda d, t: t.index_put_((_i(d, 5),), torch.tensor(1.0, device=d)),
        lambda d, t: t.index_put_((_i(d, 0),), torch.ones(2, device=d)),
        lambda d, t: t.index_put_((_i(d, 0),), _i(d, 1, 2, 3)),
    ],
    ids=["self as values", "index out of bounds", "value shape", "value dtype"],
)
def test_refusals_on_an_expanded_tensor_as_cpu(put):
    same_outcome(lambda d: put(d, _expanded(d, [1, 3], [2, 3])))
