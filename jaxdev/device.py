"""Registers PrivateUse1 as the `jax` device: the `torch.jax` module, hooks and device guard.

Pure Python: `torch.utils.backend_registration._setup_privateuseone_for_python_backend` renames the
key, generates `Tensor.is_jax`/`.jax()`/`Module.jax()`, and installs our hook and guard (without a
guard the autograd engine aborts the process).
"""

from __future__ import annotations

import contextlib
import importlib.abc
import os
import sys
import types

import jax
import torch
import torch.utils.backend_registration as _backend_registration

from jaxdev import native, rng

jax.config.update("jax_enable_x64", True)

NAME = "jax"


def device_count() -> int:
    return jax.device_count()


class _Hooks(torch._C._acc.PrivateUse1Hooks):
    def is_available(self) -> bool:
        return True

    def has_primary_context(self, dev_id) -> bool:
        return True

    def is_built(self) -> bool:
        return True


class _Guard(torch._C._acc.DeviceGuard):
    def type_(self):
        return torch._C._autograd.DeviceType.PrivateUse1


def check_index(index: int) -> int:
    index = int(index)
    if index != 0:
        n = device_count()
        if index < 0 or index >= n:
            raise RuntimeError(f"jax:{index} is not a device: JAX has {n} device(s) (jax:0..jax:{n - 1})")
        raise RuntimeError(
            f"jax:{index}: jaxdev places tensors on jax:0 only; PyTorch's Python device hooks "
            "cannot create tensors on a PrivateUse1 index other than 0"
        )
    return index


def _index_of(device) -> int:
    if device is None:
        return 0
    if isinstance(device, int):
        return device
    device = torch.device(device)
    return 0 if device.index is None else device.index


def _first_tensor() -> None:
    from jaxdev import eager_modes  # (imports the kernels' modules: not at registration)

    eager_modes.on_first_tensor()


def _make_module() -> types.ModuleType:
    """The `torch.jax` device module, shaped like `torch.cuda`."""
    m = types.ModuleType("torch.jax", "The jax device (registered by jaxdev).")

    m.is_available = lambda: True
    m.is_initialized = lambda: True
    m._initialized = True  # torch.utils.checkpoint saves a device's RNG state only when this is set
    m._is_in_bad_fork = lambda: False
    m._lazy_init = _first_tensor  # torch calls it once, at the device's first tensor
    m.device_count = device_count
    m.current_device = lambda: 0

    def set_device(device) -> None:
        check_index(_index_of(device))

    @contextlib.contextmanager
    def device(device):
        set_device(device)
        yield

    def synchronize(device=None) -> None:
        """Waits for all pending JAX work on the device to finish."""
        check_index(_index_of(device))
        from jaxdev import eager_modes, tracing
        from jaxdev.fused import boxes as fused_boxes
        from jaxdev.tensor import BOXES

        eager_modes.flush()  # fused eager's pending ops run now
        tracing.resolve_checks()
        for box in list(BOXES.values()):
            array = box.pending()  # a box holding a logical value is not transposed to wait for it
            if array is not None and not isinstance(array, jax.core.Tracer):  # skip a program being traced
                fused_boxes.wait(box, array)

    def get_rng_state(device="jax") -> torch.Tensor:
        check_index(_index_of(device))
        return rng.get_state()

    def set_rng_state(new_state: torch.Tensor, device="jax") -> None:
        check_index(_index_of(device))
        rng.set_state(new_state)

    m.set_device = set_device
    m.device = device
    m.synchronize = synchronize
    m.manual_seed = rng.manual_seed
    m.manual_seed_all = rng.manual_seed
    m.seed = rng.seed
    m.seed_all = rng.seed
    m.initial_seed = rng.initial_seed
    m.get_rng_state = get_rng_state
    m.set_rng_state = set_rng_state
    m.get_rng_state_all = lambda: [rng.get_state()]
    m.set_rng_state_all = lambda states: rng.set_state(states[0])
    m.get_amp_supported_dtype = lambda: [torch.float16, torch.bfloat16, torch.float32]
    return m  # the memory, stream and event API: each capability adds its own (jaxdev/capabilities/)


module = _make_module()


def _empty_host_cache() -> None:
    """Pinned host memory goes back to the system when its storage dies (jaxdev/capabilities/pinned.py): nothing is
    cached to release."""


def _device_capability(device=None, /) -> dict:
    """torch.accelerator.get_device_capability: the dtypes a jax tensor can hold."""
    check_index(_index_of(device))
    from jaxdev import dtypes

    return {"supported_dtypes": set(dtypes.TORCH_TO_JAX)}


