"""Reading and writing jax tensors through their strides: `read` (the hot path of every kernel
argument), `write` (every alias sees it), the programs that gather and scatter a view of a box's array
(as slices when a plan fits, see plans.py), `read_parts` / `view_reader` for kernels that read a view
inside their own program, `wrap_strided` for results laid out as PyTorch's, and `sole_holder` (when a
write may donate the storage's buffer)."""

from __future__ import annotations

import functools
import math
import sys

import jax
import jax.numpy as jnp
import torch

from jaxdev import dtypes, native, tracing
from jaxdev.core.boxes import (
    BOXES,
    EXPORTED,
    ONLY_THE_BOX,
    Box,
    box_of,
    contiguous_strides,
    empty,
    is_jax,
    new_storage,
    tensor_on_storage,
    wrap,
)
from jaxdev.core.limits import check_no_internal_overlap, xla_extent_overflows
from jaxdev.core.placement import SHARDED, SHARDED_ENTRIES, keep_sharding, view_sharding
from jaxdev.core.plans import (
    INT32_OFFSETS,
    access_mode,
    dense_permutation,
    flat_as,
    plan_for,
    strided_index,
    view_value,
    wide_enough,
)

# read's hot path (the native module, jaxdev/native.py): the array of a plain tensor, else None.
plain_value = native.module.plain_value if native.module is not None else None
# A storage's address for a lookup that only reads: `untyped_storage().data_ptr()` asks for the mutable
# pointer, which makes a copy-on-write storage (Tensor._lazy_clone, jaxdev/csrc/cow.cpp) a copy of its
# own, as a write must; a read leaves it shared, as on CPU.
_address = torch._C._data_address


def wrap_strided(array: jax.Array, strides) -> torch.Tensor:
    """A new jax tensor owning `array` (logical values, row-major) laid out with `strides`, as PyTorch
    lays out a result (a dense permutation of the dims; anything else is written through `write`).

    The box keeps the logical value: the transpose into storage order is made only if the storage is
    read another way (see Box)."""
    shape = tuple(array.shape)
    strides = tuple(strides)
    if strides == contiguous_strides(shape):
        return wrap(array)
    dtype = dtypes.JAX_TO_TORCH.get(array.dtype) or dtypes.to_torch_dtype(array.dtype)
    perm = dense_permutation(shape, strides) if array.size > 1 else None
    if perm is None or perm == tuple(range(len(shape))):
        if perm is not None:  # row-major up to the strides of size-1 dims: the values are the storage
            return tensor_on_storage(new_storage(Box(array, array.size, dtype)), dtype, shape, strides)
        out = empty(shape, dtype, strides)
        if array.size:
            write(out, array)
        return out
    box = Box(None, array.size, dtype)
    box.logical = (array, shape, strides, perm)
    return tensor_on_storage(new_storage(box), dtype, shape, strides)


@functools.lru_cache(maxsize=4096)
def offset_arg(offset: int) -> jax.Array | None:
    """A view's storage offset as the argument of its read or write program. A Python int passed to a
    jitted program is converted and copied to the device on every call (1.2-1.7 us of a 4-6 us read,
    measured); a device scalar made once per offset is passed as it is. Uncommitted, it follows the
    program's other arguments to their device; made outside any trace, so the cache never holds a tracer.
    Offset 0 (x.t(), an expand, a diagonal, x[:, ::2] of a whole tensor: most views) is None, an empty
    argument that the program reads as a static 0: a device scalar argument costs 0.4-0.8 us of a 4-5 us
    read (measured on a 1024x1024 diagonal), and the program compiled for it is no larger."""
    if offset == 0:
        return None
    with jax.ensure_compile_time_eval():
        return jnp.asarray(offset, jnp.int32 if offset < INT32_OFFSETS else jnp.int64)


@functools.lru_cache(maxsize=4096)
def _gather(shape, strides, target, mode, out_sharding=None):
    recipe = (shape, strides, target, mode)
    return jax.jit(lambda stored, offset: view_value(recipe, stored, offset), out_shardings=out_sharding)


# Static offsets: inside a program being traced (fused eager's step, a compiled graph) a view is read and
# written where it is met, its storage offset a Python int. Passed to a jitted read or write program, the
# offset was a traced scalar there: int64 digit arithmetic (emulated on a TPU) that XLA's TPU compiler
# did not always fold back, so the views of a fused qkv (q, k, v at offsets 0, d, 2d) were dynamic slices
# laid out around by copies. Issue 37's GPT step: 11013 -> 4016 entry instructions, one [192, 8, 16, 256]
# copy a layer gone, 23.76 -> 23.38 M estimated TPU cycles. The values are the same.
def _scattered(shape, strides, target, mode, stored, value, offset):
    flat = flat_as(stored, target)
    offset = wide_enough(offset, flat.shape[0])
    if mode is not None:
        flat = plan_for(shape, strides).write(flat, value, offset, mode)
    else:
        flat = flat.at[strided_index(shape, strides, offset)].set(value)
    return flat_as(flat, stored.dtype).reshape(stored.shape)


