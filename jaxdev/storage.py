"""Storages on `jax` as whole objects: moved there (as `torch.load` does) and cloned (as
`copy.deepcopy` does), without a C++ allocator.

Storages moved to `jax` whole, as `torch.load` does (`storage.jax()`), without a typed tensor.

PyTorch's generated `UntypedStorage.jax()` allocates `torch.UntypedStorage(n, device="jax")`,
which needs a C++ allocator that a Python backend cannot provide (the process would crash). This
replacement builds the storage's Box from the bytes instead. Such a box holds uint8 until the first
tensor is set onto it (`set_`, as `torch.load` does next), which retypes it to that tensor's dtype.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import torch

from jaxdev import tensor


def storage_to_jax(self, device=None, non_blocking=False):
    if device is None:
        index = 0
    elif isinstance(device, int):
        index = device
    else:
        index = torch.device(device).index or 0
    if index != 0:
        from jaxdev.device import _check_index

        _check_index(index)
    if self.device.type == "jax":
        return self
    cpu = self if self.device.type == "cpu" else self.cpu()
    raw = np.frombuffer(bytes(cpu), dtype=np.uint8) if cpu.nbytes() else np.zeros((0,), np.uint8)
    box = tensor.Box(jnp.asarray(raw.copy()), raw.shape[0], torch.uint8)
    box.untyped = True
    return tensor.new_storage(box)


def clone_jax_storage(self):
    """A new jax storage holding a copy of this one's bytes (deepcopy goes through here)."""
    source = tensor.BOXES[self.data_ptr()]
    box = tensor.Box(source.array, source.numel, source.dtype)  # jax arrays are immutable: sharing is a copy
    box.untyped = source.untyped
    if source in tensor.SHARDED:  # a copy of a sharded storage keeps its sharding (jaxdev/mesh.py)
        tensor.SHARDED[box] = tensor.SHARDED[source]
    return tensor.new_storage(box)


def install() -> None:
    base = torch.storage._StorageBase
    original_to = base.to
    original_clone = base.clone

    def clone(self):
        return clone_jax_storage(self) if self.device.type == "jax" else original_clone(self)

    clone.__doc__ = original_clone.__doc__
    base.clone = clone

    def to(self, *, device, non_blocking=False):
        device = torch.device(device)
        if device.type == "jax":
            return storage_to_jax(self, device, non_blocking)
        return original_to(self, device=device, non_blocking=non_blocking)

    to.__doc__ = original_to.__doc__
    base.to = to
    base.jax = storage_to_jax
