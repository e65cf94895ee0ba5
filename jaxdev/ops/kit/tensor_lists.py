"""Tensor lists written by one program: what foreach ops (jaxdev/ops/foreach.py) and the fused optimizer
steps (jaxdev/ops/fused_optimizers.py) share. Each takes a list call whole only where every tensor is
a jax tensor that is its whole storage; it reads their arrays, and stores the results back as the
per-tensor in-place ops would."""

from __future__ import annotations

import torch

from jaxdev import native, tensor, tracing


def whole(t):
    """The array of jax tensor `t` when `t` is its whole storage, row-major (tensor.plain_array), also where
    the box holds it in another shape (a bias's gradient, a view of a [1, n] sum: the read reshapes
    the box's array in place); else None."""
    array = tensor.plain_array(t)
    if array is not None or not tensor.is_jax(t) or t.storage_offset() or not t.is_contiguous() or t.is_conj():
        return array
    box = tensor.BOXES.get(torch._C._data_address(t))  # a read: leaves copy-on-write data shared
    if type(box) is not tensor.Box or box.dtype is not t.dtype or box.numel != t.numel() or t.is_neg():
        return None
    return tensor.read(t)


def wholes(tensors) -> list:
    """[whole(t) for t in tensors] (a Tensor[] argument), in one native call where every one is plain: an
    optimizer's list of 76 parameters cost ~40 us a list through whole, one call each."""
    if _plain_values is not None:
        arrays = _plain_values(tensors)
        if arrays is not None:
            return arrays
    return [whole(t) for t in tensors]


_plain_values = native.module.plain_values if native.module is not None else None


def may_take(tensors, inplace: bool) -> bool:
    """Whether a program may take the call at all: a non-empty list, no storage placed over a mesh, not
    traced (torch.compile: the loop's kernels trace themselves), and no inference tensor written outside
    inference mode (the loop's per-tensor ops raise PyTorch's error)."""
    if not isinstance(tensors, (list, tuple)) or not tensors or tensor.SHARDED_ENTRIES:
        return False
    if tensor.in_scratch() and not tracing.fused_trace():  # fused eager's programs take it whole, as eagerly
        return False
    return not (inplace and not torch.is_inference_mode_enabled() and any(t.is_inference() for t in tensors))


def boxes(selfs) -> list:
    return [tensor.BOXES[t.untyped_storage().data_ptr()] for t in selfs]


def store(selfs, boxes: list, results) -> None:
    """The in-place results into their storages. An in-place list op has no ADInplaceOrView kernel of
    its own: the loop's per-tensor ops bump each tensor's version counter, and so must one program (as
    CUDA's foreach kernels do), or autograd misses a saved tensor changed in place and computes a wrong
    gradient silently."""
    torch._C._increment_version(list(selfs))
    for box, r in zip(boxes, results):
        box.writes += 1
        box.array = r
