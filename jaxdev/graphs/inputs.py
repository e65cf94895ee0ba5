"""The layout of one compiled call's inputs: which storages its tensors reach and where each tensor
sits on them. Its key fixes everything a traced program depends on (sizes, strides, offsets, dtypes,
which inputs share a storage, Python scalars), so a call with another layout gets its own program."""

from __future__ import annotations

import types
from collections.abc import Hashable, Mapping

import jax
import torch
import torch.fx

from jaxdev import dtypes, native, tensor
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


# --- a specialisation's guard ----------------------------------------------------------------------

try:  # dynamo's C++ tensor check (TENSOR_MATCH): dtype, device, sizes, strides, dispatch keys, ...
    from torch._C._dynamo.guards import TensorGuards as _TensorGuards
except ImportError:  # without it every call builds its full key (slower, the same programs)
    _TensorGuards = None

_BITS = (torch._C.DispatchKey.Conjugate, torch._C.DispatchKey.Negative)
_included = torch._C._dispatch_tls_is_dispatch_key_included
_excluded = torch._C._dispatch_tls_is_dispatch_key_excluded


def _bits_hidden() -> bool:
    """The thread's dispatch state adds or removes the conj/neg keys (never outside their fallbacks):
    a tensor check that compares dispatch keys as that state shows them could not tell the bits."""
    return any(_included(k) or _excluded(k) for k in _BITS)


class Guard:
    """Whether a call's tensors have the dtypes, sizes, strides and conj/neg bits of the tensors a
    specialisation was made for. With the same `Inputs.placed` (storages, offsets, Python arguments)
    that is the same full key. The check is dynamo's own, in C++; it also compares what the key does
    not hold (device, Python type, requires_grad, the dispatch state), where a difference only sends
    the call to the full key."""

    __slots__ = ("_check",)

    def __init__(self, check):
        self._check = check

    @classmethod
    def of(cls, tensors: list) -> Guard | None:
        if _TensorGuards is None or _bits_hidden():
            return None
        sizes = [list(t.shape) for t in tensors]
        strides = [list(t.stride()) for t in tensors]
        return cls(_TensorGuards(*tensors, dynamic_dims_sizes=sizes, dynamic_dims_strides=strides).check)

    def passes(self, tensors: list) -> bool:
        return self._check(*tensors) and not _bits_hidden()


# --- the layout of one call's inputs -------------------------------------------------------------

_STATIC = object()  # marks a Python argument in `Inputs.placed`, so that no two lists of arguments share one
# The placement loop below in C++ (jaxdev/csrc/graph_inputs.cpp), for calls whose tensors are all jax's:
# 1.3 us of Python per tensor, most of a compiled train step's host time in Inputs (issue 37).
_native_place = native.module.graph_place if native.module is not None else None
_native_arrays = native.module.graph_arrays if native.module is not None else None


