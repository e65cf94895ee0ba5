"""Ops that move elements without changing them: flip and roll (also what cumsum's backward and
fft.fftshift reach)."""

from __future__ import annotations

import jax.numpy as jnp

from jaxdev.ops.registry import aten, register_functional
from jaxdev.ops.toolkit import J, jitted, wrap_dim


@jitted
def _flip(axes):
    return lambda x: jnp.flip(x, axes) if axes else x


@register_functional(aten.flip.default)
def flip(self, dims):
    axes = tuple(wrap_dim(d, self.dim()) for d in dims)
    if len(set(axes)) != len(axes):
        raise RuntimeError(
            f"dims has duplicates, original flip dims size={len(axes)}, but unique flip dims size={len(set(axes))}"
        )
    return _flip(axes if self.dim() else ())(J(self))


@jitted
def _roll(shifts, axes):
    if axes:
        return lambda x: jnp.roll(x, shifts, axes)
    return lambda x: jnp.roll(x.reshape(-1), shifts[0]).reshape(x.shape)


@register_functional(aten.roll.default)
def roll(self, shifts, dims=()):
    shifts, dims = tuple(shifts), tuple(dims)
    if not dims and len(shifts) != 1:
        raise RuntimeError(f"`shifts` required to be a 1-element tuple when `dims` is not given, got {len(shifts)}")
    if dims and len(shifts) != len(dims):
        raise RuntimeError(f"shifts and dimensions must align. shifts: {len(shifts)}, dims:{len(dims)}")
    axes = tuple(wrap_dim(d, self.dim()) for d in dims)
    if self.numel() == 0:
        return J(self)
    return _roll(shifts, axes)(J(self))
