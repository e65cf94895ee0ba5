"""The jax-backed tensor and its aliasing model: strided storage.

Why this model (of three: strided storage, view chains, functionalization): PyTorch's own view semantics live in TensorImpl
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

import contextlib
import functools
import itertools
import math
import sys
import weakref

import jax
import jax.numpy as jnp
import numpy as np
import torch

from jaxdev import dtypes, executables, native, tracing

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
            self._array = _transpose(perm)(value)
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
        if self.untyped and dtype != self.dtype:
            self.array = _bitcast_flat(self.flat(), dtype)
            self.numel = self.array.shape[0]
            self.dtype = dtype
        self.untyped = False

    def flat(self) -> jax.Array:
        a = self.array
        return a if a.ndim == 1 else a.reshape(-1)


BOXES: dict[int, Box] = {}  # never rebound: the native module reads this dict
# With the native module (jaxdev/native.py) every storage jaxdev makes reports its own death (a deleter
# on its data pointer) and its box goes at the next native read, wrap or new storage; what follows is
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
        if box is not None and _expired(box.weak):
            _free_weak_ref(BOXES.pop(addr).weak)


def _sweep() -> None:
    """Drop the boxes whose storage no tensor holds any more."""
    global _sweep_above, _bytes_since_sweep, _young_bytes
    if _native is not None:
        _native.drop_dead()
    _drop_dead(list(BOXES))
    _young.clear()
    _aging.clear()
    _sweep_above = max(4096, 2 * len(BOXES))
    _bytes_since_sweep = _young_bytes = 0


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
            _free_weak_ref(BOXES.pop(addr).weak)


def new_storage(box: Box) -> torch.UntypedStorage:
    nbytes = box.numel * box.dtype.itemsize
    addr = next(_next_address)
    if _native is not None:  # a storage that reports its own death: no sweep needed for its box
        storage = _native.new_storage(addr, nbytes)
        box.weak = storage._weak_ref()
        BOXES[addr] = box
        _checkpoint()
        return storage
    storage = _make_storage(addr, DEVICE, nbytes)
    _keep(storage, addr, nbytes, box)
    return storage


def _checkpoint() -> None:
    """After a box made natively: the full sweep when BOXES has doubled, the executables' check."""
    if len(BOXES) > _sweep_above:
        _sweep()
    if executables._counted >= executables.CHECK_EVERY and not _tracing:  # executables.due(), inlined (hot path)
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
        _sweep()
    elif _young_bytes > _YOUNG_BYTES:
        _sweep_young()
    if executables._counted >= executables.CHECK_EVERY and not _tracing:  # executables.due(), inlined (hot path)
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
_native_wrap = plain_value = None
if _native is not None:
    _native.set_boxes(BOXES, Box)
    _native.set_allocation(_next_address, _checkpoint)  # for the native fast kernels' results
    _native_wrap = _native.wrap  # wrap's hot path: tensor, storage and Box in one call
    plain_value = _native.plain_value  # read's hot path: the array of a plain tensor, else None


def tensor_on_storage(storage, dtype, shape, strides, offset=0) -> torch.Tensor:
    t = _create_empty(_NO_SHAPE, dtype)
    _set_storage.redispatch_boxed(_CPU_KEYS, t, storage, offset, shape, strides)
    return t


@functools.lru_cache(maxsize=1024)
def _transpose(perm):
    return jax.jit(lambda a: jnp.transpose(a, perm))


def dense_permutation(shape, strides) -> tuple[int, ...] | None:
    """The dim order (outermost first) in which `strides` lay `shape` out densely, None if they do not.

    Size-1 dims reach no other element: their strides are free (they go innermost)."""
    order = sorted(range(len(shape)), key=lambda d: (shape[d] == 1, -strides[d], d))
    expected = 1
    for d in reversed(order):
        if shape[d] != 1:
            if strides[d] != expected:
                return None
            expected *= shape[d]
    return tuple(order)


