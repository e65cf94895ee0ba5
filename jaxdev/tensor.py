"""The jax-backed tensor and its aliasing model: strided storage.

Why this model (of the three in DESIGN.md): PyTorch's own view semantics live in TensorImpl
metadata (sizes, strides, storage offset, a shared Storage). jaxdev keeps all of that real:

* Every jax tensor is a plain `torch.Tensor` with keys PrivateUse1/AutogradPrivateUse1 whose
  TensorImpl has true sizes, strides and storage offset, and a real (data-less) Storage of the right
  byte size. The storage's data pointer is a unique fake address, never dereferenced: it names the
  storage.
* The bytes live in a `Box`: one mutable holder of a jax.Array with the storage's elements in
  row-major order. `BOXES` maps a storage's fake address to its box.
* A view op (view, as_strided, select, transpose, expand, ...) therefore needs no JAX work at all:
  PyTorch's own CPU kernel for it only writes metadata and shares the storage, so jaxdev runs that
  kernel on the jax tensor (see ops/views.py). Strides, `is_contiguous()`, `_base`, "view size is not
  compatible" errors and `as_strided` are PyTorch's own, exactly.
* Reading a tensor gathers its elements from the box (nothing to do in the common case of a
  contiguous tensor that spans its storage); writing one scatters them back and replaces the box's
  array, so every alias (base, sibling views, views of views) sees the write.
* In-place ops are registered as such, so ADInplaceOrView bumps version counters and autograd still
  raises "modified by an inplace operation".

The alternatives were rejected for this reason: view chains (2) replay view ops in Python and cannot
express `as_strided` or strides; functionalization (3) only stops at XLA/Lazy devices in `_to_copy`
and hands users wrapper tensors.
"""

from __future__ import annotations

import functools
import itertools

import jax
import jax.numpy as jnp
import numpy as np
import torch

from jaxdev import dtypes

DEVICE = torch.device("jax", 0)
_CPU_KEYS = torch._C.DispatchKeySet(torch._C.DispatchKey.CPU)
_set_storage = torch.ops.aten.set_.source_Storage_storage_offset._handle
_make_storage = torch._C._construct_storage_from_data_pointer
_create_empty = torch._C._acc.create_empty_tensor
_expired = torch.UntypedStorage._expired
_free_weak_ref = torch.UntypedStorage._free_weak_ref

# Fake addresses: far above any real mapping, 64-byte aligned, never reused.
_next_address = itertools.count(1 << 52, 1 << 40)


class Box:
    """The contents of one storage: `array` holds `numel` elements of `dtype`, row-major."""

    __slots__ = ("array", "numel", "dtype", "weak", "untyped", "__weakref__")

    def __init__(self, array: jax.Array, numel: int, dtype: torch.dtype):
        self.array = array
        self.numel = numel
        self.dtype = dtype
        self.weak = None
        self.untyped = False  # bytes from an untyped storage: retyped by the first tensor set on it

    def retype(self, dtype: torch.dtype) -> None:
        if self.untyped and dtype != self.dtype:
            self.array = _bitcast_flat(self.flat(), dtype)
            self.numel = self.array.shape[0]
            self.dtype = dtype
        self.untyped = False

    def flat(self) -> jax.Array:
        a = self.array
        return a if a.ndim == 1 else a.reshape(-1)


BOXES: dict[int, Box] = {}
# A box outlives its storage until the next sweep. Sweep when the number of boxes doubles (so the
# cost stays amortised O(1) per allocation) or when 256 MiB were allocated since the last sweep
# (so dead arrays never pin much device memory).
_sweep_above = 4096
_SWEEP_BYTES = 256 << 20
_bytes_since_sweep = 0


def _sweep() -> None:
    """Drop the boxes whose storage no tensor holds any more."""
    global _sweep_above, _bytes_since_sweep
    dead = [addr for addr, box in BOXES.items() if _expired(box.weak)]
    for addr in dead:
        _free_weak_ref(BOXES.pop(addr).weak)
    _sweep_above = max(4096, 2 * len(BOXES))
    _bytes_since_sweep = 0


def new_storage(box: Box) -> torch.UntypedStorage:
    global _bytes_since_sweep
    addr = next(_next_address)
    nbytes = box.numel * box.dtype.itemsize
    storage = _make_storage(addr, DEVICE, nbytes)
    box.weak = storage._weak_ref()
    BOXES[addr] = box
    _bytes_since_sweep += nbytes
    if len(BOXES) > _sweep_above or _bytes_since_sweep > _SWEEP_BYTES:
        _sweep()
    return storage


_STRIDES: dict[tuple, tuple] = {}


