"""Storage boxes and their lifetime: `Box` (the elements of one storage), `BOXES` (fake address ->
box), the sweeps that drop the boxes of dead storages, new storages and tensors on them (`wrap`,
`empty`), and the arrays seen outside jaxdev (`export`, never donated). The native module
(jaxdev/native.py) reads BOXES and Box's slots and makes boxes itself."""

from __future__ import annotations

import contextlib
import functools
import itertools
import sys
import weakref

import jax
import jax.numpy as jnp
import torch

from jaxdev import dtypes, native
from jaxdev.core.limits import check_layout, out_of_memory_as_torch
from jaxdev.core.plans import bitcast_flat, transpose_program
from jaxdev.programs import executables

DEVICE = torch.device("jax", 0)
_CPU_KEYS = torch._C.DispatchKeySet(torch._C.DispatchKey.CPU)
_set_storage = torch.ops.aten.set_.source_Storage_storage_offset._handle
_make_storage = torch._C._construct_storage_from_data_pointer
_create_empty = torch._C._acc.create_empty_tensor
_expired = torch.UntypedStorage._expired
_free_weak_ref = torch.UntypedStorage._free_weak_ref

# Fake addresses: far above any real mapping, 64-byte aligned, never reused. 64 GiB apart (no storage
# reaches its neighbour's address) plus 64 bytes: the low bits differ from storage to storage, so the
# dictionaries keyed by address (BOXES, fused eager's slots) spread them (at 2**40 apart every address
# hashed to the same slot: a lookup cost 3x), and 2**28 storages fit below 2**64 (at 2**40, 16.7M: a
# long training run's worth, ~600 new storages a step in per-op mode).
next_address = itertools.count(1 << 52, (1 << 36) + 64)


class Box:
    """The contents of one storage: `array` holds `numel` elements of `dtype`, row-major.

    A box can hold its elements as one dense tensor's logical values instead (`logical`: value,
    shape, strides, permutation), as a result laid out like PyTorch's (channels_last, a transposed
    input's order) is made: reading that tensor back returns the value as computed, and the
    physical (storage-order) array is made by one transpose only when something reads the storage
    another way. Assigning `array` drops the logical form."""

    __slots__ = ("__weakref__", "_array", "dtype", "logical", "numel", "untyped", "weak", "writes")

    def __init__(self, array: jax.Array, numel: int, dtype: torch.dtype):
        self._array = array
        self.logical = None
        self.numel = numel
        self.dtype = dtype
        self.weak = None
        self.untyped = False  # bytes from an untyped storage: retyped by the first tensor set on it
        self.writes = 0  # values written through `write` (reads may replace `array` by a reshape)

    @property
    def array(self) -> jax.Array:
        if self.logical is not None:
            value, _, _, perm = self.logical
            self._array = transpose_program(perm)(value)
            self.logical = None
        return self._array

    @array.setter
    def array(self, value: jax.Array) -> None:
        self._array = value
        self.logical = None

    def pending(self) -> jax.Array:
        """The array this box holds now, physical or logical, without transposing it."""
        return self._array if self.logical is None else self.logical[0]

    def retype(self, dtype: torch.dtype) -> None:
        dtype = dtypes.STORED_AS.get(dtype, dtype)
        if self.untyped and dtype != self.dtype:
            self.array = bitcast_flat(self.flat(), dtype)
            self.numel = self.array.shape[0]
            self.dtype = dtype
        self.untyped = False

    def flat(self) -> jax.Array:
        a = self.array
        return a if a.ndim == 1 else a.reshape(-1)


BOXES: dict[int, Box] = {}  # never rebound: the native module reads this dict
# A storage object's address (its box's key in BOXES) read without asking for the mutable pointer, as
# Python's data_ptr() does: that materializes a copy-on-write storage (Tensor._lazy_clone), and a read
# (a clone, a recorded op's input) must leave it shared, as CPU does. Without the native module there
# is no other way in, and a read unshares.
storage_address = getattr(native.module, "data_address", None) or torch.UntypedStorage.data_ptr
# With the native module (jaxdev/native.py) every storage jaxdev makes reports its own death (a deleter
# on its data pointer) and its box goes with it (or, for a death off the GIL, at the next native read,
# wrap or new storage); what follows is
# the pure-Python path, and the full sweep stays as a backstop. There a box outlives its storage until a
# sweep finds the storage gone (PyTorch gives no callback when a storage dies). Most storages are
# temporaries that die within a few ops, and an array kept alive past its use costs more than memory:
# the next result of its size cannot reuse the freed buffer and lands in fresh pages (measured: `x + 0`
# of a 1024x1024 float32 took 540 us with dead results swept every 256 MiB, 115-145 us swept every
# 16 MiB; jnp itself 80-150 us). So the boxes made since
# the last sweep are checked every 16 MiB allocated (cost: the young boxes only), and all boxes
# when their number doubles or every 256 MiB (amortised O(1) per allocation either way).
_sweep_above = 4096
_YOUNG_BYTES = 4 << 20
_SWEEP_BYTES = 256 << 20
_young: list[int] = []
_aging: list[int] = []
_young_bytes = 0
_bytes_since_sweep = 0


