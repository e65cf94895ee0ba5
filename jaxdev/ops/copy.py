"""Moving values: copy_ in both directions, item(), and the copy helpers PyTorch calls."""

from __future__ import annotations

import warnings

import jax.numpy as jnp
import numpy as np
import torch

from jaxdev import dtypes, tensor
from jaxdev.ops.registry import aten, register
from jaxdev.tensor import is_jax


def _cast(value, dtype: torch.dtype):
    jdt = dtypes.to_jax_dtype(dtype)
    if value.dtype == jdt:
        return value
    if jnp.issubdtype(value.dtype, jnp.complexfloating) and not dtype.is_complex:
        warnings.warn(
            "Casting complex values to real discards the imaginary part", UserWarning, stacklevel=3
        )
        value = value.real
    return value.astype(jdt)


def copy_into(dst: torch.Tensor, src: torch.Tensor) -> torch.Tensor:
    if is_jax(dst):
        value = tensor.read(src) if is_jax(src) else tensor.from_cpu(src)
        shape = tuple(dst.shape)
        try:
            value = jnp.broadcast_to(value, shape)
        except ValueError:
            raise RuntimeError(
                f"The size of tensor a ({list(dst.shape)}) must match the size of tensor b "
                f"({list(src.shape)}) for copy_"
            ) from None
        tensor.write(dst, _cast(value, dst.dtype))
        return dst
    # jax -> CPU (or another device): bring the values to CPU, then use that device's copy_.
    dst.copy_(tensor.to_cpu(tensor.read(src), src.dtype))
    return dst


@register(aten.copy_.default)
def copy_(self, src, non_blocking=False):
    return copy_into(self, src)


@register(aten._copy_from.default)
def _copy_from(self, dst, non_blocking=False):
    return copy_into(dst, self)


@register(aten._copy_from_and_resize.default)
def _copy_from_and_resize(self, dst):
    if tuple(dst.shape) != tuple(self.shape):
        dst.resize_(self.shape)
    return copy_into(dst, self)


@register(aten.clone.default)
def clone(self, *, memory_format=torch.preserve_format):
    value = tensor.read(self)
    if memory_format == torch.preserve_format and not self.is_contiguous() and _dense(self):
        # PyTorch keeps the strides of a dense, non-overlapping tensor (a transpose stays one).
        out = tensor.empty(self.shape, self.dtype, self.stride())
        tensor.write(out, value)
        return out
    if memory_format not in (torch.preserve_format, torch.contiguous_format):
        out = tensor.empty(self.shape, self.dtype, torch.empty(self.shape, device="meta", memory_format=memory_format).stride())
        tensor.write(out, value)
        return out
    return tensor.wrap(value)


def _dense(t: torch.Tensor) -> bool:
    """Non-overlapping and dense: some permutation of the dims is contiguous."""
    dims = sorted((s, n) for n, s in zip(t.shape, t.stride()) if n != 1)
    expected = 1
    for s, n in dims:
        if s != expected:
            return False
        expected *= n
    return True


@register(aten._local_scalar_dense.default)
def _local_scalar_dense(self):
    return np.asarray(tensor.read(self)).item()