@functools.lru_cache(maxsize=4096)
def _scatter(shape, strides, target, mode, donate=False):
    run = functools.partial(_scattered, shape, strides, target, mode)
    return jax.jit(run, donate_argnums=(0,) if donate else ())


@functools.lru_cache(maxsize=4096)
def _reshape(shape):
    return jax.jit(lambda a: a.reshape(shape))


def read(t: torch.Tensor) -> jax.Array:
    """The jax.Array holding the values of jax tensor `t` (exactly its shape and dtype).

    The conjugate and negative bits of lazy `conj()` / `_neg_view()` views are applied here.
    The hot path of every kernel argument: a tensor that is its whole storage, row-major, costs a
    dictionary lookup and five metadata reads (one native call when the native module is in use)."""
    if plain_value is not None:
        array = plain_value(t)
        if array is not None:
            return array
    try:
        box = BOXES[_address(t)]
    except KeyError:
        box = box_of(t)  # raises the right error
    if spans(t, box):
        return box.array
    value = _read_stored(t, box)
    if t.is_conj():
        value = jnp.conj(value)
    if t.is_neg():
        value = -value
    return value


def spans(t: torch.Tensor, box: Box) -> bool:
    """`t` is exactly the array `box` holds: its whole storage, row-major, in the box's dtype and
    shape, with no conj/neg bit (the native module's plain_value tests the same)."""
    return (
        box.logical is None
        and box.array.shape == t.shape  # torch.Size compares as the tuple it is
        and t.dtype is box.dtype
        and not t.storage_offset()
        and t.is_contiguous()
        and not (t.is_conj() or t.is_neg())
    )


def plain_array(t) -> jax.Array | None:
    """The array of `t` when it is a jax tensor that is exactly its box's array (`spans`); else None,
    for anything else too. One native call when the native module is in use."""
    if plain_value is not None:
        return plain_value(t)
    box = BOXES.get(_address(t)) if is_jax(t) else None
    return box.array if box is not None and type(box) is Box and spans(t, box) else None


def _read_stored(t: torch.Tensor, box: Box) -> jax.Array:
    if t.dtype is not box.dtype:  # a dtype view (view_as_complex) into a dtype the platform refuses
        dtypes.to_jax_dtype(t.dtype)
    if t.numel() == 0 and xla_extent_overflows(t.shape):
        raise RuntimeError(
            f"jaxdev: XLA cannot hold an empty array of shape {list(t.shape)} (its sizes multiply past int64)"
        )
    logical = box.logical
    if (
        logical is not None
        and t.dtype is box.dtype
        and t.storage_offset() == 0
        and logical[2] == t.stride()
        and logical[1] == tuple(t.shape)
    ):
        return logical[0]
    if t.dtype is box.dtype and t.storage_offset() == 0 and t.is_contiguous() and t.numel() == box.numel:
        a = box.array
        if a.shape != t.shape:
            a = _reshape(tuple(t.shape))(a)
            if not (SHARDED_ENTRIES and box in SHARDED):  # a sharded box keeps the shape its sharding is for
                box.array = a
        return a
    shape, strides, offset = tuple(t.shape), t.stride(), t.storage_offset()
    recipe = view_recipe(shape, strides, t.dtype, box.numel, box.dtype, offset)
    # A view of a sharded storage arrives sharded along the storage dims it steps (jaxdev/parallel/mesh.py).
    sharding = view_sharding(box, shape, strides) if SHARDED_ENTRIES and box in SHARDED else None
    if sharding is None and tracing.is_traced(box.array):
        return view_value(recipe, box.array, offset)  # in a traced program: its offset static (see _scattered)
    return _gather(*recipe, sharding)(box.array, offset_arg(offset))


def view_reader(t: torch.Tensor):
    """For the native clone (registry.register_clone): `(program, offset)`, the jitted program
    `(stored, offset) -> values` that reads view `t` from its box's array as stored (every view of this
    geometry shares it) and t's offset as its argument (`offset_arg`); or None where `_read_stored` must
    decide (a sharded storage, an empty or overflowing view)."""
    box = BOXES.get(_address(t))
    if box is None or type(box) is not Box or box.logical is not None or t.numel() == 0:
        return None
    if tracing.is_traced(box.array):  # in a traced program _read_stored reads it (see _scattered)
        return None
    if SHARDED_ENTRIES and box in SHARDED:
        return None
    offset = t.storage_offset()
    return _gather(*view_recipe(tuple(t.shape), t.stride(), t.dtype, box.numel, box.dtype, offset)), offset_arg(offset)


@functools.lru_cache(maxsize=8192)
def view_recipe(shape, strides, dtype, box_numel, box_dtype, offset) -> tuple:
    """How a (shape, strides, offset) view of a storage of `box_numel` `box_dtype` elements is read:
    (shape, strides, target dtype, mode), for `view_value`. One cache lookup on the hot path."""
    target = dtypes.to_jax_dtype(dtype)  # complex32 views (view_as_complex of half): UnsupportedDtypeError
    numel = box_numel * box_dtype.itemsize // dtype.itemsize
    count = math.prod(shape)
    return (shape, strides, target, access_mode(plan_for(shape, strides), offset, numel, count, writing=False))


