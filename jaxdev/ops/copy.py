"""Moving values: copy_ in both directions, item(), and the copy helpers PyTorch calls."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import torch

from jaxdev import layout, native, tensor, tracing
from jaxdev.core import placement
from jaxdev.device import check_index
from jaxdev.ops import registry
from jaxdev.ops.kit import cast
from jaxdev.ops.registry import aten, register
from jaxdev.tensor import is_jax


def _from_cpu(src: torch.Tensor, non_blocking: bool):
    """A CPU tensor's values as a jax array: from pinned memory with non_blocking, the transfer is left
    running (placement.to_jax_async); otherwise copied first, so the source may change as soon as we return."""
    value = placement.to_jax_async(src) if non_blocking else None
    return tensor.from_cpu(src) if value is None else value


def copy_into(dst: torch.Tensor, src: torch.Tensor, non_blocking: bool = False) -> torch.Tensor:
    if is_jax(dst):
        tensor.check_no_partial_overlap(dst, (src,))
        value = tensor.read(src) if is_jax(src) else _from_cpu(src, non_blocking)
        shape = tuple(dst.shape)
        try:
            if value.shape != shape:  # eager broadcast_to costs microseconds even when it has nothing to do
                value = jnp.broadcast_to(value, shape)
        except ValueError:
            raise RuntimeError(
                f"The size of tensor a ({list(dst.shape)}) must match the size of tensor b "
                f"({list(src.shape)}) for copy_"
            ) from None
        tensor.write(dst, cast(value, dst.dtype))
        return dst
    # jax -> CPU (or another device): bring the values to CPU, then use that device's copy_.
    dst.copy_(tensor.to_cpu(tensor.read(src), src.dtype))
    return dst


# The 0-d tensor PyTorch's argument parser makes of a Python number passed as a Tensor (a "wrapped
# number"): CPU's copy_ receives one; a registered kernel receives the number itself.
_WRAPPED_DTYPE = {bool: torch.bool, int: torch.int64, float: torch.float64, complex: torch.complex128}


@register(aten.copy_.default)
def copy_(self, src, non_blocking=False):
    if not isinstance(src, torch.Tensor):  # x.copy_(float('inf')): converted as CPU's copy_ converts it
        src = torch.tensor(src, dtype=_WRAPPED_DTYPE[type(src)]).to(self.dtype)
    return copy_into(self, src, non_blocking)


@register(aten._copy_from.default)
def _copy_from(self, dst, non_blocking=False):
    return copy_into(dst, self, non_blocking)


@register(aten._copy_from_and_resize.default)
def _copy_from_and_resize(self, dst):
    if tuple(dst.shape) != tuple(self.shape):
        dst.resize_(self.shape)
    return copy_into(dst, self)


def _strides_for(self, memory_format):
    """The strides PyTorch gives a copy of `self` (None: contiguous)."""
    if memory_format is torch.contiguous_format:  # `.contiguous()`: the hot case
        return None
    if memory_format == torch.preserve_format:
        if layout.is_plain(self):  # contiguous with the default strides
            return None
        # Contiguous by the flag but with other strides in size-1/size-0 dims ((2, 1, 3) with (3, 7, 1)):
        # CPU's empty_like keeps them, as it keeps any dense layout.
        if self.is_contiguous() or tensor.is_non_overlapping_and_dense(self):
            return self.stride()
        # Not dense (a strided slice, an expanded tensor): CPU's empty_like infers dense strides in the
        # input's order of dims (infer_dense_strides), TensorIterator's rule for one operand; (6, 5, 3)
        # with strides (2, 12, 60) clones to (1, 6, 30), not contiguous (OpInfo's reference inputs).
        return layout.elementwise_strides([(tuple(self.shape), tuple(self.stride()))])
    return tensor.strides_for(self.shape, memory_format)


def _jax_copy(self, value, dtype, memory_format):
    strides = _strides_for(self, memory_format)
    if dtype is not self.dtype:
        value = cast(value, dtype)
    if strides is None:
        return tensor.wrap(value)
    out = tensor.empty(self.shape, dtype, strides)
    tensor.write(out, value)
    return out


def clone(self, *, memory_format=torch.preserve_format):
    if self.numel() == 0:  # nothing to read (and XLA may not hold the shape: [2**62, 3, 0])
        return tensor.empty(self.shape, self.dtype, _strides_for(self, memory_format))
    return _jax_copy(self, tensor.read(self), self.dtype, memory_format)


# `.contiguous()` and clone of a plain tensor, natively: the views' read programs come from here.
registry.register_clone(aten.clone.default, clone, tensor.view_reader)


@register(aten._to_copy.default)
def _to_copy(self, *, dtype=None, layout=None, device=None, pin_memory=None, non_blocking=False, memory_format=None):
    dtype = dtype or self.dtype
    memory_format = memory_format or torch.preserve_format
    device = torch.device(device) if device is not None else self.device
    if device.type == "jax":
        if device.index:
            check_index(device.index)
        # BackendSelect routes CPU -> jax here too (the `device` argument picks the backend).
        value = tensor.read(self) if is_jax(self) else _from_cpu(self, non_blocking)
        return _jax_copy(self, value, dtype, memory_format)
    # To CPU, non_blocking or not, the copy is done when this returns: np.asarray waits for the values.
    strides = _strides_for(self, memory_format)
    if self.numel() == 0:  # nothing to read (and XLA may not hold the shape: [2**62, 3, 0])
        return torch.empty_strided(
            self.shape, strides or tensor.contiguous_strides(self.shape), dtype=dtype, device=device
        )
    values = tensor.to_cpu(tensor.read(self), self.dtype)
    out = torch.empty_strided(self.shape, strides or values.stride(), dtype=dtype, device=device)
    return out.copy_(values)


@register(aten._local_scalar_dense.default)
def _local_scalar_dense(self):
    """The tensor's first element, as CPU's kernel reads it (it takes a many-element tensor's first
    element; `.item()` checks the count before it gets here)."""
    if self.numel() == 0:
        raise RuntimeError("_local_scalar_dense: Empty tensor not supported")
    tracing.resolve_checks()
    value = tensor.read(self)
    return np.asarray(value if value.ndim == 0 else value[(0,) * value.ndim]).item()


@register(aten._assert_async.default, aten._assert_async.msg)
def _assert_async(self, assert_msg=None):
    """CPU's check that a one-element tensor is nonzero, which compiled graphs state for torch._check and
    for decompositions (one_hot's class range): eagerly it raises at once as CPU does; traced, its flag
    is an output of the program, read later (tracing.check_values), so the graph stays one program
    where the CPU fallback, which needs the value, made it run op by op."""
    if self.numel() != 1:
        raise RuntimeError(
            f"Boolean value of Tensor with {'no values' if self.numel() == 0 else 'more than one value'} is ambiguous"
        )
    message = assert_msg or "Expected Tensor with single nonzero value, but got zero"
    tracing.check_values(tensor.read(self).reshape(()) == 0, lambda: RuntimeError(message))


@register(aten._lazy_clone.default)
def _lazy_clone(self):
    """A copy-on-write clone, as CPU's: self's storage and the result's share one address and one box
    until either is written (jaxdev/csrc/cow.cpp), so `torch._C._is_cow_tensor` and `_data_address`
    answer as on CPU. Where c10 cannot share the storage (no native module, a storage sharded over a
    mesh or made outside jaxdev's allocator) the storage is cloned now, which copies no bytes either:
    the new box holds the same immutable jax array until one side writes."""
    if native.module is not None:
        box = tensor.BOXES.get(torch._C._data_address(self))
        if box is not None and type(box) is not tensor.Box:
            _ = box.array  # a fused eager value still pending: computed now, the box is then a plain Box
        if box is not None and not (tensor.SHARDED_ENTRIES and box in tensor.SHARDED):
            shared = native.module.lazy_clone(self)
            if shared is not None:
                return shared
    storage = self.untyped_storage().clone()
    return tensor.tensor_on_storage(storage, self.dtype, tuple(self.shape), self.stride(), self.storage_offset())
