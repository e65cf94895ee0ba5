"""View ops and storage metadata ops, run by PyTorch's own CPU kernels.

A view's CPU kernel writes only TensorImpl metadata (sizes, strides, offset) and shares the input's
storage; it never touches data. Run on a jax tensor, it yields a jax tensor on the same storage (so
the same Box): views cost no JAX work and have PyTorch's exact strides and errors.
"""

from __future__ import annotations

import jax.numpy as jnp
import torch

from jaxdev import dtypes, tensor
from jaxdev.core import plans
from jaxdev.ops.kit import new_memory
from jaxdev.ops.registry import aten, register, register_on_cpu_kernel

_CPU = torch._C.DispatchKeySet(torch._C.DispatchKey.CPU)

# Ops whose CPU kernel is pure metadata: views (they return an alias of their input), is_set_to.
METADATA_VIEWS = [
    aten.view.default,
    aten.view.dtype,
    aten.as_strided.default,
    aten._reshape_alias.default,
    aten.unfold.default,
    aten.view_as_real.default,
    aten.view_as_complex.default,
    aten.as_strided_.default,
    aten.set_.source_Tensor,
    aten.is_set_to.default,  # not a view: a comparison of storages and geometry, metadata only
]


def _on_cpu_metadata(op):
    handle = op._handle

    def kernel(*args, **kwargs):
        return handle.redispatch_boxed(_CPU, *args, **kwargs)

    return kernel


for _op in METADATA_VIEWS:
    register_on_cpu_kernel(_op)(_on_cpu_metadata(_op))


def _set_and_retype(op):
    run = _on_cpu_metadata(op)

    def kernel(self, *args, **kwargs):
        out = run(self, *args, **kwargs)
        # Read without the mutable pointer (box_of's data_ptr()), so that setting a tensor to a
        # copy-on-write storage leaves it shared, as CPU's set_ does (a storage's .cpu() and .tolist()
        # go through here); only a bytes-only box that takes a dtype is written, and made its own first.
        box = tensor.BOXES.get(torch._C._data_address(self))
        if box is None or (box.untyped and dtypes.STORED_AS.get(self.dtype, self.dtype) != box.dtype):
            box = tensor.box_of(self)
        box.retype(self.dtype)
        return out

    return kernel


set_storage_offset = register(aten.set_.source_Storage_storage_offset)(
    _set_and_retype(aten.set_.source_Storage_storage_offset)
)


@register(aten.set_.source_Storage)
def set_storage(self, source):
    return set_storage_offset(self, source, 0, [source.nbytes() // self.dtype.itemsize], [1])


@register(aten.set_.default)
def set_empty(self):
    fresh = tensor.empty([0], self.dtype)
    return _on_cpu_metadata(aten.set_.source_Tensor)(self, fresh)


def _grown(self, needed: int) -> torch.UntypedStorage:
    """A new storage of `needed` elements of self's dtype that keeps the old storage's bytes, whatever
    dtype wrote them (CPU reallocates and copies the bytes); the new elements are zeros, or what CPU's
    deterministic mode fills new memory with (new_memory.uninitialised_value)."""
    old = tensor.box_of(self)
    stored = dtypes.STORED_AS.get(self.dtype, self.dtype)
    jdt = dtypes.to_jax_dtype(stored)
    flat = old.flat()
    if old.dtype != stored:  # a dtype view of the storage: its whole elements of the new dtype
        raw = plans.to_bytes(flat)
        flat = plans.from_bytes(raw[: raw.shape[0] // stored.itemsize * stored.itemsize], jdt)
    fill = new_memory.uninitialised_value(self.dtype)
    with tensor.out_of_memory_as_torch():
        new = tensor.zeros(needed, jdt) if fill is None else jnp.full((needed,), fill, jdt)
        grown = new.at[: flat.shape[0]].set(flat[:needed])
    return tensor.new_storage(tensor.Box(grown, needed, stored))


@register(aten.resize_.default)
def resize_(self, size, memory_format=None):
    size = [int(s) for s in size]
    if memory_format is torch.preserve_format:
        raise RuntimeError("Unsupported memory formatPreserve")  # CPU's message, word for word
    if memory_format is None and size == list(self.shape):
        return self  # resize_impl_cpu_: unchanged sizes keep their strides (resize_as_(x) of a transposed x)
    # CPU's order (resize_impl_cpu_): the sizes are set first (numel, then strides), then the storage
    # grown; a negative size whose product is still 0 passes, as on CPU
    if tensor.numel_overflows(size):
        raise RuntimeError("numel: integer multiplication overflow")
    if tensor.contiguous_strides_overflow(size):
        raise RuntimeError("Stride calculation overflowed")
    strides = list(tensor.strides_for(size, memory_format) or tensor.contiguous_strides(size))
    if tensor.storage_nbytes_overflows(size, strides, self.dtype.itemsize, False, self.storage_offset()):
        raise RuntimeError(f"Storage size calculation overflowed with sizes={size}")
    needed = 0 if 0 in size else self.storage_offset() + tensor.span(size, strides)
    capacity = self.untyped_storage().nbytes() // self.dtype.itemsize
    storage = self.untyped_storage() if needed <= capacity else _grown(self, needed)
    aten.set_.source_Storage_storage_offset._handle.redispatch_boxed(
        _CPU, self, storage, self.storage_offset(), size, strides
    )
    return self
