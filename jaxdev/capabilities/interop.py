"""Between jax tensors and the jax.Arrays that hold their values, without copies."""

from __future__ import annotations

import jax
import torch

from jaxdev import tensor


def to_jax(t: torch.Tensor) -> jax.Array:
    """The jax.Array holding a jax tensor's values (no copy when the tensor spans its storage)."""
    if not tensor.is_jax(t):
        raise TypeError(f"to_jax expects a tensor on the jax device, got one on {t.device}")
    return tensor.export(tensor.read(t))


def from_jax(array) -> torch.Tensor:
    """A jax tensor that owns `array` (no copy)."""
    if not isinstance(array, jax.Array):
        raise TypeError(f"from_jax expects a jax.Array, got {type(array).__name__}")
    return tensor.wrap(tensor.export(array))
