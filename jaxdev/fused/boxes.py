"""Storage boxes whose values the pending fused program will give.

Both classes add no slots to `tensor.Box`, so a box changes class in place (`box.__class__ = Box`)
once its value exists, and the native module, which only takes plain `Box`es on its fast paths,
sends every op on them to the Python kernels.

* `PendingBox`: a result of a recorded op; its array does not exist yet.
* `WrittenBox`: an existing storage that a recorded op writes into (an optimizer's in-place update);
  its array is the value before the pending writes.

Anything that touches either (its array, its logical form) first runs the pending program, so no
code ever sees a value that is not there yet, or an old one.
"""

from __future__ import annotations

import jax
import torch

from jaxdev import eager_modes, native, tensor
from jaxdev.core import boxes as core_boxes
from jaxdev.tensor import BOXES, Box

# The flush's loops over every storage, natively (jaxdev/csrc/fused_flush.cpp); the loops below otherwise.
_native_alive = getattr(native.module, "fused_alive", None)
_native_settle = getattr(native.module, "fused_settle", None)
_native_unwrite = getattr(native.module, "fused_unwrite", None)
_ARRAY = Box.__dict__["array"]
_LOGICAL = Box.__dict__["logical"]  # the slot's descriptor


class _Unset:
    """What a PendingBox holds until the program gives its value."""

    __slots__ = ("error",)

    def __init__(self, error: str | None = None):
        self.error = error


PENDING = _Unset()


def _flush(box: Box) -> None:
    eager_modes.flush()  # the pending segment (jaxdev/fused/mode.py's flush)
    held = box._array
    if type(held) is _Unset:  # the flush failed before this value was computed
        raise RuntimeError(
            "jaxdev fused eager: this tensor's value was never computed because an earlier op failed"
            + (f" ({held.error})" if held.error else "")
        )


class _Deferred(Box):
    __slots__ = ()

    @property
    def array(self):
        _flush(self)
        return _ARRAY.__get__(self)

    @array.setter
    def array(self, value) -> None:
        _flush(self)
        _ARRAY.__set__(self, value)

    @property
    def logical(self):
        _flush(self)
        return _LOGICAL.__get__(self)

    @logical.setter
    def logical(self, value) -> None:
        _flush(self)
        _LOGICAL.__set__(self, value)

    def pending(self):
        """What torch.jax.synchronize waits on: the value, once the pending program has run; None where
        an earlier program failed to give it (that flush raised the error; reading the tensor still
        does): a later sync has nothing to wait for here, and raised that error again at every call."""
        eager_modes.flush()
        return None if type(self._array) is _Unset else self.array


def held(box: Box) -> tuple:
    """(array, logical form) as `box` holds them now, read without running the pending program: a
    WrittenBox's array is its value before the segment's writes, a PendingBox's is not there yet."""
    return box._array, _LOGICAL.__get__(box)


class PendingBox(_Deferred):
    __slots__ = ()


class WrittenBox(_Deferred):
    __slots__ = ()


def new_pending(numel: int, dtype) -> tuple[PendingBox, object]:
    """A box with no value yet and its new storage."""
    box = Box(None, numel, dtype)
    box.__class__ = PendingBox
    box._array = PENDING  # the slot itself: the `array` setter would ask for the value first
    return box, tensor.new_storage(box)


class Shape:
    """What the native wrap reads of an array: its shape."""

    __slots__ = ("shape",)


def new_pending_tensor(shape: tuple, dtype) -> tuple[PendingBox, object, int]:
    """A contiguous tensor of `shape` on a new storage of exactly its size whose value is pending, its
    box and its storage's address: the native module's wrap makes tensor, storage and box in one call (new_pending and
    tensor_on_storage cost about three times as much, a third of recording a small op)."""
    wrap = core_boxes.native_wrap
    if wrap is None:
        numel = 1
        for n in shape:
            numel *= n
        box, storage = new_pending(numel, dtype)
        return (
            box,
            tensor.tensor_on_storage(storage, dtype, shape, tensor.contiguous_strides(shape)),
            storage.data_ptr(),
        )
    stand_in = Shape()
    stand_in.shape = shape
    address = next(core_boxes.next_address)
    t = wrap(stand_in, dtype, address)
    core_boxes.checkpoint()
    box = BOXES[address]
    box.__class__ = PendingBox
    box._array = PENDING
    return box, t, address


# The data pointer of a tensor's storage (its box's key), read as `torch._C._data_address` reads it:
# with no Python storage object (one made once stays with the storage, which then counts two users, so
# autograd would sum a gradient into a new tensor where it sums in place otherwise: InputBuffer's
# can_accumulate_inplace; and a step whose ops were replayed, replay.py, which makes none, would call
# other ops than the step that learned them), and without asking for the mutable pointer as Python's
# data_ptr() does, which materializes a copy-on-write storage (Tensor._lazy_clone): recording a read
# must leave it shared, as CPU does; an op that writes one unshares it first (cow.py).
address = torch._C._data_address
# The same for a storage object (the segment's inputs are kept as their storages): core's.
storage_address = core_boxes.storage_address


def settle(box: Box, array) -> None:
    """The program gave `box`'s value: it is a plain Box from now on."""
    box.__class__ = Box
    box._array = array


def alive(pending: list) -> tuple:
    """For each (box, node, m) of a segment's new storages: whether a tensor still holds the storage."""
    if _native_alive is not None:
        return _native_alive(pending)
    return tuple(_alive(box) for box, _, _ in pending)


def _alive(box: Box) -> bool:
    # The native module releases a dead storage's weak reference and sets it to None; 0 is a box whose
    # storages share it copy-on-write (jaxdev/csrc/cow.cpp), alive while it is in BOXES.
    return box.weak is not None and (box.weak == 0 or not torch.UntypedStorage._expired(box.weak))


def settle_all(pending: list, alive: tuple, values: list) -> None:
    """settle for each (box, node, m): the next of `values` where it is alive, else None."""
    if _native_settle is not None:
        return _native_settle(pending, alive, values)
    given = iter(values)
    for (box, _, _), live in zip(pending, alive):
        settle(box, next(given) if live else None)
    return None


def unwrite_all(written: list) -> None:
    if _native_unwrite is not None:
        return _native_unwrite(written)
    for box in written:
        unwritten(box)
    return None


def fail(box: Box, error: str) -> None:
    """The program could not give `box`'s value: reading it says why."""
    box._array = _Unset(error)


def wait(box: Box, array) -> None:
    """`array.block_until_ready()` for torch.jax.synchronize. XLA's CPU runtime reports an allocation a
    program cannot make when the program runs, not at the call that flushed it: the error is raised once,
    as torch's out-of-memory error where it is one (per-op mode's allocation raises it at the op), and a
    plain box is then marked as a failed flush marks its results (a read says why, a later sync skips it)
    rather than keep an array whose every wait raises again."""
    try:
        array.block_until_ready()
    except jax.errors.JaxRuntimeError as error:
        if type(box) is Box:
            box.__class__ = PendingBox
            fail(box, f"{type(error).__name__}: {str(error).splitlines()[0]}")
        tensor.raise_if_out_of_memory(error)
        raise


def unwritten(box: Box) -> None:
    box.__class__ = Box


def is_deferred(box) -> bool:
    return isinstance(box, _Deferred)