def _drop_dead(addrs) -> None:
    for addr in addrs:
        box = BOXES.get(addr)
        if box is not None and box.weak and _expired(box.weak):
            _free_weak_ref(BOXES.pop(addr).weak)


def release_weak(box: Box) -> None:
    """Give up `box`'s weak reference to its storage. A weak slot of 0 (a box shared copy-on-write,
    jaxdev/csrc/cow.cpp) holds none: its data pointer's deleter removes it."""
    if box.weak:
        _free_weak_ref(box.weak)


def sweep() -> None:
    """Drop the boxes whose storage no tensor holds any more."""
    global _sweep_above, _bytes_since_sweep, _young_bytes
    if _native is not None:
        _native.drop_dead()
    _drop_dead(list(BOXES))
    _young.clear()
    _aging.clear()
    _sweep_above = max(4096, 2 * len(BOXES))
    _bytes_since_sweep = _young_bytes = 0


def release_dead() -> None:
    """Drop the boxes of dead storages now, for an answer about memory (torch.jax.memory_allocated).
    Natively a storage that dies on a thread holding the GIL takes its box with it; only those that died
    elsewhere (autograd's device threads) wait for the next op, and go here. The Python path has no
    death notice: a full sweep."""
    if _native is not None:
        _native.drop_dead()
    else:
        sweep()


def _sweep_young() -> None:
    """Drop the dead among the boxes made since the last two young sweeps. A box that lives through
    two is left to the full sweeps: one round alone would keep every value that was still being
    used at the moment of the sweep (the result a loop holds while computing the next)."""
    global _young_bytes, _aging
    _drop_dead(_aging)
    _drop_dead(_young)
    _aging = [addr for addr in _young if addr in BOXES]
    _young.clear()
    _young_bytes = 0


_tracing = 0  # scratch() depth: a program or a VJP is being traced


@contextlib.contextmanager
def scratch():
    """Storages made inside hold JAX tracers (a program or a VJP being traced): forget their boxes
    when the trace ends, so eager code never meets a tracer."""
    global _tracing
    before = set(BOXES)
    _tracing += 1
    try:
        yield
    finally:
        _tracing -= 1
        for addr in [a for a in BOXES if a not in before]:
            release_weak(BOXES.pop(addr))


def in_scratch() -> bool:
    """Whether a program or a VJP is being traced (inside `scratch`)."""
    return _tracing > 0


def new_storage(box: Box) -> torch.UntypedStorage:
    nbytes = box.numel * box.dtype.itemsize
    addr = next(next_address)
    if _native is not None:  # a storage that reports its own death: no sweep needed for its box
        storage = _native.new_storage(addr, nbytes)
        box.weak = storage._weak_ref()
        BOXES[addr] = box
        checkpoint()
        return storage
    storage = _make_storage(addr, DEVICE, nbytes)
    _keep(storage, addr, nbytes, box)
    return storage


def reattach(box: Box, storage: torch.UntypedStorage) -> None:
    """`box` now belongs to `storage`'s StorageImpl (its pointer was swapped in): sweeps follow that one."""
    release_weak(box)
    box.weak = storage._weak_ref()


def checkpoint() -> None:
    """After a box made natively: the full sweep when BOXES has doubled, the executables' check."""
    if len(BOXES) > _sweep_above:
        sweep()
    if executables.counted >= executables.CHECK_EVERY and not _tracing:  # executables.due(), inlined (hot path)
        executables.check()


def _keep(storage, addr: int, nbytes: int, box: Box) -> None:
    """Record `box` as the contents of `storage` (at fake address `addr`), sweeping dead boxes."""
    box.weak = storage._weak_ref()
    BOXES[addr] = box
    _account(addr, nbytes)


def _account(addr: int, nbytes: int) -> None:
    """A box was entered at `addr`: count it towards the next sweep, and sweep when one is due."""
    global _bytes_since_sweep, _young_bytes
    _young.append(addr)
    _bytes_since_sweep += nbytes
    _young_bytes += nbytes
    if len(BOXES) > _sweep_above or _bytes_since_sweep > _SWEEP_BYTES:
        sweep()
    elif _young_bytes > _YOUNG_BYTES:
        _sweep_young()
    if executables.counted >= executables.CHECK_EVERY and not _tracing:  # executables.due(), inlined (hot path)
        executables.check()


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

# The native fast paths (jaxdev/native.py), or None: the Python code below does the same, slower.
_native = native.module
native_wrap = None
if _native is not None:
    _native.set_boxes(BOXES, Box)
    _native.set_allocation(next_address, checkpoint)  # for the native fast kernels' results
    native_wrap = _native.wrap  # wrap's hot path: tensor, storage and Box in one call


