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
  itself to `jax.device_put`, which returns while the transfer runs (`to_jax_async`, jaxdev/core/placement.py), where every other
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

import torch

from jaxdev import native

_fallback_lib = None
_warned = False


def install() -> None:
    """Without the native hooks (jaxdev/device.py registers them: native.install_hooks), CPU's `_pin_memory` (what
    `pin_memory()` calls when a tensor is not pinned) makes an ordinary copy instead of asking the
    hooks for an allocator they cannot give."""
    global _fallback_lib
    if native.hooks or _fallback_lib is not None:
        return
    _fallback_lib = torch.library.Library("aten", "IMPL")
    _fallback_lib.impl("_pin_memory", _unpinned_copy, "CPU")


def _unpinned_copy(self: torch.Tensor, device=None) -> torch.Tensor:
    global _warned
    if not _warned:
        _warned = True
        warnings.warn(
            "pin_memory() returns ordinary memory (is_pinned() is False) because jaxdev's native module, "
            f"which provides the jax device's pinned allocator, is not loaded: {native.unavailable}",
            UserWarning,
            stacklevel=2,
        )
    # the layout CUDA's _pin_memory gives: self's sizes and strides over a new storage
    return torch.empty_strided(self.size(), self.stride(), dtype=self.dtype).copy_(self)
