"""jaxdev/ops/embedding_bag.py: embedding_bag forward checks and backward, against CPU PyTorch."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from jaxdev_testing import like_cpu, same_outcome

pytestmark = pytest.mark.usefixtures("no_fallback")  # tests/conftest.py

aten = torch.ops.aten


# --- embedding_bag backward with an empty offset2bag (what CPU's sum-mode forward returns) --------------------------


@pytest.mark.parametrize("offsets", [[0, 2], [0, 0, 2, 5]])
@pytest.mark.parametrize("empty", [True, False])
def test_embedding_bag_backward_with_empty_offset2bag_like_cpu(offsets, empty):
    g = torch.Generator().manual_seed(7)
    w, idx, off = torch.randn(10, 5, generator=g), torch.tensor([1, 2, 4, 5, 4]), torch.tensor(offsets)
    grad = torch.randn(len(offsets), 5, generator=g)
    o2b = torch.empty(0, dtype=torch.long) if empty else torch.searchsorted(off, torch.arange(5), right=True) - 1
    bag_size, max_idx = torch.full((len(offsets),), 2), torch.zeros(len(offsets), dtype=torch.long)
    for mode in (0, 1):
        like_cpu(
            lambda d, m=mode: aten._embedding_bag_backward(
                grad.to(d), idx.to(d), off.to(d), o2b.to(d), bag_size.to(d), max_idx.to(d), 10, False, m, False, None
            ),
            rtol=1e-6,
            atol=1e-6,
        )
    like_cpu(
        lambda d: aten._embedding_bag_per_sample_weights_backward(
            grad.to(d), w.to(d), idx.to(d), off.to(d), o2b.to(d), 0
        ),
        rtol=1e-6,
        atol=1e-6,
    )


def t(device, values, dtype=None):
    return torch.tensor(values, device=device, dtype=dtype)


def ones(device, *shape, dtype=None):
    return torch.ones(*shape, device=device, dtype=dtype)


def _bag(d, offsets, mode="sum", dtype=torch.float32, include_last_offset=False, indices=(0, 1, 2, 1)):
    weight = torch.arange(12.0, device=d).reshape(4, 3).to(dtype)
    return F.embedding_bag(
        t(d, list(indices)), weight, t(d, offsets), mode=mode, include_last_offset=include_last_offset
    )


EMBEDDING_BAG_CASES = {
    "first offset 1": lambda d: _bag(d, [1, 2]),
    "first offset 1, max": lambda d: _bag(d, [1, 2], "max"),
    "first offset 1, int32": lambda d: F.embedding_bag(
        t(d, [0, 1, 2, 1], torch.int32), ones(d, 4, 3), t(d, [1, 2], torch.int32)
    ),
    "offsets past the end": lambda d: _bag(d, [0, 5]),
    "offsets past the end, last included": lambda d: _bag(d, [0, 5], include_last_offset=True),
    "offsets up to the end": lambda d: _bag(d, [0, 4]),
    "decreasing offsets": lambda d: _bag(d, [0, 2, 1]),
    "decreasing offsets, mean": lambda d: _bag(d, [0, 2, 1], "mean"),
    "decreasing offsets, half": lambda d: _bag(d, [0, 2, 1], dtype=torch.half),
    "decreasing offsets, last included": lambda d: _bag(d, [0, 2, 1], include_last_offset=True),
    "decreasing offsets, four bags": lambda d: _bag(d, [0, 3, 2, 4], indices=(0, 1, 2, 1, 3, 0)),
    "index out of range": lambda d: _bag(d, [0, 2], indices=(0, 1, 9, 1)),
    "float indices": lambda d: torch.embedding_bag(ones(d, 4, 3), t(d, [0.0, 1.0]), t(d, [0]), False, 0),
    "float offsets": lambda d: torch.embedding_bag(ones(d, 4, 3), t(d, [0, 1]), t(d, [0.0]), False, 0),
    "int64 weight": lambda d: torch.embedding_bag(ones(d, 4, 3, dtype=torch.int64), t(d, [0, 1]), t(d, [0]), False, 0),
    "no offsets, last included": lambda d: torch.embedding_bag(
        ones(d, 4, 3), t(d, [0, 1]), t(d, [0])[:0], False, 0, False, None, True
    )[0],
    "2-d offsets": lambda d: torch.ops.aten._embedding_bag(ones(d, 4, 3), t(d, [0, 1]), t(d, [[0]]))[0],
}


@pytest.fixture
def two_threads():
    """CPU's fbgemm path reports decreasing offsets chunk by chunk, a chunk per thread; the device
    follows torch.get_num_threads(), so pin it where both sides are compared."""
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    yield
    torch.set_num_threads(threads)


@pytest.mark.parametrize("case", list(EMBEDDING_BAG_CASES))
def test_embedding_bag_offsets_as_on_cpu(case, two_threads):
    same_outcome(EMBEDDING_BAG_CASES[case])