def tensor_on_storage(storage, dtype, shape, strides, offset=0) -> torch.Tensor:
    t = _create_empty(_NO_SHAPE, dtype)
    _set_storage.redispatch_boxed(_CPU_KEYS, t, storage, offset, shape, strides)
    return t


def wrap(array: jax.Array) -> torch.Tensor:
    """A new contiguous jax tensor that owns `array` (its dtype decides the torch dtype).

    The hot path of every eager op. Natively the tensor, its storage at a new fake address and its
    Box are made in one call; in Python the tensor is made with its sizes (contiguous strides) and an empty
    storage, and the storage takes our fake data pointer in place (`_swap_data_ptr_` with a new one):
    0.75 us, where attaching a storage through `set_` cost 2.7 us more."""
    dtype = dtypes.JAX_TO_TORCH.get(array.dtype) or dtypes.to_torch_dtype(array.dtype)
    shape = array.shape
    if 0 in shape:  # create_empty strides a size-0 dim 0 where PyTorch's contiguous strides say 1
        return tensor_on_storage(new_storage(Box(array, 0, dtype)), dtype, shape, contiguous_strides(shape))
    addr = next(next_address)
    if native_wrap is not None:
        # The tensor, and its Box entered in BOXES. Its storage reports its own death (the box goes
        # at the next native read, wrap or new storage), so it takes no part in the young sweeps.
        t = native_wrap(array, dtype, addr)
        checkpoint()
        return t
    t = _create_empty(shape, dtype)
    size = t.numel()
    storage = t.untyped_storage()
    storage._swap_data_ptr_(_make_storage(addr, DEVICE, size * dtype.itemsize))
    _keep(storage, addr, size * dtype.itemsize, Box(array, size, dtype))
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
    stored = dtypes.STORED_AS.get(dtype, dtype)  # bits, float4, complex32: bytes of a carrier
    jdt = dtypes.to_jax_dtype(stored)
    shape = tuple(int(n) for n in shape)
    explicit = strides is not None
    strides = contiguous_strides(shape) if strides is None else [int(s) for s in strides]
    check_layout(shape, strides, dtype.itemsize, explicit)
    numel = span(shape, strides)
    box = Box(zeros(numel, jdt), numel, stored)
    return tensor_on_storage(new_storage(box), dtype, shape, strides)


@functools.lru_cache(maxsize=1024)
def _zeros(numel: int, jdt) -> jax.Array:
    return jax.jit(lambda: jnp.zeros((numel,), jdt))


def zeros(numel: int, jdt) -> jax.Array:
    """`numel` zeros; a cached jitted call costs a few microseconds where eager jnp costs tens."""
    with out_of_memory_as_torch():
        return _zeros(numel, jdt)()


def mixed_devices(other: torch.device) -> RuntimeError:
    """The error PyTorch raises when a jax tensor meets a tensor of another device."""
    return RuntimeError(
        f"Expected all tensors to be on the same device, but found at least two devices, {DEVICE} and {other}!"
    )


def box_of(t: torch.Tensor) -> Box:
    try:
        return BOXES[t.untyped_storage().data_ptr()]
    except KeyError:
        if t.device.type != "jax":
            raise mixed_devices(t.device) from None
        raise RuntimeError(f"jaxdev: this {t.device} tensor has no data (its storage was not made by jaxdev)") from None


def is_jax(t) -> bool:
    return isinstance(t, torch.Tensor) and t.device.type == "jax"


# Arrays handed out (`to_jax`) or taken in (`from_jax`), and jaxdev's own aliases of those, by id, for as
# long as the array object lives (a weak reference's callback forgets it). A caller may hold an alias
# that shares such an array's buffer without being the same Python object (`jax.device_put(a, device)`
# makes one), which no reference count can see: a write never gives such an array's buffer away (see
# strided.sole_holder). The mark is on the array, not on a box, because boxes share arrays (a plain clone).
EXPORTED: dict[int, weakref.ref] = {}


def export(array: jax.Array) -> jax.Array:
    """Mark `array` as seen outside jaxdev (see EXPORTED); returns it."""
    key = id(array)
    if key not in EXPORTED:
        EXPORTED[key] = weakref.ref(array, lambda _, key=key: EXPORTED.pop(key, None))
    return array


def is_exported(array) -> bool:
    ref = EXPORTED.get(id(array))
    return ref is not None and ref() is array


def alias(old: jax.Array, new: jax.Array) -> jax.Array:
    """`new` may share `old`'s buffer (`jax.device_put` to a placement `old` already has): it is
    exported when `old` is. Returns `new`."""
    if new is not old and EXPORTED and is_exported(old):
        export(new)
    return new


def references(box: Box) -> int:
    return sys.getrefcount(box._array)


# What `references` reads when the box's slot is the only reference (measured, not assumed: how many
# references a call's argument adds differs between Python versions).
ONLY_THE_BOX = references(Box(object(), 0, torch.uint8))
