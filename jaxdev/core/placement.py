"""Where arrays are placed: JAX's device, host values' placement (a mesh's replicated sharding while
one is set), the storages placed over a mesh (`SHARDED`: writes keep them so), and the hooks
jaxdev/parallel/mesh.py installs (`set_host_placement`, `set_view_sharding`)."""

from __future__ import annotations

import weakref

import jax
import numpy as np
import torch

from jaxdev import dtypes, native, tracing
from jaxdev.core.boxes import BOXES, Box, alias
from jaxdev.core.limits import out_of_memory_as_torch

# --- placement over a mesh (jaxdev/parallel/mesh.py) -----------------------------------------------------
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
# sharded arrays); `jaxdev.set_mesh` sets the mesh's replicated sharding (set_host_placement).
_host_placement = None
# (box, view shape, view strides) -> the sharding a view of a sharded box is read in, or None; set by
# jaxdev/parallel/mesh.py (set_view_sharding).
_view_sharding = None


def set_host_placement(placement) -> object:
    """Place arrays made from host values with `placement` (a jax Sharding or device; None: JAX's
    default device, uncommitted). Returns the previous one."""
    global _host_placement
    previous, _host_placement = _host_placement, placement
    return previous


def host_placement():
    """Where arrays made from host values go (see set_host_placement)."""
    return _host_placement


def set_view_sharding(fn) -> object:
    """Install `fn(box, shape, strides) -> Sharding | None`, the sharding a view of a sharded box is
    read in (jaxdev/parallel/mesh.py). Returns the previous one."""
    global _view_sharding
    previous, _view_sharding = _view_sharding, fn
    return previous


def view_sharding(box: Box, shape, strides):
    """The sharding the (shape, strides) view of sharded `box` is read in; None: as XLA places it."""
    return None if _view_sharding is None else _view_sharding(box, shape, strides)


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
    if a.sharding != sharding:
        # Equivalent placements may be spelled differently (XLA hands a program's output back as
        # P('data',) for a storage placed with P('data', None)); the storage reads the spelling it was
        # given, in every mode. An equivalent placement is relabelled: device_put reuses the buffers.
        a = alias(a, jax.device_put(a, sharding))
    box.array = a


def reshard_like(result: jax.Array, inputs) -> jax.Array:
    """For the CPU fallback: a new result with the shape of a sharded input gets that input's
    sharding (else it stays as placed: replicated over the mesh while one is set)."""
    for t in inputs:
        box = BOXES.get(torch._C._data_address(t))  # a read: leaves copy-on-write data shared
        kept = None if box is None else SHARDED.get(box)
        if kept is not None and kept[0] == result.shape:
            return jax.device_put(result, kept[1])
    return result


# --- moving data between CPU and jax ------------------------------------------------------------


def jax_device(index: int = 0):
    return jax.devices()[index]


def from_cpu(t: torch.Tensor) -> jax.Array:
    return jax.device_put(dtypes.cpu_to_numpy(t), _host_placement)  # None: the default device, uncommitted


def to_cpu(array: jax.Array, dtype: torch.dtype) -> torch.Tensor:
    tracing.resolve_checks()  # values leave the device: compiled programs' checks are read first
    with out_of_memory_as_torch():  # an allocation that failed asynchronously surfaces here
        return dtypes.numpy_to_cpu(np.asarray(array), dtype)


def _platform(device) -> str:
    return device if isinstance(device, str) else device.platform


def _copies_to_device_memory(placement) -> bool:
    """Whether jax.device_put of host memory to `placement` copies it into an accelerator's memory (a
    transfer that can run on its own) rather than possibly aliasing it (JAX's CPU device, or a host
    memory kind)."""
    if placement is None:  # JAX's default device
        devices = [jax.config.jax_default_device or jax.devices()[0]]
    else:
        devices = getattr(placement, "device_set", None) or [placement]
        if getattr(placement, "memory_kind", None) not in (None, "device"):
            return False
    return all(_platform(d) != "cpu" for d in devices)


def to_jax_async(t: torch.Tensor) -> jax.Array | None:
    """The array of CPU tensor `t`'s values, its transfer started and not awaited, when `t` is pinned
    memory (the native hooks' allocator: jaxdev/capabilities/pinned.py) that jax.device_put can read as
    it is (contiguous, a dtype numpy holds, no lazy conj/neg) and copies into an accelerator's memory; None otherwise (the caller copies as usual). jax keeps the
    numpy view, and through it `t`'s storage, alive until the transfer is done."""
    if not native.hooks or t.layout != torch.strided or t.is_conj() or t.is_neg():
        return None
    if dtypes.needs_carrier(t.dtype) or not t.is_contiguous() or not t.is_pinned():
        return None
    placement = _host_placement  # a mesh's replicated sharding while one is set
    if not _copies_to_device_memory(placement):
        return None
    return jax.device_put(t.detach().numpy(), placement)