class Inputs:
    """The storages one call's tensors reach, and each tensor's place on them.

    `metas[i]` is (storage group, dtype, sizes, strides, offset, conj bit, neg bit) for tensor
    argument i (None for other arguments); `key` fixes everything a traced program depends on.

    `Inputs(args, full=False)` stops at where the tensors are (`placed`): which storage each one is
    on and at which offset, the storages' sizes and dtypes, and the Python arguments; the tensors'
    own dtypes, sizes, strides and conj/neg bits are then left to a `Guard` (one C++ check per call,
    where asking each tensor in Python cost a microsecond), and `complete(args)` adds them."""

    __slots__ = ("boxes", "cpu", "key", "metas", "placed", "shared", "storages", "tensors")

    def __init__(self, args, full: bool = True):
        got = _native_place(args, _STATIC) if _native_place is not None and type(args) is list else None
        if got is not None:
            self.placed, self.tensors, self.storages, self.boxes = got
            self.cpu, self.shared = {}, ()  # the native loop declines a copy-on-write storage
            self.key = self.metas = None
            if full:
                self.complete(args)
            return
        placed, tensors, storages, boxes, cpu, stored, shared = [], [], [], [], {}, [], []
        index: dict[int, int] = {}
        for a in args:
            if not isinstance(a, torch.Tensor):
                placed += (_STATIC, a if isinstance(a, _STATIC_TYPES) else _opaque_key(a))
                continue
            st = a.untyped_storage()
            # The storage's address as torch._C._data_address reads it: Python's data_ptr() asks for the
            # mutable pointer, which would materialize a copy-on-write input the graph only reads.
            ptr = torch._C._data_address(a)
            g = index.get(ptr)
            if g is None:
                g = index[ptr] = len(storages)
                storages.append(st)
                if torch._C._is_cow_tensor(a):
                    shared.append(g)
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
                stored += (box.numel, box.dtype, g in cpu)
            placed += (g, a.storage_offset())
            tensors.append(a)
        placed += stored
        self.placed, self.tensors, self.storages, self.boxes, self.cpu = tuple(placed), tensors, storages, boxes, cpu
        self.shared = shared
        self.key = self.metas = None
        if full:
            self.complete(args)

    def complete(self, args) -> None:
        """The full key and each tensor's meta, from the placement and the tensors themselves."""
        key, metas = [], []
        tensors = iter(self.tensors)
        groups = iter(self.placed)
        for a in args:
            if not isinstance(a, torch.Tensor):
                next(groups)
                key.append(next(groups))
                metas.append(None)
                continue
            t = next(tensors)
            g, offset = next(groups), next(groups)
            meta = (g, t.dtype, t.shape, t.stride(), offset, t.is_conj(), t.is_neg())
            metas.append(meta)
            key.append(meta)
        key.extend((b.numel, b.dtype, g in self.cpu) for g, b in enumerate(self.boxes))
        self.key, self.metas = tuple(key), metas

    def arrays(self) -> list:
        arrays = [b.array for b in self.boxes]
        if self.cpu:
            # host placement: replicated over the mesh when one is set (jaxdev/parallel/mesh.py), else the default device
            moved = jax.device_put([dtypes.cpu_to_numpy(t) for t in self.cpu.values()], placement.host_placement())
            for g, a in zip(self.cpu, moved):
                arrays[g] = a
        return arrays

    def arrays_as(self, shapes: list) -> list:
        """`arrays()`, each in the shape its program was traced with (`shapes`): a box reshaped by an
        eager read since then does not retrace the program."""
        arrays, same = self.arrays_checked(shapes)
        if not same:
            arrays = [a if a.shape == shape else a.reshape(shape) for a, shape in zip(arrays, shapes)]
        return arrays

    def arrays_checked(self, shapes: list) -> tuple[list, bool]:
        """`arrays()`, and whether each has its shape in `shapes` (natively where it can be: asked in
        Python, each array's shape is a new tuple)."""
        got = None
        if _native_arrays is not None and not self.cpu and type(self.boxes) is list:
            got = _native_arrays(self.boxes, shapes)
        if got is None:
            arrays = self.arrays()
            return arrays, [a.shape for a in arrays] == shapes
        return got

    def store(self, groups: list[int], values: list) -> None:
        for g in self.shared:
            if g in groups and g not in self.cpu:
                # Written copy-on-write storage: made its own first (the mutable pointer, as a CPU kernel's
                # write asks for it), so the write reaches its own new box, not the data it shared.
                self.boxes[g] = BOXES[self.storages[g].data_ptr()]
        _store(self.boxes, self.cpu, groups, values)


def _store(boxes: list, cpu: dict, groups: list[int], values: list) -> None:
    """A call's written storages given their new arrays (a CPU input's copied back)."""
    on_cpu = [(g, v) for g, v in zip(groups, values) if g in cpu]
    for g, v in zip(groups, values):
        if g not in cpu:
            box = boxes[g]
            box.array = v
            box.writes += 1
            if tensor.SHARDED_ENTRIES:  # a sharded storage keeps its sharding (jaxdev/parallel/mesh.py)
                tensor.keep_sharding(box)
    if on_cpu:
        host = jax.device_get([v for _, v in on_cpu])
        for (g, _), h in zip(on_cpu, host):
            cpu[g].copy_(dtypes.numpy_to_cpu(h, cpu[g].dtype))


# --- a call matched to a specialisation natively (jaxdev/csrc/graph_match.cpp) ------------------------

_native_key = getattr(native.module, "graph_key", None)
native_match = getattr(native.module, "graph_match", None)
_NO_CPU: Mapping = types.MappingProxyType({})


def native_key(metas: list, statics: list, storage_meta: list, shapes: list):
    """A specialisation's input layout (Inputs.metas, its Python arguments, its storages' (numel, dtype),
    its arrays' shapes) compiled for `native_match`, or None (no native module, an argument type the
    native placement leaves to Python)."""
    if _native_key is None:
        return None
    return _native_key(list(metas), list(statics), [tuple(m) for m in storage_meta], [tuple(s) for s in shapes])


class Matched:
    """A call's inputs as `native_match(key, args)` found them: the same full key as `Inputs(args)`, every
    tensor a plain jax tensor (no CPU input), each storage group's box and array, and the first argument
    on each group, whose storage object is made only where an output is a view of it."""

    __slots__ = ("_storages", "arrays", "boxes", "firsts", "same")
    cpu = _NO_CPU

    def __init__(self, got: tuple):
        self.arrays, self.boxes, self.firsts, self.same = got
        self._storages = None

    @property
    def storages(self) -> list:
        if self._storages is None:
            self._storages = [t.untyped_storage() for t in self.firsts]
        return self._storages

    def arrays_as(self, shapes: list) -> list:
        if self.same:
            return self.arrays
        return [a if a.shape == shape else a.reshape(shape) for a, shape in zip(self.arrays, shapes)]

    def store(self, groups: list[int], values: list) -> None:
        _store(self.boxes, self.cpu, groups, values)