def contiguous_strides(shape) -> tuple[int, ...]:
    shape = tuple(shape)
    strides = _STRIDES.get(shape)
    if strides is None:
        acc, out = 1, []
        for n in reversed(shape):
            out.append(acc)
            acc *= max(n, 1)
        strides = _STRIDES[shape] = tuple(reversed(out))
    return strides


_NO_SHAPE = [0]


def tensor_on_storage(storage, dtype, shape, strides, offset=0) -> torch.Tensor:
    t = _create_empty(_NO_SHAPE, dtype)
    _set_storage.redispatch_boxed(_CPU_KEYS, t, storage, offset, shape, strides)
    return t


def wrap(array: jax.Array) -> torch.Tensor:
    """A new contiguous jax tensor that owns `array` (its dtype decides the torch dtype)."""
    dtype = dtypes.JAX_TO_TORCH.get(array.dtype) or dtypes.to_torch_dtype(array.dtype)
    shape = array.shape
    storage = new_storage(Box(array, array.size, dtype))
    t = _create_empty(_NO_SHAPE, dtype)
    _set_storage.redispatch_boxed(_CPU_KEYS, t, storage, 0, shape, contiguous_strides(shape))
    return t


def strides_for(shape, memory_format) -> tuple[int, ...] | None:
    """The strides PyTorch gives a new tensor of `shape` in `memory_format` (None: contiguous)."""
    if memory_format in (None, torch.contiguous_format, torch.preserve_format):
        return None
    return torch.empty(shape, device="meta", memory_format=memory_format).stride()


def span(shape, strides) -> int:
    """Elements of storage a tensor with this layout reaches (from its offset)."""
    return 0 if 0 in shape else 1 + sum((n - 1) * s for n, s in zip(shape, strides))


def empty(shape, dtype: torch.dtype, strides=None) -> torch.Tensor:
    """A new jax tensor of `shape` (zero-filled: JAX has no uninitialised memory)."""
    jdt = dtypes.to_jax_dtype(dtype)
    shape = tuple(shape)
    strides = contiguous_strides(shape) if strides is None else list(strides)
    numel = span(shape, strides)
    box = Box(jnp.zeros((numel,), jdt), numel, dtype)
    return tensor_on_storage(new_storage(box), dtype, shape, strides)


def mixed_devices(other: torch.device) -> RuntimeError:
    """The error PyTorch raises when a jax tensor meets a tensor of another device."""
    return RuntimeError(
        f"Expected all tensors to be on the same device, but found at least two devices, "
        f"{DEVICE} and {other}!"
    )


def box_of(t: torch.Tensor) -> Box:
    try:
        return BOXES[t.untyped_storage().data_ptr()]
    except KeyError:
        if t.device.type != "jax":
            raise mixed_devices(t.device) from None
        raise RuntimeError(
            f"jaxdev: this {t.device} tensor has no data (its storage was not made by jaxdev)"
        ) from None


def is_jax(t) -> bool:
    return isinstance(t, torch.Tensor) and t.device.type == "jax"


# --- reading and writing through strides -------------------------------------------------------


def _strided_index(shape, strides, offset):
    idx = offset
    for d, (n, s) in enumerate(zip(shape, strides)):
        axis = [1] * len(shape)
        axis[d] = n
        idx = idx + (jnp.arange(n, dtype=jnp.int64) * s).reshape(axis)
    return jnp.broadcast_to(idx, shape)


def _to_bytes(flat: jax.Array) -> jax.Array:
    if flat.dtype == jnp.bool_:
        return flat.astype(jnp.uint8)
    if jnp.issubdtype(flat.dtype, jnp.complexfloating):
        flat = jnp.stack([flat.real, flat.imag], axis=-1).reshape(-1)
    if flat.dtype.itemsize == 1:
        return jax.lax.bitcast_convert_type(flat, jnp.uint8)
    return jax.lax.bitcast_convert_type(flat, jnp.uint8).reshape(-1)


def _from_bytes(raw: jax.Array, target) -> jax.Array:
    if target == jnp.bool_:
        return raw != 0
    if jnp.issubdtype(target, jnp.complexfloating):
        part = jnp.finfo(target).dtype
        pairs = _from_bytes(raw, part).reshape(-1, 2)
        return jax.lax.complex(pairs[:, 0], pairs[:, 1])
    if target.itemsize == 1:
        return jax.lax.bitcast_convert_type(raw, target)
    return jax.lax.bitcast_convert_type(raw.reshape(-1, target.itemsize), target)


def _flat_as(stored: jax.Array, target) -> jax.Array:
    """The stored elements, flat, reinterpreted as `target` (for view(dtype), view_as_real)."""
    flat = stored.reshape(-1)
    return flat if flat.dtype == target else _from_bytes(_to_bytes(flat), target)


def _bitcast_flat(flat: jax.Array, dtype: torch.dtype) -> jax.Array:
    return _flat_as(flat, dtypes.to_jax_dtype(dtype))


