"""Ops that move elements without changing them: flip and roll (also what cumsum's backward and
fft.fftshift reach), channel_shuffle, repeat."""

from __future__ import annotations

import math

import jax.numpy as jnp

from jaxdev import tensor
from jaxdev.ops.kit import J, jitted, wrap_dim
from jaxdev.ops.registry import aten, register, register_functional


@jitted
def _flip(axes):
    return lambda x: jnp.flip(x, axes) if axes else x


@register_functional(aten.flip.default)
def flip(self, dims):
    axes = []
    for d in dims:  # dim_list_to_bitset: each dim wrapped, then checked against those before it
        a = wrap_dim(d, self.dim())
        if a in axes:
            raise RuntimeError(f"dim {a} appears multiple times in the list of dims")
        axes.append(a)
    axes = tuple(axes)
    return _flip(axes if self.dim() else ())(J(self))


@jitted
def _roll(shifts, axes):
    if axes:
        return lambda x: jnp.roll(x, shifts, axes)
    return lambda x: jnp.roll(x.reshape(-1), shifts[0]).reshape(x.shape)


def _wrap_roll_dim(d: int, ndim: int) -> int:
    """maybe_wrap_dim without wrap_scalar: a 0-dim tensor has no dim to roll along."""
    if ndim == 0:
        raise IndexError(f"Dimension specified as {d} but tensor has no dimensions")
    return wrap_dim(d, ndim)


@register_functional(aten.roll.default)
def roll(self, shifts, dims=()):
    shifts, dims = tuple(shifts), tuple(dims)
    if not dims and len(shifts) != 1:
        raise RuntimeError(f"`shifts` required to be a 1-element tuple when `dims` is not given, got {len(shifts)}")
    if dims and len(shifts) != len(dims):
        raise RuntimeError(f"shifts and dimensions must align. shifts: {len(shifts)}, dims:{len(dims)}")
    axes = tuple(_wrap_roll_dim(d, self.dim()) for d in dims)
    if self.numel() == 0:
        return J(self)
    return _roll(shifts, axes)(J(self))


@jitted
def _channel_shuffle(groups):
    def run(x):
        n, c, *rest = x.shape
        x = x.reshape(n, groups, c // groups, *rest)
        return jnp.swapaxes(x, 1, 2).reshape(n, c, *rest)

    return run


@register_functional(aten.channel_shuffle.default)
def channel_shuffle(self, groups):
    if self.dim() <= 2:
        raise RuntimeError(f"channel_shuffle expects input with > 2 dims, but got input with sizes {list(self.shape)}")
    if groups <= 0:
        raise RuntimeError(f"Number of groups to divide channels in must be positive. Value of groups:{groups}")
    if self.shape[1] % groups:
        raise RuntimeError(
            f"Number of channels must be divisible by groups. Got {self.shape[1]} channels and {groups} groups."
        )
    return _channel_shuffle(int(groups))(J(self))


@register(aten.repeat.default)  # repeat.out: PyTorch's generated kernel around this one
def repeat(self, repeats):
    """`x.repeat(*sizes)` as one tile (CPU's composite: an empty result, a strided view of it and a copy
    into that view, ~40 us as jax programs)."""
    repeats = tuple(int(r) for r in repeats)
    if len(repeats) < self.dim():
        raise RuntimeError("Number of dimensions of repeat dims can not be smaller than number of dimensions of tensor")
    padded = (1,) * (len(repeats) - self.dim()) + tuple(self.shape)
    target = [n * r for n, r in zip(padded, repeats)]
    negative = [n for n in target if n < 0]
    if negative:
        raise RuntimeError(f"Trying to create tensor with negative dimension {negative[0]}: {target}")
    if math.prod(target) == 0:  # nothing to compute, and XLA aborts on a shape like [2**62, 3, 0]
        return tensor.empty(target, self.dtype)
    return tensor.wrap(_tiled(padded, repeats)(J(self)))


@jitted
def _tiled(padded, repeats):
    return lambda x: jnp.tile(x.reshape(padded), repeats)
