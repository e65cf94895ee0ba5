"""How a strided view of a flat storage is reached inside a program: the plans that read and write it
as slices (`Plan`, `access_mode`), the index gather/scatter for the rest, and the byte-level
reinterpretation of stored elements (view(dtype), view_as_real, untyped storages). Everything here is
traceable and holds no state but its caches; `strided.py` runs it on boxes."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import torch

from jaxdev import dtypes


@functools.lru_cache(maxsize=1024)
def transpose_program(perm):
    """The jitted transpose of an array by `perm` (a box's logical value into storage order)."""
    return jax.jit(lambda a: jnp.transpose(a, perm))


def dense_permutation(shape, strides) -> tuple[int, ...] | None:
    """The dim order (outermost first) in which `strides` lay `shape` out densely, None if they do not.

    Size-1 dims reach no other element: their strides are free (they go innermost)."""
    order = sorted(range(len(shape)), key=lambda d: (shape[d] == 1, -strides[d], d))
    expected = 1
    for d in reversed(order):
        if shape[d] != 1:
            if strides[d] != expected:
                return None
            expected *= shape[d]
    return tuple(order)


def strided_index(shape, strides, offset):
    idx = offset
    for d, (n, s) in enumerate(zip(shape, strides)):
        axis = [1] * len(shape)
        axis[d] = n
        idx = idx + (jnp.arange(n, dtype=jnp.int64) * s).reshape(axis)
    return jnp.broadcast_to(idx, shape)


def to_bytes(flat: jax.Array) -> jax.Array:
    if flat.dtype == jnp.bool_:
        return flat.astype(jnp.uint8)
    if jnp.issubdtype(flat.dtype, jnp.complexfloating):
        flat = jnp.stack([flat.real, flat.imag], axis=-1).reshape(-1)
    if flat.dtype.itemsize == 1:
        return jax.lax.bitcast_convert_type(flat, jnp.uint8)
    return jax.lax.bitcast_convert_type(flat, jnp.uint8).reshape(-1)


def from_bytes(raw: jax.Array, target) -> jax.Array:
    if target == jnp.bool_:
        return raw != 0
    if jnp.issubdtype(target, jnp.complexfloating):
        part = jnp.finfo(target).dtype
        pairs = from_bytes(raw, part).reshape(-1, 2)
        return jax.lax.complex(pairs[:, 0], pairs[:, 1])
    if target.itemsize == 1:
        return jax.lax.bitcast_convert_type(raw, target)
    return jax.lax.bitcast_convert_type(raw.reshape(-1, target.itemsize), target)


def flat_as(stored: jax.Array, target) -> jax.Array:
    """The stored elements, flat, reinterpreted as `target` (for view(dtype), view_as_real)."""
    flat = stored.reshape(-1)
    return flat if flat.dtype == target else from_bytes(to_bytes(flat), target)


def bitcast_flat(flat: jax.Array, dtype: torch.dtype) -> jax.Array:
    return flat_as(flat, dtypes.to_jax_dtype(dtype))


# --- structured views -------------------------------------------------------------------------
#
# Most views a program reads are a permutation, a strided slice, a broadcast (stride 0), a diagonal,
# or a flattening of those. Their elements are
#     offset + i_0 * s_0 + ... + i_k * s_k       (dims of size > 1 and stride > 0, strides descending)
# and when each stride is a multiple of the next and the dims do not overlap (s_d >= n_{d+1} s_{d+1}),
# the block of L = n_0 * s_0 elements that starts at `offset`, reshaped to
#     (n_0, s_0 / s_1, s_1 / s_2, ..., s_{k-1} / s_k, s_k),
# holds element (i_0, ..., i_k) at index (i_0, i_1, ..., i_k, 0). So a read is a slice of the flat
# storage, a reshape, a slice of leading parts of each axis, then a transpose into the view's dim
# order and a broadcast over its stride-0 dims; a write is the same slices as update_slices. XLA
# sees transposes and slices it can fuse, where an index gather would hide them. The storage is padded
# when the block runs past its end (a diagonal's last row). Anything else (overlapping windows,
# strides that do not divide) keeps the general gather/scatter through an index array.
#
# Better still (GRID), when s_0 divides the storage's length and the offset's digits in the radices
# (L / s_0, s_0 / s_1, ..., s_k) leave room for the view on every axis (no carry: x[:, 1:],
# cache[:, :, pos]): the whole storage reshaped to those axes holds the view as one dynamic slice at
# those digits. A read slices exactly the view, with no padded copy; a write is one
# dynamic_update_slice of exactly the view's elements into the storage's buffer when it is donated
# (see strided.sole_holder), where a block write copied the storage twice (`x[:, 1:] = r` of 1024x1024:
# 550 -> 95 us). XLA's CPU backend still plans a copy around a reshaped donated buffer, so a write
# into a sparse view (a KV cache's position) scatters instead (see _mode).


class Plan:
    """How to reach a (shape, strides) view as slices of the flat storage."""

    __slots__ = ("block", "keep", "parts", "perm", "shape", "squeezed", "steps")

    def __init__(self, shape, strides):
        dims = sorted(((s, n, d) for d, (n, s) in enumerate(zip(shape, strides)) if n > 1 and s != 0), reverse=True)
        self.shape = tuple(shape)
        self.squeezed = tuple(n if (n > 1 and s != 0) else 1 for n, s in zip(shape, strides))
        if not dims:
            self.block, self.parts, self.keep, self.perm, self.steps = 1, (1,), (1,), (), (1,)
            return
        self.block = dims[0][1] * dims[0][0]
        self.parts = (dims[0][1],) + tuple(hi[0] // lo[0] for hi, lo in zip(dims, dims[1:])) + (dims[-1][0],)
        self.keep = tuple(n for _, n, _ in dims) + (1,)
        self.steps = tuple(s for s, _, _ in dims) + (1,)  # elements per index of each axis of `parts`
        # The block's kept axes come in stride order; `perm` puts them back in the view's dim order.
        order = [d for _, _, d in dims]
        self.perm = tuple(sorted(range(len(order)), key=lambda i: order[i]))

    @staticmethod
    def fits(shape, strides) -> bool:
        dims = sorted(((s, n) for n, s in zip(shape, strides) if n > 1 and s != 0), reverse=True)
        return all(s_hi % s_lo == 0 and s_hi >= n_lo * s_lo for (s_hi, _), (s_lo, n_lo) in zip(dims, dims[1:]))

    def covers(self) -> bool:
        """The view holds every element of its block (a permutation of a whole storage)."""
        return self.keep[:-1] == self.parts[:-1] and self.parts[-1] == 1

    def grid(self, numel: int) -> tuple[int, ...]:
        """The axes a storage of `numel` elements is reshaped to in GRID mode."""
        return (numel // self.steps[0],) + self.parts[1:]

    def starts(self, offset, numel: int) -> tuple:
        """The offset's digits on the grid's axes (host ints, or traced values inside a program)."""
        grid = self.grid(numel)
        return (offset // self.steps[0],) + tuple(offset // s % n for s, n in zip(self.steps[1:], grid[1:]))

    def on_grid(self, offset: int, numel: int) -> bool:
        """Whether the view is one slice of the storage reshaped to `grid` (GRID mode)."""
        if numel % self.steps[0]:
            return False
        return all(st + n <= g for st, n, g in zip(self.starts(offset, numel), self.keep, self.grid(numel)))

    def _block(self, flat, offset, mode):
        if mode == WHOLE:  # the block is the storage: no slice to take
            return flat, flat.reshape(self.parts)
        if mode == GRID:  # exactly the view's elements, in `keep`'s shape
            numel = flat.shape[0]
            return flat, _slice(flat.reshape(self.grid(numel)), self.starts(offset, numel), self.keep)
        if mode == PADDED:
            flat = jnp.pad(flat, (0, self.block))
        return flat, _slice(flat, (offset,), (self.block,)).reshape(self.parts)

    def read(self, flat, offset, mode):
        _, block = self._block(flat, offset, mode)
        kept = block[tuple(slice(0, n) for n in self.keep[:-1]) + (0,)]
        if self.perm:
            kept = jnp.transpose(kept, self.perm)
        return jnp.broadcast_to(kept.reshape(self.squeezed), self.shape)

    def write(self, flat, value, offset, mode):
        numel = flat.shape[0]
        kept = value.reshape(tuple(n for n in self.squeezed if n > 1))
        if self.perm:
            kept = jnp.transpose(kept, sorted(range(len(self.perm)), key=lambda i: self.perm[i]))
        kept = kept.reshape(self.keep)
        if mode == WHOLE and self.covers():  # every element is written: nothing old to keep
            return kept.reshape(-1)
        if mode == GRID:  # in place, when the storage's buffer is donated
            grid = flat.reshape(self.grid(numel))
            return jax.lax.dynamic_update_slice(grid, kept, self.starts(offset, numel)).reshape(-1)
        padded, block = self._block(flat, offset, mode)
        block = jax.lax.dynamic_update_slice(block, kept, (0,) * len(self.parts))
        if mode == WHOLE:
            return block.reshape(-1)
        padded = jax.lax.dynamic_update_slice(padded, block.reshape(-1), (offset,))
        return padded[:numel] if mode == PADDED else padded


def _slice(a, starts, sizes):
    """`sizes` of `a` from `starts`: a static slice where the starts are Python ints (a view read inside
    a traced program, see strided._scattered), so XLA lays it out as the slice it is."""
    if all(type(s) is int for s in starts):
        # clamped into the array as dynamic_slice clamps (an empty view's block may reach past the end:
        # pad's circular copy of a [0, 3, 3] tensor)
        starts = tuple(min(max(s, 0), d - n) for s, d, n in zip(starts, a.shape, sizes))
        return jax.lax.slice(a, starts, tuple(s + n for s, n in zip(starts, sizes)))
    return jax.lax.dynamic_slice(a, starts, sizes)


@functools.lru_cache(maxsize=8192)
def plan_for(shape, strides) -> Plan | None:
    return Plan(shape, strides) if Plan.fits(shape, strides) else None


WHOLE, GRID, SLICED, PADDED = "whole", "grid", "sliced", "padded"


def access_mode(plan: Plan | None, offset: int, numel: int, count: int, writing: bool) -> str | None:
    """How a view of `count` elements at `offset` in `numel` is reached: None for the index
    gather/scatter, else WHOLE (its block is the storage), GRID (one slice of the storage reshaped),
    SLICED or PADDED (the block runs past the end). A write into a sparse view (under half its block:
    a diagonal, a KV cache's position) scatters: updating the block would rewrite every element of it,
    and a donated scatter touches only the view (measured on a 32 MiB cache: 17 us, against 31 us for
    the donated dynamic_update_slice, for which XLA's CPU backend still plans a copy)."""
    if plan is None or (writing and 2 * count < plan.block):
        return None
    if offset == 0 and plan.block == numel:
        return WHOLE
    if plan.on_grid(offset, numel):
        return GRID
    return PADDED if offset + plan.block > numel else SLICED


# view_value runs jitted on the box's array as stored (any shape; strided.py's read programs and
# kernels that read views in their own programs), so no eager reshape or bitcast happens on the way.
# The offset is traced: slices at different offsets (x[0], x[1], ...) share one compiled program per
# (shape, strides, dtype, mode).
def view_value(recipe, stored: jax.Array, offset) -> jax.Array:
    """Traceable: the values of the view `recipe` = (shape, strides, target dtype, mode) of a storage
    held as `stored`, starting at element `offset`."""
    shape, strides, target, mode = recipe
    flat = flat_as(stored, target)
    offset = wide_enough(offset, flat.shape[0])
    if mode is not None:
        return plan_for(shape, strides).read(flat, offset, mode)
    return flat[strided_index(shape, strides, offset)]


# An eager program's offset argument (strided.offset_arg) is an int32 below this, int64 from it: int64
# arithmetic is emulated on a TPU, and the offset's digits (Plan.starts' divisions and remainders) in
# int64 made a per-op attention over the LM's q, k, v views (the fused qkv's slices) compile for 9 s
# where int32's take 0.55 s (benchmarks/tpu_cold_step.py). Integer arithmetic: the same values.
INT32_OFFSETS = 2**31


def wide_enough(offset, numel: int):
    """`offset` (None: a static 0; a Python int in a traced program; else a traced int32 or int64 scalar)
    in a dtype that holds every index of a flat storage of `numel` elements: an int32 offset of a storage
    past int32's range is widened, so its digits' arithmetic (with constants up to `numel`) cannot
    overflow."""
    if offset is None:
        return 0
    if numel >= INT32_OFFSETS and getattr(offset, "dtype", None) == jnp.int32:
        return offset.astype(jnp.int64)
    return offset
