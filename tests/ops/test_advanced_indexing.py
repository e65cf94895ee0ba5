"""Boolean masks: reads, writes and nonzero match CPU, and a new count of true values does not
compile a new program for the write (one program per mask shape)."""

from __future__ import annotations

import pytest
import torch
from jaxdev_testing import JAX, on_both

from jaxdev.ops import advanced_indexing

g = torch.Generator().manual_seed(0)
X = torch.randn(4, 5, 3, generator=g)
M1, M2, M3 = torch.rand(4, generator=g) > 0.5, torch.rand(4, 5, generator=g) > 0.5, torch.rand(5, 3, generator=g) > 0.3


def _set(t, index, value):
    t = t.clone()
    t[index] = value
    return t


CASES = {
    "read_leading": lambda d: X.to(d)[M1.to(d)],
    "read_two_dims": lambda d: X.to(d)[M2.to(d)],
    "read_after_slice": lambda d: X.to(d)[:, M3.to(d)],
    "read_mask_and_int": lambda d: X.to(d)[M2.to(d), 1],
    "read_none_true": lambda d: X.to(d)[torch.zeros(4, dtype=torch.bool, device=d)],
    "write_scalar": lambda d: _set(X.to(d), M1.to(d), 7.0),
    "write_broadcast_row": lambda d: _set(X.to(d), M2.to(d), torch.arange(3.0, device=d)),
    "write_rows_in_order": lambda d: _set(X.to(d), M2.to(d), torch.arange(float(M2.sum() * 3), device=d).view(-1, 3)),
    "write_after_slice": lambda d: _set(X.to(d), (slice(None), M3.to(d)), torch.arange(float(M3.sum()), device=d)),
    "write_wrong_count": lambda d: _set(X.to(d), M2.to(d), torch.ones(2, device=d)),
    "write_wrong_rows": lambda d: _set(X.to(d), M1.to(d), torch.ones(int(M1.sum()) + 1, 5, 3, device=d)),
    "write_wrong_dtype": lambda d: _set(X.to(d), M1.to(d), torch.ones(5, 3, dtype=torch.float64, device=d)),
    "write_mask_too_long": lambda d: _set(X.to(d), torch.ones(4, 6, dtype=torch.bool, device=d), 1.0),
    "accumulate": lambda d: X.to(d).index_put((M2.to(d),), torch.ones(3, device=d), accumulate=True),
    "accumulate_bool": lambda d: (X > 0).to(d).index_put((M2.to(d),), torch.tensor(True, device=d), accumulate=True),
    "accumulate_int": lambda d: (
        torch.arange(20, device=d).view(4, 5).index_put((M2.to(d),), torch.tensor(3, device=d), accumulate=True)
    ),
    "masked_select": lambda d: torch.masked_select(X.to(d), M3.to(d)),
    "nonzero": lambda d: torch.nonzero(X.to(d) > 0).contiguous(),
    "nonzero_scalar": lambda d: torch.nonzero(torch.tensor(1.0, device=d)),
    "where_one_arg": lambda d: torch.stack(torch.where(M2.to(d))),
}


@pytest.mark.parametrize("name", list(CASES))
def test_mask_like_cpu(name):
    on_both(CASES[name])


def test_mask_gradient_like_cpu():
    def grad(d):
        x = X.to(d, copy=True).requires_grad_()
        (x[M2.to(d)] * torch.arange(3.0, device=d)).sum().backward()
        return x.grad

    on_both(grad)


def test_new_counts_reuse_one_write_program():
    x = torch.zeros(64, device=JAX)
    x[torch.arange(64, device=JAX) < 1] = 1.0
    program = advanced_indexing._put_through_mask(0, False)  # one per masked dim and accumulate
    before = program._cache_size()
    for k in range(2, 8):
        x[torch.arange(64, device=JAX) < k] = float(k)
    assert program._cache_size() == before
    assert x.cpu()[:8].tolist() == [7.0] * 7 + [0.0]