def wrap_strided(array: jax.Array, strides) -> torch.Tensor:
    """A new jax tensor owning `array` (logical values, row-major) laid out with `strides`, as PyTorch
    lays out a result (a dense permutation of the dims; anything else is written through `write`).

    The box keeps the logical value: the transpose into storage order is made only if the storage is
    read another way (see Box)."""
    shape = tuple(array.shape)
    strides = tuple(strides)
    if strides == contiguous_strides(shape):
        return wrap(array)
    dtype = dtypes.JAX_TO_TORCH.get(array.dtype) or dtypes.to_torch_dtype(array.dtype)
    perm = dense_permutation(shape, strides) if array.size > 1 else None
    if perm is None or perm == tuple(range(len(shape))):
        if perm is not None:  # row-major up to the strides of size-1 dims: the values are the storage
            return tensor_on_storage(new_storage(Box(array, array.size, dtype)), dtype, shape, strides)
        out = empty(shape, dtype, strides)
        if array.size:
            write(out, array)
        return out
    box = Box(None, array.size, dtype)
    box.logical = (array, shape, strides, perm)
    return tensor_on_storage(new_storage(box), dtype, shape, strides)


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
    addr = next(_next_address)
    if _native_wrap is not None:
        # The tensor, and its Box entered in BOXES. Its storage reports its own death (the box goes
        # at the next native read, wrap or new storage), so it takes no part in the young sweeps.
        t = _native_wrap(array, dtype, addr)
        _checkpoint()
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


def empty(shape, dtype: torch.dtype, strides=None) -> torch.Tensor:
    """A new jax tensor of `shape` (zero-filled: JAX has no uninitialised memory)."""
    jdt = dtypes.to_jax_dtype(dtype)
    shape = tuple(int(n) for n in shape)
    explicit = strides is not None
    strides = contiguous_strides(shape) if strides is None else [int(s) for s in strides]
    check_layout(shape, strides, dtype.itemsize, explicit)
    numel = span(shape, strides)
    box = Box(zeros(numel, jdt), numel, dtype)
    return tensor_on_storage(new_storage(box), dtype, shape, strides)


@functools.lru_cache(maxsize=1024)
def _zeros(numel: int, jdt) -> jax.Array:
    return jax.jit(lambda: jnp.zeros((numel,), jdt))


def zeros(numel: int, jdt) -> jax.Array:
    """`numel` zeros; a cached jitted call costs a few microseconds where eager jnp costs tens."""
    with out_of_memory_as_torch():
        return _zeros(numel, jdt)()


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


def mixed_devices(other: torch.device) -> RuntimeError:
    """The error PyTorch raises when a jax tensor meets a tensor of another device."""
    return RuntimeError(
        f"Expected all tensors to be on the same device, but found at least two devices, {DEVICE} and {other}!"
    )


# --- placement over a mesh (jaxdev/mesh.py) -----------------------------------------------------
#
# A storage placed with `jaxdev.shard` keeps its layout over the mesh: box -> (the array's shape, its
# jax Sharding). Writes (eager, CPU fallback, compiled programs) put the new array back in that layout,
# so a sharded storage stays sharded; kernels themselves need no change (XLA propagates shardings).
SHARDED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
# SHARDED's own dict (weak reference -> layout), never rebound: `if SHARDED_ENTRIES` is one C-level test
# on the hot paths, where the WeakKeyDictionary's `len` and `in` are Python calls (0.2-0.3 us each). It
# may still hold a dead key awaiting removal; the test is then only a cue to look closer.
SHARDED_ENTRIES: dict = SHARDED.data
# Where arrays made from host values go: None = JAX's default device (uncommitted, so they mix with
# sharded arrays); `jaxdev.set_mesh` sets the mesh's replicated sharding.
HOST_PLACEMENT = None
# (box, view shape, view strides) -> the sharding a view of a sharded box is read in; set by jaxdev/mesh.py.
VIEW_SHARDING = None


