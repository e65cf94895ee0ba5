"""Pinned host memory while jax is PyTorch's current accelerator.

With jaxdev installed, `import torch` makes jax the accelerator of every process, and PyTorch asks
its hooks for pinned memory: `Tensor.pin_memory()`, `DataLoader(pin_memory=True)` (with or without
`pin_memory_device="jax"`), `torch.empty(..., pin_memory=True)`, and `is_pinned()` for the answer.
The hooks PyTorch registers for a Python backend (torch/csrc/acc) raise NotImplementedError for the
allocator, so a CPU-only script that pins memory failed as soon as jaxdev was installed.

Two ways, chosen once at registration:

* The native module (jaxdev/csrc/native.cpp) registers the device's hooks in C++ before PyTorch's
  Python ones (a process registers hooks once). Its allocator gives 64-byte aligned host memory,
  not page-locked, and records each block, so `is_pinned()` is True exactly for memory it gave.
  What it buys, on a GPU or TPU: `.to("jax", non_blocking=True)` of a pinned tensor hands the buffer
  itself to `jax.device_put`, which returns while the transfer runs (`to_jax_async`), where every other
  host-to-jax copy first copies the values into a private numpy array, in full, on the calling thread.
  CUDA's contract holds: do not write the source before the transfer is done (`torch.jax.synchronize()`,
  or any read of the result). On JAX's CPU device the copy stays blocking: there `jax.device_put`
  aliases a 64-byte aligned host buffer instead of copying it (`may_alias=False` does not change that
  for numpy input in jax 0.10), so the result would change with its source; and the copying variants
  run on the calling thread anyway.
* Without the module (`JAXDEV_NATIVE=off`, no compiler): `pin_memory()` returns an ordinary copy and
  `is_pinned()` stays False, with one warning per process; DataLoader(pin_memory=True) works that way
  too. Factories given `pin_memory=True` still raise PyTorch's NotImplementedError: they ask the
  hooks for the allocator directly, below any kernel jaxdev can register.
"""

from __future__ import annotations

import warnings

import jax
import torch

from jaxdev import dtypes

# Whether the native hooks (and so a pinned allocator) are in place in this process.
native_hooks = False
_fallback_lib = None
_warned = False


def install_native_hooks() -> bool:
    """The native module's hooks, registered before PyTorch's Python ones (only the first registration
    counts). False when the module is unavailable."""
    global native_hooks
    from jaxdev import native

    if native.module is not None and hasattr(native.module, "install_hooks"):
        native_hooks = bool(native.module.install_hooks())
    return native_hooks


def install_fallback() -> None:
    """Without the native hooks, CPU's `_pin_memory` (what `pin_memory()` calls when a tensor is not
    pinned) makes an ordinary copy instead of asking the hooks for an allocator they cannot give."""
    global _fallback_lib
    if native_hooks or _fallback_lib is not None:
        return
    _fallback_lib = torch.library.Library("aten", "IMPL")
    _fallback_lib.impl("_pin_memory", _unpinned_copy, "CPU")


def _unpinned_copy(self: torch.Tensor, device=None) -> torch.Tensor:
    global _warned
    if not _warned:
        _warned = True
        from jaxdev import native

        warnings.warn(
            "pin_memory() returns ordinary memory (is_pinned() is False) because jaxdev's native module, "
            f"which provides the jax device's pinned allocator, is not loaded: {native.unavailable}",
            UserWarning,
            stacklevel=2,
        )
    # the layout CUDA's _pin_memory gives: self's sizes and strides over a new storage
    return torch.empty_strided(self.size(), self.stride(), dtype=self.dtype).copy_(self)


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
    memory that jax.device_put can read as it is (contiguous, a dtype numpy holds, no lazy conj/neg)
    and copies into an accelerator's memory; None otherwise (the caller copies as usual). jax keeps the
    numpy view, and through it `t`'s storage, alive until the transfer is done."""
    if not native_hooks or t.layout != torch.strided or t.is_conj() or t.is_neg():
        return None
    if dtypes.needs_carrier(t.dtype) or not t.is_contiguous() or not t.is_pinned():
        return None
    from jaxdev.core import placement as placements  # imported late: it needs the registered device

    placement = placements.host_placement()  # a mesh's replicated sharding while one is set
    if not _copies_to_device_memory(placement):
        return None
    return jax.device_put(t.detach().numpy(), placement)
