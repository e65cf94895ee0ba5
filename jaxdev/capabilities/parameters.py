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

`swap_tensors` refuses a tensor that anything else refers to: a Python weakref (dynamo's guards,
a compiled optimizer's), or a second C++ owner of its TensorImpl (a live autograd graph that saved
the parameter). CUDA never meets that refusal: it assigns `param.data`, which PyTorch allows only
between the dense backends it names. So within a jax conversion a refused swap is done anyway,
with the same Python object and `torch._C._swap_tensor_impl` that `swap_tensors` itself ends with:
weakrefs and every Python reference then see the moved values, as after CUDA's `param.data = ...`,
and C++ owners keep the old values, as they would keep a Parameter that `_apply` replaced. A graph
recorded before the move would accumulate its gradient into that old, now unreachable TensorImpl,
so its gradient node is made to raise instead of losing the gradient silently.
"""

from __future__ import annotations

import copyreg
import functools
import threading

import torch
from torch import nn

_PROBE = torch.empty(0)
_STALE_GRAPH = (
    "This backward runs a graph recorded before its module's parameters moved to or from jax; "
    "run the forward again after the move."
)
# Whether this thread is inside a conversion that touches jax: only there is a refused swap forced.
_converting = threading.local()


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


def _refuse_stale_graph(grad_outputs):
    raise RuntimeError(_STALE_GRAPH)


def _force_swap(t1: torch.Tensor, t2: torch.Tensor) -> bool:
    """`torch.utils.swap_tensors` without its weakref and use-count refusals (see the module docstring);
    False, with nothing changed, where the two differ in slots, which no swap can reconcile."""
    slots = copyreg._slotnames(t1.__class__)
    if set(slots) != set(copyreg._slotnames(t2.__class__)):
        return False
    if t1.requires_grad and t1.grad_fn is None:
        torch.autograd.graph.get_gradient_edge(t1).node.register_prehook(_refuse_stale_graph)
    missing = object()
    for name in ("__class__", "__dict__", *slots):
        value1, value2 = getattr(t1, name, missing), getattr(t2, name, missing)
        for t, value in ((t1, value2), (t2, value1)):
            if value is not missing:
                setattr(t, name, value)
            elif hasattr(t, name):
                delattr(t, name)
    torch._C._swap_tensor_impl(t1, t2)
    return True


def _install_swap() -> None:
    strict = torch.utils.swap_tensors

    @functools.wraps(strict)
    def swap_tensors(t1, t2):
        if not getattr(_converting, "active", False):
            return strict(t1, t2)
        try:
            return strict(t1, t2)
        except RuntimeError:
            # Its refusals come before anything is swapped: t1 and t2 are intact here.
            if not _force_swap(t1, t2):
                raise

    swap_tensors._jaxdev = True
    torch.utils.swap_tensors = swap_tensors  # `_apply` looks it up here at each call


def install() -> None:
    original = nn.Module._apply
    if getattr(original, "_jaxdev", False):
        return
    _install_swap()

    @functools.wraps(original)
    def _apply(self, fn, recurse=True):
        if torch.__future__.get_swap_module_params_on_conversion() or not _touches_jax(self, fn):
            return original(self, fn, recurse)
        torch.__future__.set_swap_module_params_on_conversion(True)
        outer, _converting.active = getattr(_converting, "active", False), True
        try:
            return original(self, fn, recurse)
        finally:
            _converting.active = outer
            torch.__future__.set_swap_module_params_on_conversion(False)

    _apply._jaxdev = True
    nn.Module._apply = _apply