def keep_sharding(box: Box) -> None:
    """Put `box.array` back in the layout `jaxdev.shard` gave it (nothing to do when unsharded)."""
    kept = SHARDED.get(box)
    if kept is None or tracing.is_traced(box.array):
        return
    shape, sharding = kept
    a = box.array
    if a.size != np.prod(shape, dtype=np.int64):  # the storage was resized: its placement is gone
        del SHARDED[box]
        return
    if a.shape != shape:
        a = a.reshape(shape)
    if not a.sharding.is_equivalent_to(sharding, len(shape)):
        a = alias(a, jax.device_put(a, sharding))
    box.array = a


def box_of(t: torch.Tensor) -> Box:
    try:
        return BOXES[t.untyped_storage().data_ptr()]
    except KeyError:
        if t.device.type != "jax":
            raise mixed_devices(t.device) from None
        raise RuntimeError(f"jaxdev: this {t.device} tensor has no data (its storage was not made by jaxdev)") from None


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


# --- structured views -------------------------------------------------------------------------
#
# Most views a program reads are a permutation, a strided slice, a broadcast (stride 0), a diagonal,
# or a flattening of those. Their elements are
#     offset + i_0 * s_0 + ... + i_k * s_k       (dims of size > 1 and stride > 0, strides descending)
# and when each stride is a multiple of the next and the dims do not overlap (s_d >= n_{d+1} s_{d+1}),
# the block of L = n_0 * s_0 elements that starts at `offset`, reshaped to
#     (n_0, s_0 / s_1, s_1 / s_2, ..., s_{k-1} / s_k, s_k),
# holds element (i_0, ..., i_k) at index (i_0, i_1, ..., i_k, 0). So a read is a slice of the flat
# storage, a reshape, a slice of leading parts of each axis, then a transpose into the view's dim
# order and a broadcast over its stride-0 dims; a write is the same slices as update_slices. XLA
# sees transposes and slices it can fuse, where an index gather would hide them. The storage is padded
# when the block runs past its end (a diagonal's last row). Anything else (overlapping windows,
# strides that do not divide) keeps the general gather/scatter through an index array.
#
# Better still (GRID), when s_0 divides the storage's length and the offset's digits in the radices
# (L / s_0, s_0 / s_1, ..., s_k) leave room for the view on every axis (no carry: x[:, 1:],
# cache[:, :, pos]): the whole storage reshaped to those axes holds the view as one dynamic slice at
# those digits. A read slices exactly the view, with no padded copy; a write is one
# dynamic_update_slice of exactly the view's elements into the storage's buffer when it is donated
# (see _sole_holder), where a block write copied the storage twice (`x[:, 1:] = r` of 1024x1024:
# 550 -> 95 us). XLA's CPU backend still plans a copy around a reshaped donated buffer, so a write
# into a sparse view (a KV cache's position) scatters instead (see _mode).


