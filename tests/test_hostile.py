"""What a user can pass that CPU rejects, jax rejects the same way: never a crash."""

from __future__ import annotations

import pytest
import torch
from jaxdev_testing import on_both


@pytest.mark.parametrize(
    "make",
    [
        lambda d: torch.empty((), dtype=torch.float64, device=d).resize_([2, 4, 2**29, 2**29]),
        lambda d: torch.empty([2**62, 4], device=d),
        lambda d: torch.empty_strided([2**40, 2**30], [2**30, 1], device=d),
        lambda d: torch.empty([3, -1], device=d),
        lambda d: torch.zeros([-2], device=d),
        lambda d: torch.empty(2, 3, device=d).resize_([-2]),
        lambda d: torch.empty(2, 3, device=d).new_empty_strided([2**40, 2**40], [2**40, 1]),
    ],
)
def test_sizes_that_overflow_or_go_negative_raise_cpus_error(make):
    err = on_both(make)
    assert isinstance(err, RuntimeError)


def test_out_of_memory_is_torchs_error_and_the_device_keeps_working():
    with pytest.raises(torch.OutOfMemoryError, match="jax:0 is out of memory"):
        torch.empty(2**40, dtype=torch.uint8, device="jax")  # 1 TiB
    with pytest.raises(torch.OutOfMemoryError):
        torch.ones(2**38, device="jax")
    assert (torch.ones(3, device="jax") + 1).cpu().tolist() == [2, 2, 2]