def read_parts(t: torch.Tensor) -> tuple:
    """For a kernel that reads jax tensor `t` inside its own jitted program: (array, offset, recipe).

    recipe None: `array` is t's value. Otherwise t is a strided view (a transpose, a slice, an
    expand...) of the storage held as `array`, starting at `offset` (`offset_arg`: a device scalar, None for 0),
    and `view_value(recipe, array, offset)` inside the kernel's program gives its value, so the view's
    transpose or slice fuses into the kernel (a Linear's `w.t()` into its product) instead of running
    as a program of its own and materialising a copy."""
    if plain_value is not None:
        array = plain_value(t)
        if array is not None:
            return array, None, None
    try:
        box = BOXES[_address(t)]
    except KeyError:
        box = box_of(t)
    if box.logical is not None:
        return read(t), None, None
    array = box.array
    if spans(t, box):
        return array, None, None  # the hot path, as in `read`
    # A contiguous view that is not its whole storage as the box holds it (a narrow, a reshape) is read
    # inside the kernel's program too: read() would make a program of its own for the slice or reshape.
    if t.is_conj() or t.is_neg() or not t.numel() or (SHARDED_ENTRIES and box in SHARDED):
        return read(t), None, None
    offset = t.storage_offset()
    recipe = view_recipe(tuple(t.shape), t.stride(), t.dtype, box.numel, box.dtype, offset)
    if tracing.is_traced(array):  # in a traced program: read here, its offset static (see _scattered)
        return view_value(recipe, array, offset), None, None
    return array, offset_arg(offset), recipe


def write(t: torch.Tensor, value: jax.Array) -> None:
    """Store `value` (t's shape; cast to t's dtype) into t, so that every alias sees it."""
    box = box_of(t)
    jdt = dtypes.to_jax_dtype(t.dtype)
    shape = tuple(t.shape)
    if value.dtype != jdt:
        value = value.astype(jdt)
    if value.shape != shape:
        value = jnp.broadcast_to(value, shape)
    if t.is_neg():
        value = -value
    if t.is_conj():
        value = jnp.conj(value)
    box.writes += 1
    if t.dtype == box.dtype and t.storage_offset() == 0 and t.numel() == box.numel and t.is_contiguous():
        box.array = value
        if SHARDED_ENTRIES:  # a storage placed over a mesh stays so (jaxdev/parallel/mesh.py)
            keep_sharding(box)
        return
    if t.numel() == 0:
        return
    check_no_internal_overlap(t)
    strides, offset = t.stride(), t.storage_offset()
    sharded = bool(SHARDED_ENTRIES) and box in SHARDED
    if t.dtype == box.dtype and offset == 0 and t.numel() == box.numel and not sharded:
        perm = dense_permutation(shape, strides)
        if perm is not None:  # the whole storage, permuted (channels_last): keep the value as computed
            box.array = None
            box.logical = (value, shape, strides, perm)
            return
    numel = box.numel * box.dtype.itemsize // t.dtype.itemsize
    mode = access_mode(plan_for(shape, strides), offset, numel, t.numel(), writing=True)
    if tracing.is_traced(box.array):  # in a traced program: its offset static (see _scattered); no donation
        box.array = _scattered(shape, strides, jdt, mode, box.array, value, offset)
    else:
        box.array = _scatter(shape, strides, jdt, mode, sole_holder(box))(box.array, value, offset_arg(offset))
    if sharded:
        keep_sharding(box)


def sole_holder(box: Box) -> bool:
    """Whether a write into part of `box` may give its array's buffer to the result (XLA donation: the
    write then costs the part written, not a copy of the whole storage; a KV cache's
    `cache[:, pos] = k` is the common case). Only when nothing else can see the buffer: no Python
    reference but the box's own, never exported, not sharded, not inside a trace. A pending computation
    that reads the buffer is fine (the runtime orders the donation after it), and so is a numpy view of
    it (an external reference: the runtime copies instead)."""
    return bool(sole_holders((box,), (0,)))


def sole_holders(boxes, indices) -> tuple:
    """The `indices` whose box in `boxes` is its array's sole holder (sole_holder): the tests written
    once, inline, for a fused flush that asks it of every storage its program overwrites (~230 in a
    training step, where a call per test cost as much as the tests). The array is never held in a
    local: its reference count is read as boxes.references reads it (ONLY_THE_BOX)."""
    getrefcount, exported, traced = sys.getrefcount, EXPORTED, tracing.Tracer
    out = []
    for g in indices:
        box = boxes[g]
        if (
            box.logical is None
            and getrefcount(box._array) == ONLY_THE_BOX
            and not ((ref := exported.get(id(box._array))) is not None and ref() is box._array)
            and not isinstance(box._array, traced)
            and not (SHARDED_ENTRIES and box in SHARDED)
        ):
            out.append(g)
    return tuple(out)
