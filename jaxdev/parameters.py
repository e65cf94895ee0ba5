"""Parameters keep their identity when a module moves to or from jax, so weight ties survive.

`nn.Module._apply` (behind `.to`, `.jax()`, `.cpu()`, `.double()`, ...) keeps a Parameter object,
and with it every tie between modules (GPT-2's `lm_head.weight is transformer.wte.weight`), only
when `torch._has_compatible_shallow_copy_type(param, moved)` holds. That C++ check knows the dense
backends by name (CPU, CUDA, XPU, ...), not PrivateUse1, so for jax it is false and `_apply` makes a
new Parameter per module: the tie comes apart, each copy gets part of the gradient, and training
drifts from CPU. PyTorch's other route keeps identity for any device: swapping the new values into
the existing Parameter object (`torch.utils.swap_tensors`, the `swap_module_params_on_conversion`
future flag). jaxdev turns that flag on for exactly the conversions that touch jax — the module
already holds a jax tensor, or the conversion sends a probe tensor to jax — and leaves every other
conversion as PyTorch does it.
"""

from __future__ import annotations

import functools

import torch
from torch import nn

_PROBE = torch.empty(0)


def _touches_jax(module: nn.Module, fn) -> bool:
    for t in module._parameters.values():
        if t is not None and t.device.type == "jax":
            return True
    for t in module._buffers.values():
        if t is not None and t.device.type == "jax":
            return True
    try:
        return fn(_PROBE).device.type == "jax"
    except Exception:  # a conversion that cannot take the probe is not a device move
        return False


def install() -> None:
    original = nn.Module._apply
    if getattr(original, "_jaxdev", False):
        return

    @functools.wraps(original)
    def _apply(self, fn, recurse=True):
        if torch.__future__.get_swap_module_params_on_conversion() or not _touches_jax(self, fn):
            return original(self, fn, recurse)
        torch.__future__.set_swap_module_params_on_conversion(True)
        try:
            return original(self, fn, recurse)
        finally:
            torch.__future__.set_swap_module_params_on_conversion(False)

    _apply._jaxdev = True
    nn.Module._apply = _apply
