"""What PyTorch refuses, as PyTorch refuses it: layouts whose sizes overflow (checked before XLA sees
them: it aborts the process on such an extent), writes through overlapping memory, and XLA's
RESOURCE_EXHAUSTED as `torch.OutOfMemoryError`. Pure checks: nothing here holds state."""

from __future__ import annotations

import contextlib
import math

import jax
import torch

_MAX_BYTES = 2**63 - 1
_U64 = 2**64


def _u64_product_overflows(factors) -> tuple[bool, int]:
    """c10::safe_multiply_u64: the factors as uint64 (a negative size wraps), overflow sticky."""
    prod, over = 1, False
    for f in factors:
        prod *= f % _U64
        if prod >= _U64:
            over, prod = True, prod % _U64
    return over, prod


def numel_overflows(shape) -> bool:
    """TensorImpl::safe_compute_numel's check ("numel: integer multiplication overflow")."""
    over, prod = _u64_product_overflows(shape)
    return over or prod > _MAX_BYTES


def contiguous_strides_overflow(shape) -> bool:
    """TensorImpl::empty_tensor_restride's check ("Stride calculation overflowed")."""
    acc = 1
    for n in reversed(tuple(shape)[1:]):
        acc *= max(n, 1)
        if acc > _MAX_BYTES:
            return True
    return False


def storage_nbytes_overflows(shape, strides, itemsize: int, explicit_strides: bool, offset: int = 0) -> bool:
    """c10's computeStorageNbytes(Contiguous): the storage's byte count overflows (in uint64, as CPU
    counts it: a negative stride of a dim of size > 1 overflows) or passes int64."""
    if not explicit_strides:
        over, size = _u64_product_overflows([*shape, 1])
        size += offset
    else:
        over, size = False, offset + 1
        for n, s in zip(shape, strides):
            if n == 0:
                return False
            strided = (s % _U64) * ((n - 1) % _U64)
            over |= strided >= _U64
            size += strided % _U64
            if size >= _U64:
                over, size = True, size % _U64
    size *= itemsize
    return over or size > _MAX_BYTES


def _overflowed(shape, strides, explicit_strides: bool) -> RuntimeError:
    where = f" and strides={list(strides)}" if explicit_strides else ""
    return RuntimeError(f"Storage size calculation overflowed with sizes={list(shape)}{where}")


def check_layout(shape, strides, itemsize: int, explicit_strides: bool) -> None:
    """PyTorch's checks on a new tensor's layout, in empty's order and with its messages: negative
    sizes, a byte count that overflows (XLA would abort the process on such an extent), then the
    element count and the contiguous strides overflowing int64."""
    if any(n < 0 for n in shape):
        first = next(n for n in shape if n < 0)
        raise RuntimeError(f"Trying to create tensor with negative dimension {first}: {list(shape)}")
    if storage_nbytes_overflows(shape, strides, itemsize, explicit_strides):
        raise _overflowed(shape, strides, explicit_strides)
    if numel_overflows(shape):
        raise RuntimeError("numel: integer multiplication overflow")
    if not explicit_strides and contiguous_strides_overflow(shape):
        raise RuntimeError("Stride calculation overflowed")


def xla_extent_overflows(shape) -> bool:
    """XLA aborts the process on a shape whose sizes multiply past int64, even one holding no
    elements (PyTorch allows [2**62, 3, 0])."""
    return math.prod(n for n in shape if n) > _MAX_BYTES


@contextlib.contextmanager
def out_of_memory_as_torch():
    """XLA's RESOURCE_EXHAUSTED as `torch.OutOfMemoryError`, which training tools catch (to shrink a
    batch, say); the process goes on working."""
    try:
        yield
    except jax.errors.JaxRuntimeError as e:
        raise_if_out_of_memory(e)
        raise


def raise_if_out_of_memory(error: Exception) -> None:
    if "RESOURCE_EXHAUSTED" in str(error):
        raise torch.OutOfMemoryError(f"jax:0 is out of memory: {str(error).splitlines()[0]}") from None


# --- overlapping memory ----------------------------------------------------------------------


def is_non_overlapping_and_dense(t: torch.Tensor) -> bool:
    """Some permutation of the dims is contiguous."""
    return dense_layout(t.shape, t.stride())


def dense_layout(shape, strides) -> bool:
    """(shape, strides) is some permutation of a contiguous layout (size-1 dims' strides are free)."""
    expected = 1
    for stride, size in sorted((s, n) for n, s in zip(shape, strides) if n != 1):
        if stride != expected:
            return False
        expected *= size
    return True


def check_no_partial_overlap(out: torch.Tensor, inputs, full_too: bool = False) -> None:
    """PyTorch's assert_no_partial_overlap between a written tensor and its inputs; with `full_too`, its
    assert_no_overlap, which also refuses a full overlap (the same memory with the same strides: the
    written tensor itself, as the index of index_add_ or the source of scatter_).

    Fake storage addresses are unique and spaced apart, so data_ptr ranges compare like real ones. They
    are read without materializing a copy-on-write storage (Python's data_ptr() asks for the mutable
    pointer): an input stays shared as on CPU, where the check reads `TensorImpl::data()`; and two
    storages sharing data copy-on-write do not overlap (CPU's `Storage::is_alias_of` is false for
    them): the write makes `out`'s storage its own."""
    dense = out.numel() != 0 and is_non_overlapping_and_dense(out)
    if not dense and not full_too:
        return
    a_begin = _begin(out)
    a_end = a_begin + out.numel() * out.element_size()
    for t in inputs:
        if t is out:
            if full_too:
                raise _overlap_error()
            continue
        if not dense or not isinstance(t, torch.Tensor) or t.device.type != "jax" or t.numel() == 0:
            continue
        if not is_non_overlapping_and_dense(t):
            continue
        if torch._C._is_cow_tensor(out) and torch._C._storage_address(t) != torch._C._storage_address(out):
            continue
        b_begin = _begin(t)
        b_end = b_begin + t.numel() * t.element_size()
        full = a_begin == b_begin and a_end == b_end and out.stride() == t.stride()
        if (full and full_too) or (not full and a_begin < b_end and b_begin < a_end):
            raise _overlap_error()


def _begin(t: torch.Tensor) -> int:
    return torch._C._data_address(t) + t.storage_offset() * t.element_size()


def _overlap_error() -> RuntimeError:
    return RuntimeError(
        "unsupported operation: some elements of the input tensor and the written-to tensor "
        "refer to a single memory location. Please clone() the tensor before performing the "
        "operation."
    )


def check_no_internal_overlap(t: torch.Tensor) -> None:
    if any(s == 0 and n > 1 for n, s in zip(t.shape, t.stride())):
        raise RuntimeError(
            "unsupported operation: more than one element of the written-to tensor refers to a "
            "single memory location. Please clone() the tensor before performing the operation."
        )
