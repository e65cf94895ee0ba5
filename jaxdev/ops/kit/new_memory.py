"""What new memory holds: nothing a kernel writes, except under torch.use_deterministic_algorithms(True)
with fill_uninitialized_memory, where CPU fills it (`uninitialised_value`), read by empty tensors
(ops/creation/fills.py), new views' storages (ops/views.py) and weight_norm's unused outputs."""

from __future__ import annotations

import torch

from jaxdev import dtypes


def uninitialised_value(dtype: torch.dtype):
    """What CPU writes into new memory under torch.use_deterministic_algorithms(True) with
    torch.utils.deterministic.fill_uninitialized_memory (fill_empty_deterministic_): NaN for floating and
    complex dtypes (NaN + 0j), the largest value for integers, True for bool; None when not asked (jax
    memory is zeros then). The raw bit dtypes have no such value: CPU refuses them, and so does this."""
    if not (torch._C._get_deterministic_algorithms() and torch._C._get_deterministic_fill_uninitialized_memory()):
        return None
    if dtype in dtypes.BYTE_CARRIERS:
        raise dtypes.RawBytesDtypeError(
            f"dtype {dtype} holds raw bits, which have no value to fill uninitialised memory with under "
            "torch.use_deterministic_algorithms(True) (CPU refuses it too)"
        )
    if dtype.is_floating_point or dtype.is_complex:
        return float("nan")
    return True if dtype == torch.bool else torch.iinfo(dtype).max
