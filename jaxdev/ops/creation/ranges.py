"""arange: its size and values as CPU computes them."""

from __future__ import annotations

import math
import warnings

import jax
import jax.numpy as jnp
import torch

from jaxdev import dtypes, tensor
from jaxdev.ops.creation.fills import composite, elsewhere
from jaxdev.ops.kit import jitted
from jaxdev.ops.kit.cpu_numerics import narrowed
from jaxdev.ops.registry import aten, register, store_into


def _c_double(x: float) -> str:
    """A double as C++ streams print it (as in PyTorch's messages)."""
    return f"{x:g}"


def _wrap_int64(x: int) -> int:
    return (x + 2**63) % 2**64 - 2**63


def _arange_size(start, end, step, dtype: torch.dtype) -> int:
    """PyTorch's compute_arange_size (RangeUtils.h): its checks, in its order, and its size."""
    if dtype.is_complex or dtype == torch.bool:
        raise NotImplementedError(f"\"arange_cpu\" not implemented for '{dtypes.scalar_name(dtype)}'")
    dstart, dend, dstep = (_to_double(v) for v in (start, end, step))
    if not (dstep > 0 or dstep < 0):
        raise RuntimeError("step must be nonzero")
    if not (math.isfinite(dstart) and math.isfinite(dend)):
        raise RuntimeError(f"unsupported range: {_c_double(dstart)} -> {_c_double(dend)}")
    if not ((dstep > 0 and dend >= dstart) or (dstep < 0 and dend <= dstart)):
        raise RuntimeError("upper bound and lower bound inconsistent with step sign")
    if not dtype.is_floating_point:  # integral outputs take the scalars as int64 (acc_type), checked
        xstart, xend, xstep = (_to_int64(v) for v in (start, end, step))
    if dtype == torch.int64:  # in int64 arithmetic (C++: truncating division, wrapping overflow)
        if xstep == 0:  # a fractional step truncated to 0
            raise ValueError("step must be nonzero")
        sgn = (xstep > 0) - (xstep < 0)
        num = _wrap_int64(_wrap_int64(_wrap_int64(xend - xstart) + xstep) - sgn)
        q = abs(num) // abs(xstep)
        size_d = float(q if (num >= 0) == (xstep > 0) else -q)
    else:
        try:
            size_d = math.ceil((dend - dstart) / dstep)
        except (OverflowError, ValueError):  # an infinite step: (end - start) / step is 0 or nan
            size_d = math.nan
        else:
            size_d = float(size_d)
    if not (size_d >= 0 and size_d <= float(2**63 - 1)):
        raise RuntimeError("invalid size, possible overflow?")
    return int(size_d)


def _to_double(v) -> float:
    if isinstance(v, complex):
        if v.imag != 0:
            raise RuntimeError("value cannot be converted to type double without overflow")
        v = v.real
    return float(v)


def _to_int64(v) -> int:
    dtypes.check_scalar(v, torch.int64)
    return int(v.real if isinstance(v, complex) else v)


@register(aten.arange.start_out)
def arange_out(start, end, step=1, *, out):
    start, end, step = (s.item() if isinstance(s, torch.Tensor) else s for s in (start, end, step))
    n = _arange_size(start, end, step, out.dtype)
    if out.numel() != n:
        if out.numel() > 0:  # CPU's own warning, not the generic one of a resized out=
            warnings.warn(
                f"The number of elements in the out tensor of shape {list(out.shape)} is {out.numel()} which does "
                f"not match the computed number of elements {n}. Note that this may occur as a result of "
                f"rounding error. The out tensor will be resized to a tensor of shape ({n},).",
                UserWarning,
                stacklevel=2,
            )
        out.resize_((n,))  # first, as CPU: a size no memory holds fails here, with the allocator's error
    # an out of n elements keeps its shape and strides and takes the values in its row-major order
    return store_into(out, _arange_values(n, start, step, out.dtype).reshape(tuple(out.shape)), resize=True)


def _arange_values(n: int, start, step, dtype: torch.dtype) -> jax.Array:
    """start + i * step for i < n, in double for a floating result, else in int64 from the truncated
    scalars (arange(0, 5, 0.5, dtype=int32) is 10 zeros), rounded to `dtype`: one jitted program."""
    if dtype.is_floating_point:
        acc = jnp.float64
    else:
        acc, start, step = jnp.int64, _to_int64(start), _to_int64(step)
    return _ramp(n, jnp.dtype(acc), dtypes.to_jax_dtype(dtype))(start, step)


@jitted
def _ramp(n, acc, jdt):
    return lambda start, step: narrowed(jnp.arange(n, dtype=acc) * step + start, jdt)  # double -> half via float


_ONE_PROGRAM_BYTES = 1 << 30


def _arange_end(end, *, dtype=None, layout=None, device=None, pin_memory=None):
    return arange_start_step(0, end, 1, dtype=dtype, layout=layout, device=device, pin_memory=pin_memory)


def _arange_start(start, end, *, dtype=None, layout=None, device=None, pin_memory=None):
    return arange_start_step(start, end, 1, dtype=dtype, layout=layout, device=device, pin_memory=pin_memory)


@register(aten.arange.start_step)
def arange_start_step(start, end, step=1, *, dtype=None, layout=None, device=None, pin_memory=None):
    """arange's values in one program, where the composite made an empty tensor, grew it (resize_) and
    wrote arange.out's values into it: torch.arange(8, device="jax") 230 -> 10 us. Without a dtype the
    result is int64 when start, end and step are all integral (bool too), else the default dtype."""
    if dtype is None:
        integral = all(isinstance(v, (bool, int)) for v in (start, end, step))
        chosen = torch.int64 if integral else torch.get_default_dtype()
    else:
        chosen = dtype
    kwargs = dict(dtype=dtype, layout=layout, device=device, pin_memory=pin_memory)
    if chosen.is_complex or chosen == torch.bool or elsewhere(layout, device, pin_memory):
        return composite(aten.arange.start_step, start, end, step, **kwargs)
    n = _arange_size(start, end, step, chosen)
    if n * chosen.itemsize > _ONE_PROGRAM_BYTES:
        # past a GiB the composite's order holds: resize_ checks the byte count (CPU's "Storage size
        # calculation overflowed"), then allocates, and an allocation that fails raises there and then
        return composite(aten.arange.start_step, start, end, step, **kwargs)
    if n == 0:
        return tensor.empty((0,), chosen)
    with tensor.out_of_memory_as_torch():
        return tensor.wrap(_arange_values(n, start, step, chosen))


# arange(end) and arange(start, end) call the start_step composite directly (native::arange), not
# through the dispatcher: each needs the kernel too.
register(aten.arange.default)(_arange_end)
register(aten.arange.start)(_arange_start)
