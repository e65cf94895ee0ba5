"""Kernels that once gave a different answer from CPU: each test pins the cause that was fixed
(where CPU rounds to the half dtype between steps, the formula branch it takes, the dtype it
returns), bit for bit where CPU's arithmetic is reproducible, with JAXDEV_FALLBACK=error."""

from __future__ import annotations

import pytest
import torch
from jaxdev_testing import on_both

import jaxdev

HALF = [torch.bfloat16, torch.float16]


@pytest.fixture(autouse=True)
def no_fallback(monkeypatch):
    monkeypatch.setenv("JAXDEV_FALLBACK", "error")
    jaxdev.reset_fallback_counts()
    yield
    assert jaxdev.fallback_counts() == {}


def _randn(*shape, dtype=torch.float32, scale=1.0, seed=0):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(*shape, generator=g) * scale).to(dtype)


# --- addr: CPU evaluates beta*self + (alpha*vec1)*vec2 left to right, rounding each half step ----------


@pytest.mark.parametrize("dtype", HALF)
def test_addr_half_rounds_every_step(dtype):
    s, a, b = _randn(50, 60, dtype=dtype, scale=100), _randn(50, dtype=dtype, seed=1), _randn(60, dtype=dtype, seed=2)
    on_both(lambda d: torch.addr(s.to(d), a.to(d), b.to(d), beta=0.6, alpha=0.2))
    on_both(lambda d: torch.addr(s.to(d), a.to(d), b.to(d), alpha=0.2))  # beta 1 still rounds alpha*vec1 first
    out = torch.empty(50, 60, dtype=dtype)
    on_both(lambda d: torch.addr(s.to(d), a.to(d), b.to(d), beta=0.3, alpha=3, out=out.to(d)))


def test_addr_scalars_and_dtypes():
    nan = torch.full((2, 2), float("nan"), dtype=torch.float16)
    one = torch.ones(2, dtype=torch.float16)
    on_both(lambda d: torch.addr(nan.to(d), one.to(d), one.to(d), beta=1e-10, alpha=2))  # beta rounds to 0: NaN ignored
    u = torch.full((2, 2), 3, dtype=torch.uint8)
    on_both(lambda d: torch.addr(u.to(d), u[0].to(d), u[0].to(d), alpha=-1))  # wraps like CPU
    on_both(lambda d: torch.addr(u.to(d), u[0].to(d), u[0].to(d), alpha=300), match="without overflow")
    i = torch.ones(2, 2, dtype=torch.int32)
    on_both(lambda d: torch.addr(i.to(d), one.float().to(d), one.float().to(d), beta=0.5))  # promotes to float32
    on_both(lambda d: torch.addr(i.to(d), i[0].to(d), i[0].to(d), beta=0.5), match="must not be a floating point")
    on_both(
        lambda d: torch.addr(i.float().to(d), one.float().to(d), one.float().to(d), beta=True), match="Boolean beta"
    )
    t = torch.tensor([True, False, True])
    bools = torch.ones(3, 4, dtype=torch.bool)
    on_both(lambda d: torch.addr(bools.to(d), t.to(d), bools[0].to(d), beta=False))
    on_both(lambda d: torch.addr(bools.to(d), t.to(d), bools[0].to(d), alpha=2))
    on_both(lambda d: torch.addr(torch.ones(3, 5, device=d), torch.ones(3, device=d), torch.ones(4, device=d)))
    on_both(lambda d: torch.addr(torch.ones(3, 4, device=d), torch.ones(3, 1, device=d), torch.ones(4, device=d)))
