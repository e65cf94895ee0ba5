"""Factories: empty, empty_strided, fill_, zero_, arange, linspace, eye.

Composite factories (zeros, ones, full, *_like, scalar_tensor, tensor) reach these through
PyTorch's own CompositeExplicitAutograd kernels (empty + fill_, empty + arange.out, ...).
"""

from __future__ import annotations

import math

import jax.numpy as jnp
import torch

from jaxdev import device as jax_device_module
from jaxdev import dtypes, tensor
from jaxdev.ops.registry import aten, register, store_into
from jaxdev.ops.toolkit import J, jitted


def _check_device(device) -> None:
    if device is not None:
        device = torch.device(device)
        if device.index is not None:
            jax_device_module._check_index(device.index)


@register(aten.empty.memory_format)
def empty(size, *, dtype=None, layout=None, device=None, pin_memory=None, memory_format=None):
    _check_device(device)
    return tensor.empty(size, dtype or torch.get_default_dtype(), tensor.strides_for(size, memory_format))


@register(aten.empty_strided.default)
def empty_strided(size, stride, *, dtype=None, layout=None, device=None, pin_memory=None):
    _check_device(device)
    return tensor.empty(size, dtype or torch.get_default_dtype(), stride)


@register(aten._efficientzerotensor.default)
def efficient_zero_tensor(size, *, dtype=None, layout=None, device=None, pin_memory=None):
    """A plain zero-filled tensor: the values of PyTorch's lazy ZeroTensor, materialised."""
    _check_device(device)
    return tensor.empty(size, dtype or torch.get_default_dtype())


def _fill_value(self, value):
    jdt = dtypes.to_jax_dtype(self.dtype)
    if isinstance(value, torch.Tensor):
        if value.dim() != 0:
            raise RuntimeError(
                f"fill_ only supports 0-dimension value tensor but got tensor with {value.dim()} dimensions."
            )
        return jnp.broadcast_to(J(value).astype(jdt), tuple(self.shape))
    if isinstance(value, int) and not -(2**63) <= value < 2**63:  # beyond a jit argument's int64
        return jnp.full(tuple(self.shape), value, dtype=jdt)
    return _full(tuple(self.shape), jdt)(value)


@jitted
def _full(shape, jdt):
    """Filling is the first op of every factory (ones, full, *_like): one cached jitted call each."""
    return lambda value: jnp.full(shape, value, dtype=jdt)


@register(aten.fill_.Scalar, aten.fill_.Tensor)
def fill_(self, value):
    tensor.write(self, _fill_value(self, value))
    return self


@register(aten.zero_.default)
def zero_(self):
    tensor.write(self, tensor.zeros(self.numel(), dtypes.to_jax_dtype(self.dtype)).reshape(tuple(self.shape)))
    return self


@register(aten.arange.start_out)
def arange_out(start, end, step=1, *, out):
    start, end, step = (s.item() if isinstance(s, torch.Tensor) else s for s in (start, end, step))
    if step == 0:
        raise RuntimeError("step must be nonzero")
    if (step > 0 and start > end) or (step < 0 and start < end):
        raise RuntimeError("upper bound and larger bound inconsistent with step sign")
    n = math.ceil((end - start) / step)
    acc = (
        jnp.float64 if out.dtype.is_floating_point or isinstance(step, float) or isinstance(start, float) else jnp.int64
    )
    values = (jnp.arange(n, dtype=acc) * step + start).astype(dtypes.to_jax_dtype(out.dtype))
    return store_into(out, values, resize=True)


@register(aten.linspace.out)
def linspace_out(start, end, steps, *, out):
    """PyTorch's scalar formula (the one its CUDA kernel uses): start + i*step for the first half,
    end - (steps-1-i)*step for the second, in the output's precision; integer outputs truncate
    start and end first and step in double. (CPU's vectorised loop rounds differently, within
    float tolerance.)"""
    start, end = (s.item() if isinstance(s, torch.Tensor) else s for s in (start, end))
    if steps < 0:
        raise RuntimeError("number of steps must be non-negative")
    jdt = dtypes.to_jax_dtype(out.dtype)
    if out.dtype.is_complex or out.dtype.is_floating_point:
        acc = jdt  # each step rounds in the output dtype, as with c10::Half / BFloat16 scalars
    else:
        start, end, acc = (
            int(start.real if isinstance(start, complex) else start),
            int(end.real if isinstance(end, complex) else end),
            jnp.float64,
        )
    if steps == 1:
        values = jnp.full((1,), start, acc)
    else:
        lo, hi = jnp.asarray(start, acc), jnp.asarray(end, acc)
        step = (hi - lo) / (steps - 1)
        i = jnp.arange(steps)
        values = jnp.where(i < steps // 2, lo + step * i, hi - step * (steps - 1 - i))
    return store_into(out, values.astype(jdt), resize=True)


@register(aten.eye.m_out)
def eye_out(n, m, *, out):
    if n < 0 or m < 0:
        raise RuntimeError(f"n must be greater or equal to 0, got {min(n, m)}")
    return store_into(out, jnp.eye(n, m, dtype=dtypes.to_jax_dtype(out.dtype)), resize=True)


@register(aten.eye.out)
def eye_square_out(n, *, out):
    return eye_out(n, n, out=out)


# Quantized dtypes dispatch to the QuantizedPrivateUse1 key; give them a clear error there.
_QUANTIZED = torch.library.Library("aten", "IMPL")


def _refuse_quantized(*args, **kwargs):
    dtype = kwargs.get("dtype")
    raise dtypes.UnsupportedDtypeError(f"dtype {dtype} is not supported on device 'jax': JAX has no quantized types")


for _op in (
    aten.empty.memory_format,
    aten.empty_strided.default,
    aten._empty_affine_quantized.default,
    aten.empty_quantized.default,
):
    _QUANTIZED.impl(_op, _refuse_quantized, "QuantizedPrivateUse1")
