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

from jaxdev import eager_modes, tensor


def storage_to_jax(self, device=None, non_blocking=False):
    if device is None:
        index = 0
    elif isinstance(device, int):
        index = device
    else:
        index = torch.device(device).index or 0
    if index != 0:
        from jaxdev.device import check_index

        check_index(index)
    if self.device.type == "jax":
        return self
    cpu = self if self.device.type == "cpu" else self.cpu()
    raw = np.frombuffer(bytes(cpu), dtype=np.uint8) if cpu.nbytes() else np.zeros((0,), np.uint8)
    box = tensor.Box(jnp.asarray(raw.copy()), raw.shape[0], torch.uint8)
    box.untyped = True
    return tensor.new_storage(box)


def clone_jax_storage(self):
    """A new jax storage holding a copy of this one's bytes (deepcopy goes through here)."""
    source = tensor.BOXES[tensor.storage_address(self)]  # a read: a copy-on-write storage stays shared
    box = tensor.Box(source.array, source.numel, source.dtype)  # jax arrays are immutable: sharing is a copy
    box.untyped = source.untyped
    if source in tensor.SHARDED:  # a copy of a sharded storage keeps its sharding (jaxdev/parallel/mesh.py)
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
    install_storages()


# --- storages made, sliced, resized and typed on jax -------------------------------------------
#
# `torch.UntypedStorage(n, device="jax")` reaches PyTorch's C++ constructor, which allocates through
# the device's C++ allocator; a Python backend has none and the process would crash. The constructor,
# `new()`, `_byteswap` and `resize_` are therefore answered here for jax storages, through the same
# boxes tensors use. Everything else (`fill_`, `copy_`, `tolist`, `cpu()`, indexing) already works:
# PyTorch runs it as tensor ops on the storage.


def _empty_storage(nbytes: int) -> torch.UntypedStorage:
    box = tensor.Box(tensor.zeros(nbytes, jnp.uint8), nbytes, torch.uint8)
    box.untyped = True
    return tensor.new_storage(box)


def _jax_index(device) -> int | None:
    """The jax index `device` names, None when it names another device type."""
    if device is None or isinstance(device, int):
        return None
    device = torch.device(device)
    return (device.index or 0) if device.type == "jax" else None


def _new_untyped(cls, *args, **kwargs):
    index = _jax_index(kwargs.get("device"))
    if index is None:
        return torch._C.StorageBase.__new__(cls, *args, **kwargs)
    if index != 0:
        from jaxdev.device import check_index

        check_index(index)
    if len(args) == 1 and isinstance(args[0], int) and not isinstance(args[0], bool):
        if args[0] < 0:
            raise RuntimeError(f"Trying to create a storage of negative size {args[0]} on jax")
        return _empty_storage(args[0])
    # A sequence of bytes (or no argument): CPU validates and builds it, then it moves.
    return storage_to_jax(torch._C.StorageBase.__new__(cls, *args, **{**kwargs, "device": "cpu"}))


def _bytes_of(storage) -> torch.Tensor:
    """A uint8 jax tensor over all of `storage`'s bytes (reads and writes go through it)."""
    n = storage.nbytes()
    return tensor.tensor_on_storage(storage, torch.uint8, (n,), (1,))


def _byteswap(self, elem_size):
    if self.device.type != "jax":
        return _original_byteswap(self, elem_size)
    if elem_size not in (1, 2, 4, 8):
        raise RuntimeError("elem_size must be 1, 2, 4, or 8")
    n = self.nbytes()
    if n % elem_size:
        raise RuntimeError(f"the length of data is not a multiple of {elem_size}")
    if n and elem_size > 1:
        eager_modes.flush()  # the write below is direct: fused eager's pending reads of the storage go first
        raw = _bytes_of(self)
        tensor.write(raw, tensor.read(raw).reshape(-1, elem_size)[:, ::-1].reshape(-1))