class _Plan:
    """How to reach a (shape, strides) view as slices of the flat storage."""

    __slots__ = ("block", "keep", "parts", "perm", "shape", "squeezed", "steps")

    def __init__(self, shape, strides):
        dims = sorted(((s, n, d) for d, (n, s) in enumerate(zip(shape, strides)) if n > 1 and s != 0), reverse=True)
        self.shape = tuple(shape)
        self.squeezed = tuple(n if (n > 1 and s != 0) else 1 for n, s in zip(shape, strides))
        if not dims:
            self.block, self.parts, self.keep, self.perm, self.steps = 1, (1,), (1,), (), (1,)
            return
        self.block = dims[0][1] * dims[0][0]
        self.parts = (dims[0][1],) + tuple(hi[0] // lo[0] for hi, lo in zip(dims, dims[1:])) + (dims[-1][0],)
        self.keep = tuple(n for _, n, _ in dims) + (1,)
        self.steps = tuple(s for s, _, _ in dims) + (1,)  # elements per index of each axis of `parts`
        # The block's kept axes come in stride order; `perm` puts them back in the view's dim order.
        order = [d for _, _, d in dims]
        self.perm = tuple(sorted(range(len(order)), key=lambda i: order[i]))

    @staticmethod
    def fits(shape, strides) -> bool:
        dims = sorted(((s, n) for n, s in zip(shape, strides) if n > 1 and s != 0), reverse=True)
        return all(s_hi % s_lo == 0 and s_hi >= n_lo * s_lo for (s_hi, _), (s_lo, n_lo) in zip(dims, dims[1:]))

    def covers(self) -> bool:
        """The view holds every element of its block (a permutation of a whole storage)."""
        return self.keep[:-1] == self.parts[:-1] and self.parts[-1] == 1

    def grid(self, numel: int) -> tuple[int, ...]:
        """The axes a storage of `numel` elements is reshaped to in GRID mode."""
        return (numel // self.steps[0],) + self.parts[1:]

    def starts(self, offset, numel: int) -> tuple:
        """The offset's digits on the grid's axes (host ints, or traced values inside a program)."""
        grid = self.grid(numel)
        return (offset // self.steps[0],) + tuple(offset // s % n for s, n in zip(self.steps[1:], grid[1:]))

    def on_grid(self, offset: int, numel: int) -> bool:
        """Whether the view is one slice of the storage reshaped to `grid` (GRID mode)."""
        if numel % self.steps[0]:
            return False
        return all(st + n <= g for st, n, g in zip(self.starts(offset, numel), self.keep, self.grid(numel)))

    def _block(self, flat, offset, mode):
        if mode == WHOLE:  # the block is the storage: no slice to take
            return flat, flat.reshape(self.parts)
        if mode == GRID:  # exactly the view's elements, in `keep`'s shape
            numel = flat.shape[0]
            return flat, jax.lax.dynamic_slice(flat.reshape(self.grid(numel)), self.starts(offset, numel), self.keep)
        if mode == PADDED:
            flat = jnp.pad(flat, (0, self.block))
        return flat, jax.lax.dynamic_slice(flat, (offset,), (self.block,)).reshape(self.parts)

    def read(self, flat, offset, mode):
        _, block = self._block(flat, offset, mode)
        kept = block[tuple(slice(0, n) for n in self.keep[:-1]) + (0,)]
        if self.perm:
            kept = jnp.transpose(kept, self.perm)
        return jnp.broadcast_to(kept.reshape(self.squeezed), self.shape)

    def write(self, flat, value, offset, mode):
        numel = flat.shape[0]
        kept = value.reshape(tuple(n for n in self.squeezed if n > 1))
        if self.perm:
            kept = jnp.transpose(kept, sorted(range(len(self.perm)), key=lambda i: self.perm[i]))
        kept = kept.reshape(self.keep)
        if mode == WHOLE and self.covers():  # every element is written: nothing old to keep
            return kept.reshape(-1)
        if mode == GRID:  # in place, when the storage's buffer is donated
            grid = flat.reshape(self.grid(numel))
            return jax.lax.dynamic_update_slice(grid, kept, self.starts(offset, numel)).reshape(-1)
        padded, block = self._block(flat, offset, mode)
        block = jax.lax.dynamic_update_slice(block, kept, (0,) * len(self.parts))
        if mode == WHOLE:
            return block.reshape(-1)
        padded = jax.lax.dynamic_update_slice(padded, block.reshape(-1), (offset,))
        return padded[:numel] if mode == PADDED else padded


@functools.lru_cache(maxsize=8192)
def _plan(shape, strides) -> _Plan | None:
    return _Plan(shape, strides) if _Plan.fits(shape, strides) else None


WHOLE, GRID, SLICED, PADDED = "whole", "grid", "sliced", "padded"


def _mode(plan: _Plan | None, offset: int, numel: int, count: int, writing: bool) -> str | None:
    """How a view of `count` elements at `offset` in `numel` is reached: None for the index
    gather/scatter, else WHOLE (its block is the storage), GRID (one slice of the storage reshaped),
    SLICED or PADDED (the block runs past the end). A write into a sparse view (under half its block:
    a diagonal, a KV cache's position) scatters: updating the block would rewrite every element of it,
    and a donated scatter touches only the view (measured on a 32 MiB cache: 17 us, against 31 us for
    the donated dynamic_update_slice, for which XLA's CPU backend still plans a copy)."""
    if plan is None or (writing and 2 * count < plan.block):
        return None
    if offset == 0 and plan.block == numel:
        return WHOLE
    if plan.on_grid(offset, numel):
        return GRID
    return PADDED if offset + plan.block > numel else SLICED


# Everything below runs jitted on the box's array as stored (any shape), so no eager reshape or
# bitcast happens on the way. The offset is traced: slices at different offsets (x[0], x[1], ...)
# share one compiled program per (shape, strides, dtype, mode).
def view_value(recipe, stored: jax.Array, offset) -> jax.Array:
    """Traceable: the values of the view `recipe` = (shape, strides, target dtype, mode) of a storage
    held as `stored`, starting at element `offset`."""
    shape, strides, target, mode = recipe
    offset = 0 if offset is None else offset  # offset_arg(0): a static 0
    if mode is not None:
        return _plan(shape, strides).read(_flat_as(stored, target), offset, mode)
    return _flat_as(stored, target)[_strided_index(shape, strides, offset)]


@functools.lru_cache(maxsize=4096)
def offset_arg(offset: int) -> jax.Array | None:
    """A view's storage offset as the argument of its read or write program. A Python int passed to a
    jitted program is converted and copied to the device on every call (1.2-1.7 us of a 4-6 us read,
    measured); a device scalar made once per offset is passed as it is. Uncommitted, it follows the
    program's other arguments to their device; made outside any trace, so the cache never holds a tracer.
    Offset 0 (x.t(), an expand, a diagonal, x[:, ::2] of a whole tensor: most views) is None, an empty
    argument that the program reads as a static 0: a device scalar argument costs 0.4-0.8 us of a 4-5 us
    read (measured on a 1024x1024 diagonal), and the program compiled for it is no larger."""
    if offset == 0:
        return None
    with jax.ensure_compile_time_eval():
        return jnp.asarray(offset, jnp.int64)


@functools.lru_cache(maxsize=4096)
def _gather(shape, strides, target, mode, out_sharding=None):
    recipe = (shape, strides, target, mode)
    return jax.jit(lambda stored, offset: view_value(recipe, stored, offset), out_shardings=out_sharding)


@functools.lru_cache(maxsize=4096)
def _scatter(shape, strides, target, mode, donate=False):
    def run(stored, value, offset):
        offset = 0 if offset is None else offset  # offset_arg(0)
        flat = _flat_as(stored, target)
        if mode is not None:
            flat = _plan(shape, strides).write(flat, value, offset, mode)
        else:
            flat = flat.at[_strided_index(shape, strides, offset)].set(value)
        return _flat_as(flat, stored.dtype).reshape(stored.shape)

    return jax.jit(run, donate_argnums=(0,) if donate else ())


@functools.lru_cache(maxsize=4096)
def _reshape(shape):
    return jax.jit(lambda a: a.reshape(shape))


def read(t: torch.Tensor) -> jax.Array:
    """The jax.Array holding the values of jax tensor `t` (exactly its shape and dtype).

    The conjugate and negative bits of lazy `conj()` / `_neg_view()` views are applied here.
    The hot path of every kernel argument: a tensor that is its whole storage, row-major, costs a
    dictionary lookup and five metadata reads (one native call when the native module is in use)."""
    if plain_value is not None:
        array = plain_value(t)
        if array is not None:
            return array
    try:
        box = BOXES[t.untyped_storage().data_ptr()]
    except KeyError:
        box = box_of(t)  # raises the right error
    if spans(t, box):
        return box.array
    value = _read_stored(t, box)
    if t.is_conj():
        value = jnp.conj(value)
    if t.is_neg():
        value = -value
    return value


def spans(t: torch.Tensor, box: Box) -> bool:
    """`t` is exactly the array `box` holds: its whole storage, row-major, in the box's dtype and
    shape, with no conj/neg bit (the native module's plain_value tests the same)."""
    return (
        box.logical is None
        and box.array.shape == t.shape  # torch.Size compares as the tuple it is
        and t.dtype is box.dtype
        and not t.storage_offset()
        and t.is_contiguous()
        and not (t.is_conj() or t.is_neg())
    )


def plain_array(t) -> jax.Array | None:
    """The array of `t` when it is a jax tensor that is exactly its box's array (`spans`); else None,
    for anything else too. One native call when the native module is in use."""
    if plain_value is not None:
        return plain_value(t)
    box = BOXES.get(t.untyped_storage().data_ptr()) if is_jax(t) else None
    return box.array if box is not None and type(box) is Box and spans(t, box) else None


def xla_extent_overflows(shape) -> bool:
    """XLA aborts the process on a shape whose sizes multiply past int64, even one holding no
    elements (PyTorch allows [2**62, 3, 0])."""
    return math.prod(n for n in shape if n) > _MAX_BYTES


def _read_stored(t: torch.Tensor, box: Box) -> jax.Array:
    if t.numel() == 0 and xla_extent_overflows(t.shape):
        raise RuntimeError(
            f"jaxdev: XLA cannot hold an empty array of shape {list(t.shape)} (its sizes multiply past int64)"
        )
    logical = box.logical
    if (
        logical is not None
        and t.dtype is box.dtype
        and t.storage_offset() == 0
        and logical[2] == t.stride()
        and logical[1] == tuple(t.shape)
    ):
        return logical[0]
    if t.dtype is box.dtype and t.storage_offset() == 0 and t.is_contiguous() and t.numel() == box.numel:
        a = box.array
        if a.shape != t.shape:
            a = _reshape(tuple(t.shape))(a)
            if not (SHARDED_ENTRIES and box in SHARDED):  # a sharded box keeps the shape its sharding is for
                box.array = a
        return a
    shape, strides, offset = tuple(t.shape), t.stride(), t.storage_offset()
    recipe = _view_recipe(shape, strides, t.dtype, box.numel, box.dtype, offset)
    # A view of a sharded storage arrives sharded along the storage dims it steps (jaxdev/mesh.py).
    sharding = VIEW_SHARDING(box, shape, strides) if SHARDED_ENTRIES and box in SHARDED else None
    return _gather(*recipe, sharding)(box.array, offset_arg(offset))


def view_reader(t: torch.Tensor):
    """For the native clone (registry.register_clone): `(program, offset)`, the jitted program
    `(stored, offset) -> values` that reads view `t` from its box's array as stored (every view of this
    geometry shares it) and t's offset as its argument (`offset_arg`); or None where `_read_stored` must
    decide (a sharded storage, an empty or overflowing view)."""
    box = BOXES.get(t.untyped_storage().data_ptr())
    if box is None or type(box) is not Box or box.logical is not None or t.numel() == 0:
        return None
    if SHARDED_ENTRIES and box in SHARDED:
        return None
    offset = t.storage_offset()
    return _gather(*_view_recipe(tuple(t.shape), t.stride(), t.dtype, box.numel, box.dtype, offset)), offset_arg(offset)


@functools.lru_cache(maxsize=8192)
def _view_recipe(shape, strides, dtype, box_numel, box_dtype, offset) -> tuple:
    """How a (shape, strides, offset) view of a storage of `box_numel` `box_dtype` elements is read:
    (shape, strides, target dtype, mode), for `view_value`. One cache lookup on the hot path."""
    target = dtypes.to_jax_dtype(dtype)  # complex32 views (view_as_complex of half): UnsupportedDtypeError
    numel = box_numel * box_dtype.itemsize // dtype.itemsize
    count = math.prod(shape)
    return (shape, strides, target, _mode(_plan(shape, strides), offset, numel, count, writing=False))


def read_parts(t: torch.Tensor) -> tuple:
    """For a kernel that reads jax tensor `t` inside its own jitted program: (array, offset, recipe).

    recipe None: `array` is t's value. Otherwise t is a strided view (a transpose, a slice, an
    expand...) of the storage held as `array`, starting at `offset` (`offset_arg`: a device scalar, None for 0),
    and `view_value(recipe, array, offset)` inside the kernel's program gives its value, so the view's
    transpose or slice fuses into the kernel (a Linear's `w.t()` into its product) instead of running
    as a program of its own and materialising a copy."""
    if plain_value is not None:
        array = plain_value(t)
        if array is not None:
            return array, None, None
    try:
        box = BOXES[t.untyped_storage().data_ptr()]
    except KeyError:
        box = box_of(t)
    if box.logical is not None:
        return read(t), None, None
    array = box.array
    if spans(t, box):
        return array, None, None  # the hot path, as in `read`
    if t.is_contiguous() or t.is_conj() or t.is_neg() or not t.numel() or (SHARDED_ENTRIES and box in SHARDED):
        return read(t), None, None
    offset = t.storage_offset()
    recipe = _view_recipe(tuple(t.shape), t.stride(), t.dtype, box.numel, box.dtype, offset)
    return array, offset_arg(offset), recipe


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
    box.writes += 1
    if t.dtype == box.dtype and t.storage_offset() == 0 and t.numel() == box.numel and t.is_contiguous():
        box.array = value
        if SHARDED_ENTRIES:  # a storage placed over a mesh stays so (jaxdev/mesh.py)
            keep_sharding(box)
        return
    if t.numel() == 0:
        return
    _check_no_internal_overlap(t)
    strides, offset = t.stride(), t.storage_offset()
    sharded = bool(SHARDED_ENTRIES) and box in SHARDED
    if t.dtype == box.dtype and offset == 0 and t.numel() == box.numel and not sharded:
        perm = dense_permutation(shape, strides)
        if perm is not None:  # the whole storage, permuted (channels_last): keep the value as computed
            box.array = None
            box.logical = (value, shape, strides, perm)
            return
    numel = box.numel * box.dtype.itemsize // t.dtype.itemsize
    mode = _mode(_plan(shape, strides), offset, numel, t.numel(), writing=True)
    donate = _sole_holder(box)
    box.array = _scatter(shape, strides, jdt, mode, donate)(box.array, value, offset_arg(offset))
    if sharded:
        keep_sharding(box)


# Arrays handed out (`to_jax`) or taken in (`from_jax`), and jaxdev's own aliases of those, by id, for as
# long as the array object lives (a weak reference's callback forgets it). A caller may hold an alias
# that shares such an array's buffer without being the same Python object (`jax.device_put(a, device)`
# makes one), which no reference count can see: a write never gives such an array's buffer away (see
# _sole_holder). The mark is on the array, not on a box, because boxes share arrays (a plain clone).
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


def _references(box: Box) -> int:
    return sys.getrefcount(box._array)


# What `_references` reads when the box's slot is the only reference (measured, not assumed: how many
# references a call's argument adds differs between Python versions).
_ONLY_THE_BOX = _references(Box(object(), 0, torch.uint8))


def _sole_holder(box: Box) -> bool:
    """Whether a write into part of `box` may give its array's buffer to the result (XLA donation: the
    write then costs the part written, not a copy of the whole storage; a KV cache's
    `cache[:, pos] = k` is the common case). Only when nothing else can see the buffer: no Python
    reference but the box's own, never exported, not sharded, not inside a trace. A pending computation
    that reads the buffer is fine (the runtime orders the donation after it), and so is a numpy view of
    it (an external reference: the runtime copies instead)."""
    return (
        box.logical is None
        and _references(box) == _ONLY_THE_BOX
        and not is_exported(box._array)
        and not tracing.is_traced(box._array)
        and not (SHARDED_ENTRIES and box in SHARDED)
    )


# --- moving data between CPU and jax ------------------------------------------------------------


def jax_device(index: int = 0):
    return jax.devices()[index]


def from_cpu(t: torch.Tensor) -> jax.Array:
    return jax.device_put(dtypes.cpu_to_numpy(t), HOST_PLACEMENT)  # None: the default device, uncommitted


def to_cpu(array: jax.Array, dtype: torch.dtype) -> torch.Tensor:
    tracing.resolve_checks()  # values leave the device: compiled programs' checks are read first
    with out_of_memory_as_torch():  # an allocation that failed asynchronously surfaces here
        return dtypes.numpy_to_cpu(np.asarray(array), dtype)
