"""The layout of one compiled call's inputs: which storages its tensors reach and where each tensor
sits on them. Its key fixes everything a traced program depends on (sizes, strides, offsets, dtypes,
which inputs share a storage, Python scalars), so a call with another layout gets its own program."""

from __future__ import annotations

from collections.abc import Hashable

import jax
import torch
import torch.fx

from jaxdev import dtypes, tensor
from jaxdev.core import placement
from jaxdev.tensor import BOXES, Box
from jaxdev.tracing import UntraceableGraph

# Non-tensor graph inputs (sizes under dynamic shapes, scalars) are baked into the program.
_STATIC_TYPES = (
    int,
    float,
    bool,
    complex,
    str,
    type(None),
    torch.dtype,
    torch.device,
    torch.memory_format,
    torch.layout,
)


def _opaque_key(a):
    """An opaque object (a DTensor's DeviceMesh: dynamo passes it to the graph) keys the program by
    identity (a reference type, kept alive by the program's static arguments) or by value."""
    from torch._library import opaque_object

    if opaque_object.is_opaque_reference_type(type(a)):
        return ("opaque", type(a).__name__, id(a))
    if opaque_object.is_opaque_value_type(type(a)) and isinstance(a, Hashable):
        return ("opaque", type(a).__name__, a)
    raise UntraceableGraph(None, f"an input of type {type(a).__name__} cannot be part of a program's key")


# --- the layout of one call's inputs -------------------------------------------------------------


class Inputs:
    """The storages one call's tensors reach, and each tensor's place on them.

    `metas[i]` is (storage group, dtype, sizes, strides, offset, conj bit, neg bit) for tensor
    argument i (None for other arguments); `key` fixes everything a traced program depends on."""

    __slots__ = ("boxes", "cpu", "key", "metas", "storages")

    def __init__(self, args):
        key, metas, storages, boxes, cpu = [], [], [], [], {}
        index: dict[int, int] = {}
        for a in args:
            if not isinstance(a, torch.Tensor):
                if not isinstance(a, _STATIC_TYPES):
                    a = _opaque_key(a)
                key.append(a)
                metas.append(None)
                continue
            st = a.untyped_storage()
            ptr = st.data_ptr()
            g = index.get(ptr)
            if g is None:
                g = index[ptr] = len(storages)
                storages.append(st)
                box = BOXES.get(ptr)
                if box is None:
                    if a.device.type != "cpu":
                        raise UntraceableGraph(None, f"an input lives on {a.device}")
                    # CPU inputs (an optimizer's step count) are traced as device values, so the
                    # program does not bake them in as constants; writes are copied back.
                    numel = st.nbytes() // a.element_size()
                    cpu[g] = torch.empty(0, dtype=a.dtype).set_(st, 0, (numel,), (1,))
                    box = Box(None, numel, a.dtype)
                boxes.append(box)
            meta = (g, a.dtype, a.shape, a.stride(), a.storage_offset(), a.is_conj(), a.is_neg())
            metas.append(meta)
            key.append(meta)
        key.extend((b.numel, b.dtype, g in cpu) for g, b in enumerate(boxes))
        self.key, self.storages, self.boxes, self.cpu, self.metas = tuple(key), storages, boxes, cpu, metas

    def arrays(self) -> list:
        arrays = [b.array for b in self.boxes]
        if self.cpu:
            # host placement: replicated over the mesh when one is set (jaxdev/parallel/mesh.py), else the default device
            moved = jax.device_put([dtypes.cpu_to_numpy(t) for t in self.cpu.values()], placement.host_placement())
            for g, a in zip(self.cpu, moved):
                arrays[g] = a
        return arrays

    def store(self, groups: list[int], values: list) -> None:
        on_cpu = [(g, v) for g, v in zip(groups, values) if g in self.cpu]
        for g, v in zip(groups, values):
            if g not in self.cpu:
                box = self.boxes[g]
                box.array = v
                box.writes += 1
                if tensor.SHARDED_ENTRIES:  # a sharded storage keeps its sharding (jaxdev/parallel/mesh.py)
                    tensor.keep_sharding(box)
        if on_cpu:
            host = jax.device_get([v for _, v in on_cpu])
            for (g, _), h in zip(on_cpu, host):
                self.cpu[g].copy_(dtypes.numpy_to_cpu(h, self.cpu[g].dtype))