def _resize(self, nbytes):
    """Resize in place as CUDA does: the storage (and every tensor on it) gets a new buffer of `nbytes`
    holding the old bytes (the rest zero). The new box is swapped in under the same StorageImpl."""
    if self.device.type != "jax":
        return _original_resize(self, nbytes)
    nbytes = int(nbytes)
    if nbytes < 0:
        raise RuntimeError(f"Trying to resize a storage to negative size {nbytes}")
    # The storage gets a new buffer below, outside any recorded op: fused eager's pending ops that
    # read or write it run first (they would read the new buffer, and the segment would look the
    # storage up under an address it no longer has: FSDP2's resize_(0) of an unsharded parameter).
    eager_modes.flush()
    source = tensor.BOXES.get(self.data_ptr())
    # jax storages all report resizable() False (they are made from an address); a slice is not
    # resizable on CUDA either: its box is a window (or, cut at byte 0, it is shorter than its box).
    if isinstance(source, SliceBox) or (source is not None and self.nbytes() != source.numel * source.dtype.itemsize):
        raise RuntimeError("Trying to resize storage that is not resizable")
    old = self.nbytes()
    keep = jnp.zeros((0,), jnp.uint8) if old == 0 else tensor.read(_bytes_of(self))[: min(old, nbytes)]
    raw = tensor.zeros(nbytes, jnp.uint8)
    if keep.shape[0]:
        raw = raw.at[: keep.shape[0]].set(keep)
    item = source.dtype.itemsize if source is not None and not source.untyped else 1
    if nbytes % item:
        item = 1
    dtype = source.dtype if item > 1 else torch.uint8
    box = tensor.Box(tensor.bitcast_flat(raw, dtype) if item > 1 else raw, nbytes // item, dtype)
    box.untyped = item == 1
    fresh = tensor.new_storage(box)
    # `_swap_data_ptr_` swaps buffers and sizes between storages of equal size, or with an empty one.
    if old:
        self._swap_data_ptr_(_empty_storage(0))
    self._swap_data_ptr_(fresh)
    tensor.reattach(box, self)  # the box now belongs to `self`'s StorageImpl: sweeps must follow that one
    return self


def _new(self):
    return _empty_storage(0) if self.device.type == "jax" else _original_new(self)


class SliceBox(tensor.Box):
    """The bytes of a storage slice (`storage[a:b]`): a window from byte `start` to the end of another
    box. PyTorch gives the slice the address of its first byte, which names no box of its own; reads
    and writes go through the root box, so the slice aliases the storage it was cut from, as on CUDA."""

    __slots__ = ("root", "start")

    def __init__(self, root: tensor.Box, start: int):
        super().__init__(None, 0, torch.uint8)
        self.root = root
        self.start = start
        self.untyped = True
        self.numel = self._available()

    def _available(self) -> int:
        return (self.root.numel * self.root.dtype.itemsize - self.start) // self.dtype.itemsize

    def _root_bytes(self):
        return tensor.to_bytes(self.root.flat())

    @property
    def array(self):
        raw = self._root_bytes()[self.start : self.start + self.numel * self.dtype.itemsize]
        return tensor.bitcast_flat(raw, self.dtype) if self.dtype != torch.uint8 else raw

    @array.setter
    def array(self, value):
        if value is None:
            return
        raw = tensor.to_bytes(jnp.asarray(value).reshape(-1))
        root = self._root_bytes().at[self.start : self.start + raw.shape[0]].set(raw)
        self.root.array = tensor.bitcast_flat(root, self.root.dtype) if self.root.dtype != torch.uint8 else root

    @property
    def logical(self):
        return None

    @logical.setter
    def logical(self, value):
        if value is not None:  # a whole-storage write kept in logical form: store it physically
            self.array = tensor.transpose_program(value[3])(value[0])

    def pending(self):
        return self.array

    def retype(self, dtype: torch.dtype) -> None:
        self.dtype = dtype
        self.numel = self._available()
        self.untyped = False


def _getitem(self, *args, **kwargs):
    out = _original_getitem(self, *args, **kwargs)
    if isinstance(out, torch.UntypedStorage) and out.device.type == "jax":
        addr = out.data_ptr()
        if addr not in tensor.BOXES:
            parent = tensor.BOXES[self.data_ptr()]
            start = addr - self.data_ptr()
            if isinstance(parent, SliceBox):
                parent, start = parent.root, parent.start + start
            # A value fused eager has still pending is computed now: the slice reads the root box's
            # bytes, which a flush leaves unset where the root storage has died by then (and
            # torch.jax.synchronize, which waits on every box, then failed on the slice).
            _ = parent.array
            box = SliceBox(parent, start)
            tensor.BOXES[addr] = box
            # Every slice at this address shares the box: it lives as long as the root storage,
            # which PyTorch keeps alive while any slice of it does.
            # (A weak slot of 0 is a copy-on-write box, which self.data_ptr() above made self's own.)
            root = torch.UntypedStorage._new_with_weak_ptr(parent.weak) if parent.weak else self
            box.weak = root._weak_ref()
    return out


def _typed_to_jax(self, device=None, non_blocking=False):
    if self.dtype in (torch.quint8, torch.quint4x2, torch.quint2x4, torch.qint32, torch.qint8):
        raise RuntimeError("Cannot create jax storage with quantized dtype")
    return self._new_wrapped_storage(storage_to_jax(self._untyped_storage, device, non_blocking))


def _legacy_storage_classes(module) -> None:
    """`torch.jax.FloatStorage` and the rest, as `torch.cuda` has them (what `storage_type()` returns)."""
    legacy = torch.storage._LegacyStorage
    for dtype, name in torch.storage._dtype_to_storage_type_map().items():
        if hasattr(module, name):
            continue

        def _dtype(cls, _d=dtype):
            return _d

        def dtype_(cls, _d=dtype):
            torch.storage._warn_typed_storage_removal()
            return _d

        cls = type(
            name,
            (legacy,),
            {
                "__module__": "torch.jax",
                "_dtype": torch._utils.classproperty(_dtype),
                "dtype": torch._utils.classproperty(dtype_),
            },
        )
        setattr(module, name, cls)
        torch._storage_classes.add(cls)


def install_storages() -> None:
    global _original_new, _original_getitem, _original_byteswap, _original_resize
    untyped = torch.UntypedStorage
    _original_new = torch._C.StorageBase.new
    _original_getitem = untyped.__getitem__
    _original_byteswap = torch._C.StorageBase._byteswap
    _original_resize = torch._C.StorageBase.resize_
    untyped.__new__ = staticmethod(_new_untyped)
    untyped.new = _new
    untyped.__getitem__ = _getitem
    untyped._byteswap = _byteswap
    untyped.resize_ = _resize
    for name, fn in (("new", _new), ("_byteswap", _byteswap), ("resize_", _resize)):
        fn.__doc__ = getattr(torch._C.StorageBase, name).__doc__
    torch.storage.TypedStorage.jax = _typed_to_jax
    module = getattr(torch, "jax", None)
    if module is not None:
        _legacy_storage_classes(module)
