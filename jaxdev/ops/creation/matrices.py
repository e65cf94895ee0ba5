"""eye and tril/triu_indices."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import torch

from jaxdev import dtypes, tensor
from jaxdev.ops.creation.fills import check_device
from jaxdev.ops.registry import aten, register, store_into


def _triangle_indices(name, row, col, offset, dtype, below):
    if row < 0:
        raise RuntimeError(f"row must be non-negative, got{row}")
    if col < 0:
        raise RuntimeError(f"col must be non-negative, got{col}")
    if dtype not in (torch.int32, torch.int64):
        raise NotImplementedError(f"\"{name}\" not implemented for '{dtypes.scalar_name(dtype)}'")
    # static sizes: the pairs are a host-side constant, in row-major order as CPU lists them
    i, j = np.indices((row, col)).reshape(2, -1)
    keep = (j - i <= offset) if below else (j - i >= offset)
    return jnp.asarray(np.stack([i[keep], j[keep]]), dtypes.to_jax_dtype(dtype))


@register(aten.tril_indices.default)
def tril_indices(row, col, offset=0, *, dtype=torch.int64, layout=None, device=None, pin_memory=None):
    check_device(device)
    return tensor.wrap(_triangle_indices("tril_indices", row, col, offset, dtype or torch.int64, True))


@register(aten.triu_indices.default)
def triu_indices(row, col, offset=0, *, dtype=torch.int64, layout=None, device=None, pin_memory=None):
    check_device(device)
    return tensor.wrap(_triangle_indices("triu_indices", row, col, offset, dtype or torch.int64, False))


@register(aten.eye.m_out)
def eye_out(n, m, *, out):
    if n < 0 or m < 0:
        raise RuntimeError(f"n must be greater or equal to 0, got {min(n, m)}")
    if tuple(out.shape) != (n, m):
        out.resize_((n, m))  # first, as CPU: a size no memory holds fails here
    if n == 0 or m == 0:  # nothing to write (and XLA aborts on a shape like [2**62, 0])
        return out
    return store_into(out, jnp.eye(n, m, dtype=dtypes.to_jax_dtype(out.dtype)), resize=True)


@register(aten.eye.out)
def eye_square_out(n, *, out):
    return eye_out(n, n, out=out)