# Everything below runs jitted on the box's array as stored (any shape), so no eager reshape or
# bitcast happens on the way. The offset is traced: slices at different offsets (x[0], x[1], ...)
# share one compiled gather/scatter per (shape, strides, dtype).
@functools.lru_cache(maxsize=4096)
def _gather(shape, strides, target):
    return jax.jit(lambda stored, offset: _flat_as(stored, target)[_strided_index(shape, strides, offset)])


@functools.lru_cache(maxsize=4096)
def _scatter(shape, strides, target):
    def run(stored, value, offset):
        flat = _flat_as(stored, target).at[_strided_index(shape, strides, offset)].set(value)
        return _flat_as(flat, stored.dtype).reshape(stored.shape)

    return jax.jit(run)


@functools.lru_cache(maxsize=4096)
def _reshape(shape):
    return jax.jit(lambda a: a.reshape(shape))


def read(t: torch.Tensor) -> jax.Array:
    """The jax.Array holding the values of jax tensor `t` (exactly its shape and dtype).

    The conjugate and negative bits of lazy `conj()` / `_neg_view()` views are applied here."""
    value = _read_stored(t)
    if t.is_conj():
        value = jnp.conj(value)
    if t.is_neg():
        value = -value
    return value


def _read_stored(t: torch.Tensor) -> jax.Array:
    box = box_of(t)
    if t.dtype is box.dtype and t.storage_offset() == 0 and t.is_contiguous() and t.numel() == box.numel:
        a = box.array
        if a.shape != t.shape:
            a = box.array = _reshape(tuple(t.shape))(a)
        return a
    target = dtypes.TORCH_TO_JAX[t.dtype]
    return _gather(tuple(t.shape), tuple(t.stride()), target)(box.array, t.storage_offset())


def is_non_overlapping_and_dense(t: torch.Tensor) -> bool:
    """Some permutation of the dims is contiguous."""
    expected = 1
    for stride, size in sorted((s, n) for n, s in zip(t.shape, t.stride()) if n != 1):
        if stride != expected:
            return False
        expected *= size
    return True


def check_no_partial_overlap(out: torch.Tensor, inputs) -> None:
    """PyTorch's assert_no_partial_overlap between a written tensor and its inputs.

    Fake storage addresses are unique and spaced apart, so data_ptr ranges compare like real ones."""
    if out.numel() == 0 or not is_non_overlapping_and_dense(out):
        return
    a_begin = out.data_ptr()
    a_end = a_begin + out.numel() * out.element_size()
    for t in inputs:
        if t is out or not isinstance(t, torch.Tensor) or t.device.type != "jax" or t.numel() == 0:
            continue
        if not is_non_overlapping_and_dense(t):
            continue
        b_begin = t.data_ptr()
        b_end = b_begin + t.numel() * t.element_size()
        full = a_begin == b_begin and a_end == b_end and out.stride() == t.stride()
        if not full and a_begin < b_end and b_begin < a_end:
            raise RuntimeError(
                "unsupported operation: some elements of the input tensor and the written-to tensor "
                "refer to a single memory location. Please clone() the tensor before performing the "
                "operation."
            )


def _check_no_internal_overlap(t: torch.Tensor) -> None:
    if any(s == 0 and n > 1 for n, s in zip(t.shape, t.stride())):
        raise RuntimeError(
            "unsupported operation: more than one element of the written-to tensor refers to a "
            "single memory location. Please clone() the tensor before performing the operation."
        )


def write(t: torch.Tensor, value: jax.Array) -> None:
    """Store `value` (t's shape; cast to t's dtype) into t, so that every alias sees it."""
    box = box_of(t)
    jdt = dtypes.to_jax_dtype(t.dtype)
    shape = tuple(t.shape)
    if value.dtype != jdt:
        value = value.astype(jdt)
    if value.shape != shape:
        value = jnp.broadcast_to(value, shape)
    if t.is_neg():
        value = -value
    if t.is_conj():
        value = jnp.conj(value)
    if t.dtype == box.dtype and t.storage_offset() == 0 and t.numel() == box.numel and t.is_contiguous():
        box.array = value
        return
    if t.numel() == 0:
        return
    _check_no_internal_overlap(t)
    box.array = _scatter(shape, tuple(t.stride()), jdt)(box.array, value, t.storage_offset())


# --- moving data between CPU and jax ------------------------------------------------------------


def jax_device(index: int = 0):
    return jax.devices()[index]


def from_cpu(t: torch.Tensor) -> jax.Array:
    return jax.device_put(dtypes.cpu_to_numpy(t), jax_device())


def to_cpu(array: jax.Array, dtype: torch.dtype) -> torch.Tensor:
    return dtypes.numpy_to_cpu(np.asarray(array), dtype)
