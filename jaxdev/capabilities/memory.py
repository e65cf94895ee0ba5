"""Memory of the jax device, answered like `torch.cuda`'s memory API.

Where JAX's device reports allocator statistics (GPU, TPU) the answers are XLA's own:
`bytes_in_use`, `peak_bytes_in_use`, `bytes_limit`, reserved bytes. JAX's CPU device reports none;
there jaxdev answers from what it can see, documented here and in the README:
* allocated: the bytes of every live jax.Array on the device (`jax.live_arrays()`), tensors' and
  JAX's own alike;
* peak: the largest allocated value observed at a query or a reset since the last reset (there is
  no allocator hook on CPU to see every high-water mark);
* reserved: the same as allocated (no caching pool); free/total memory: the host's.

Every answer first runs fused eager's pending ops (their results are then counted) and drops the
boxes of storages that have died (`boxes.release_dead`): natively a storage that dies on a thread
holding the GIL already took its buffer with it, so after `del t` (or the `gc.collect()` that frees a
cycle) the answer no longer counts t, as CUDA's does not; a storage freed on autograd's device thread
is dropped here rather than at the next op.

`empty_cache()` drops the arrays of storages no tensor holds any more (jaxdev frees those lazily),
which is the memory jaxdev itself keeps cached.
"""

from __future__ import annotations

import collections
import dataclasses
import os

import jax

from jaxdev import device as jax_device_module
from jaxdev import eager_modes

_peak = {"allocated": 0}


def _device() -> jax.Device:
    return jax.devices()[0]


def _stats() -> dict | None:
    """XLA's allocator statistics (None on CPU), read after the dead storages' buffers are released:
    every answer below starts here. Fused eager's pending ops run first: a result they make is memory
    in use once its op is called, as a CUDA kernel's output is from its launch (what died before the
    flush is never made, as CUDA has freed it by then)."""
    from jaxdev.core import boxes

    eager_modes.flush()
    boxes.release_dead()
    try:
        return _device().memory_stats()
    except Exception:  # platforms without allocator statistics
        return None


def memory_allocated(device=None) -> int:
    stats = _stats()
    if stats is not None:
        return int(stats.get("bytes_in_use", 0))
    dev = _device()
    total = sum(a.nbytes for a in jax.live_arrays() if dev in a.devices())
    _peak["allocated"] = max(_peak["allocated"], total)
    return total


def max_memory_allocated(device=None) -> int:
    stats = _stats()
    if stats is not None:
        return int(stats.get("peak_bytes_in_use", stats.get("bytes_in_use", 0)))
    return max(_peak["allocated"], memory_allocated())


def reset_peak_memory_stats(device=None) -> None:
    _peak["allocated"] = 0
    _peak["allocated"] = memory_allocated() if _stats() is None else 0


def memory_reserved(device=None) -> int:
    stats = _stats()
    if stats is not None:
        return int(stats.get("bytes_reserved", stats.get("pool_bytes", stats.get("bytes_in_use", 0))))
    return memory_allocated()


def max_memory_reserved(device=None) -> int:
    stats = _stats()
    if stats is not None:
        return int(stats.get("peak_bytes_reserved", stats.get("peak_pool_bytes", memory_reserved())))
    return max_memory_allocated()


def mem_get_info(device=None) -> tuple[int, int]:
    """(free, total) bytes of the device's memory."""
    stats = _stats()
    if stats is not None and "bytes_limit" in stats:
        total = int(stats["bytes_limit"])
        return total - int(stats.get("bytes_in_use", 0)), total
    page = os.sysconf("SC_PAGE_SIZE")
    return os.sysconf("SC_AVPHYS_PAGES") * page, os.sysconf("SC_PHYS_PAGES") * page


def memory_stats(device=None) -> collections.OrderedDict:
    out = collections.OrderedDict()
    out["allocated_bytes.all.current"] = memory_allocated()
    out["allocated_bytes.all.peak"] = max_memory_allocated()
    out["reserved_bytes.all.current"] = memory_reserved()
    out["reserved_bytes.all.peak"] = max_memory_reserved()
    for key, value in sorted((_stats() or {}).items()):
        out[f"xla.{key}"] = value
    return out


def empty_cache() -> None:
    from jaxdev import tensor

    tensor.sweep()


def get_device_name(device=None) -> str:
    return _device().device_kind


@dataclasses.dataclass(frozen=True)
class DeviceProperties:
    name: str
    platform: str
    total_memory: int
    jax_device: str


def get_device_properties(device=None) -> DeviceProperties:
    dev = _device()
    return DeviceProperties(dev.device_kind, dev.platform, mem_get_info()[1], str(dev))


API = (
    memory_allocated,
    max_memory_allocated,
    reset_peak_memory_stats,
    memory_reserved,
    max_memory_reserved,
    mem_get_info,
    memory_stats,
    empty_cache,
    get_device_name,
    get_device_properties,
)


def install() -> None:
    """torch.jax.memory_allocated and the rest of torch.cuda's memory API, on the device module."""
    for fn in API:
        setattr(jax_device_module.module, fn.__name__, fn)