# torch.accelerator's memory and synchronization calls (and torch.accelerator.memory's, separate
# functions of the same names) go to C++ allocator and stream hooks that a Python backend cannot
# provide: an internal assert, a "not supported", and for empty_host_cache without the native hooks a
# segmentation fault. When jax is the accelerator they are answered by the torch.jax module (a name)
# or by the function given instead.
_ACCELERATOR_CALLS = {
    "synchronize": "synchronize",
    "memory_allocated": "memory_allocated",
    "max_memory_allocated": "max_memory_allocated",
    "memory_reserved": "memory_reserved",
    "max_memory_reserved": "max_memory_reserved",
    "memory_stats": "memory_stats",
    "reset_peak_memory_stats": "reset_peak_memory_stats",
    "reset_accumulated_memory_stats": "reset_peak_memory_stats",
    "empty_cache": "empty_cache",
    "get_memory_info": "mem_get_info",
    "empty_host_cache": _empty_host_cache,
    "get_device_capability": _device_capability,
}


def _routed(accelerator, original, ours):
    """`ours` a name is looked up in the torch.jax module at each call: the capability that answers it
    (jaxdev/capabilities/memory.py) adds it to the module after the device is registered."""

    def call(*args, **kwargs):
        current = accelerator.current_accelerator()
        if current is not None and current.type == NAME:
            return (getattr(module, ours) if isinstance(ours, str) else ours)(*args, **kwargs)
        return original(*args, **kwargs)

    return call


def _route_accelerator_calls() -> None:
    import functools

    import torch.accelerator as accelerator
    import torch.accelerator.memory as memory

    for namespace in (accelerator, memory):
        for name, ours in _ACCELERATOR_CALLS.items():
            original = getattr(namespace, name, None)
            if original is None or getattr(original, "_jaxdev", False):
                continue

            call = _routed(accelerator, original, ours)

            functools.update_wrapper(call, original)
            call._jaxdev = True
            setattr(namespace, name, call)


class PrivateUse1Taken(ImportError):
    """Another backend already owns PyTorch's one PrivateUse1 slot in this process."""


class _RefuseTorchax(importlib.abc.MetaPathFinder):
    """torchax renames PrivateUse1 to "jax" too; imported after jaxdev it would fail inside PyTorch
    with a message about runtime modules. Say what happened instead."""

    def find_spec(self, name, path, target=None):
        if name == "torchax" or name.startswith("torchax."):
            raise PrivateUse1Taken(
                "torchax cannot be imported in a process that imported jaxdev: both register PyTorch's "
                "PrivateUse1 device as 'jax', and a process has one; use one of them per process"
            )
        return None


def _native_device_guard() -> None:
    """PyTorch's Python-backend device guard calls into Python for the device type on every guard
    operation, some of them noexcept: a backward whose hook raised then aborted the whole process
    (std::terminate) instead of raising. The native module (jaxdev/native.py) installs the same guard in
    C++; without it the Python one stays."""
    if native.module is not None:
        native.module.install_device_guard()
        native.module.install_attention_choice()  # jaxdev/ops/attention.py


BACKWARD_THREAD_ENV = "JAXDEV_BACKWARD_THREAD"


def run_backward_on_calling_thread() -> None:
    """PyTorch's autograd engine runs an accelerator's backward nodes on a worker thread of its own (one
    per device) while the calling thread waits. That suits C++ kernels; jaxdev's kernels are Python, so
    every backward call hands the work to that thread, which takes the GIL, and hands it back: measured
    here, a backward through one `mul` took 90 us against 28 us on the calling thread, and
    `(x * 2).sum().backward()` 253 us against 120 us. So the thread that imports jaxdev (the one that
    imports torch, under autoload) runs backward itself, as it does for CPU tensors:
    `torch.autograd.set_multithreading_enabled(False)`, a per-thread setting. Other threads keep
    PyTorch's default (the same context manager changes it there); JAXDEV_BACKWARD_THREAD=device keeps
    the device thread here too."""
    if os.environ.get(BACKWARD_THREAD_ENV, "").strip().lower() == "device":
        return
    torch._C._set_multithreading_enabled(False)


def register() -> None:
    current = torch._C._get_privateuse1_backend_name()
    if current == NAME and getattr(torch, NAME, None) is module:
        return
    if "torchax" in sys.modules or current == NAME:
        raise PrivateUse1Taken(
            "jaxdev cannot be imported in a process that imported torchax: both register PyTorch's "
            "PrivateUse1 device as 'jax', and a process has one; use one of them per process"
        )
    if current != "privateuseone":
        raise PrivateUse1Taken(
            f"jaxdev cannot register the 'jax' device: PyTorch's PrivateUse1 slot already belongs to "
            f"'{current}' in this process"
        )
    # A process registers PrivateUse1 hooks once: the native ones (pinned memory) go first, and PyTorch
    # then keeps them over the Python `_Hooks`, which stay for a process without the native module.
    native.install_hooks()
    _backend_registration._setup_privateuseone_for_python_backend(
        rename=NAME, backend_module=module, hook=_Hooks(), device_guard=_Guard()
    )
    _route_accelerator_calls()
    _native_device_guard()
    run_backward_on_calling_thread()
    sys.meta_path.insert(0, _RefuseTorchax())
