"""Factories: empty, empty_strided, fill_, zero_, arange, linspace, logspace, eye, tril/triu_indices.

Composite factories (zeros, ones, full, *_like, scalar_tensor, tensor) reach these through
PyTorch's own CompositeExplicitAutograd kernels (empty + fill_, empty + arange.out, ...).
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import torch

from jaxdev import device as jax_device_module
from jaxdev import dtypes, tensor, tracing
from jaxdev.ops.registry import aten, register, store_into
from jaxdev.ops.toolkit import J, each_location_once, jitted


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
    if isinstance(value, torch.Tensor):
        if value.dim() != 0:
            raise RuntimeError(
                f"fill_ only supports 0-dimension value tensor but got tensor with {value.dim()} dimensions."
            )
        return jnp.broadcast_to(J(value).astype(dtypes.to_jax_dtype(self.dtype)), tuple(self.shape))
    return _filled(tuple(self.shape), self.dtype, value)


def _filled(shape: tuple, dtype: torch.dtype, value) -> jax.Array:
    """`shape` of `value` in `dtype`, after fill_'s check that the number fits the dtype."""
    jdt = dtypes.to_jax_dtype(dtype)
    dtypes.check_scalar(value, dtype)
    if dtype == torch.bool:
        value = bool(value)  # a complex number is true when either part is (1j: True)
    with tensor.out_of_memory_as_torch():
        if isinstance(value, int) and not -(2**63) <= value < 2**63:  # beyond a jit argument's int64
            return jnp.full(shape, value, dtype=jdt)
        return _full(shape, jdt)(value)


@jitted
def _full(shape, jdt):
    """Filling is the first op of every factory (ones, full, *_like): one cached jitted call each."""
    return lambda value: jnp.full(shape, value, dtype=jdt)


# --- factories that fill: one program for the values -------------------------------------------------
# ones/zeros/full and their _like/new_ forms are CompositeExplicitAutograd: empty (a program of zeros)
# then fill_ (a second program, and the write into the storage), 20-24 us for a 16-element ones_like.
# Here a plain request is one jitted fill and the result's wrapping; anything else (another device,
# layout or memory format, a strided template, pinned memory) runs the composite, on CPU's key, which
# reaches jax's empty and fill_ through the dispatcher.

_CPU_KEYS = torch._C.DispatchKeySet(torch._C.DispatchKey.CPU)


def _elsewhere(layout, device, pin_memory) -> bool:
    """A factory's request for something other than a plain jax tensor (another device or layout, pinned
    memory), which its composite serves; a jax device's index is checked."""
    if layout not in (None, torch.strided) or pin_memory:
        return True
    if device is not None and torch.device(device).type != jax_device_module.NAME:
        return True
    _check_device(device)
    return False


def _new_filled(size, dtype: torch.dtype, value, layout, device, pin_memory) -> torch.Tensor | None:
    """A new contiguous jax tensor of `size` holding `value`, or None where the composite must decide."""
    if _elsewhere(layout, device, pin_memory):
        return None
    shape = tuple(int(n) for n in size)
    if any(n < 0 for n in shape):
        return None  # each composite words its own error (zeros: "Dimension size must be non-negative.")
    tensor.check_layout(shape, tensor.contiguous_strides(shape), dtype.itemsize, False)
    if 0 in shape:
        return tensor.empty(shape, dtype)
    return tensor.wrap(_filled(shape, dtype, value))


def _plain_like(self, memory_format) -> bool:
    """empty_like gives a contiguous result: asked for, or preserving a template laid out contiguously."""
    if memory_format is torch.contiguous_format:
        return True
    return memory_format in (None, torch.preserve_format) and self.stride() == tensor.contiguous_strides(self.shape)


def _composite(op, *args, **kwargs):
    return op._handle.redispatch_boxed(_CPU_KEYS, *args, **kwargs)


def _full_dtype(value) -> torch.dtype:
    """full's dtype when none is given (infer_full_options): bool, int64, the default complex dtype for a
    complex number, else the default dtype."""
    if isinstance(value, bool):
        return torch.bool
    if isinstance(value, int):
        return torch.int64
    if isinstance(value, complex):
        return torch.complex128 if torch.get_default_dtype() == torch.float64 else torch.complex64
    return torch.get_default_dtype()


def _register_like(op, fill):
    @register(op)
    def like(self, *args, dtype=None, layout=None, device=None, pin_memory=None, memory_format=None):
        value = fill(args)
        out = None
        if _plain_like(self, memory_format):
            out = _new_filled(self.shape, dtype or self.dtype, value, layout, device, pin_memory)
        if out is None:
            kwargs = dict(dtype=dtype, layout=layout, device=device, pin_memory=pin_memory, memory_format=memory_format)
            return _composite(op, self, *args, **kwargs)
        return out

    like.__qualname__ = op.name().removeprefix("aten::")


def _register_new(op, fill):
    @register(op)
    def new(self, size, *args, dtype=None, layout=None, device=None, pin_memory=None):
        out = _new_filled(size, dtype or self.dtype, fill(args), layout, device, pin_memory)
        if out is None:
            return _composite(op, self, size, *args, dtype=dtype, layout=layout, device=device, pin_memory=pin_memory)
        return out

    new.__qualname__ = op.name().removeprefix("aten::")


def _register_factory(op, fill, infer):
    @register(op)
    def factory(size, *args, dtype=None, layout=None, device=None, pin_memory=None):
        value = fill(args)
        out = _new_filled(size, dtype or infer(value), value, layout, device, pin_memory)
        if out is None:
            return _composite(op, size, *args, dtype=dtype, layout=layout, device=device, pin_memory=pin_memory)
        return out

    factory.__qualname__ = op.name().removeprefix("aten::")


def _zero(args):
    return 0


def _one(args):
    return 1


def _given(args):
    return args[0]


def _default_dtype(value):
    return torch.get_default_dtype()


for _fill, _like, _new, _factory, _infer in (
    (_zero, aten.zeros_like.default, aten.new_zeros.default, aten.zeros.default, _default_dtype),
    (_one, aten.ones_like.default, aten.new_ones.default, aten.ones.default, _default_dtype),
    (_given, aten.full_like.default, aten.new_full.default, aten.full.default, _full_dtype),
):
    _register_like(_like, _fill)
    _register_new(_new, _fill)
    _register_factory(_factory, _fill, _infer)


@register(aten.fill_.Scalar)
def fill_(self, value):
    target = each_location_once(self)
    tensor.write(target, _fill_value(target, value))
    return self


@register(aten.fill_.Tensor)
def fill_tensor_(self, value):
    tensor.write(self, _fill_value(self, value))
    return self


@register(aten.scalar_tensor.default)
def scalar_tensor(s, *, dtype=None, layout=None, device=None, pin_memory=None):
    """CPU's scalar_tensor converts half and bfloat16 through float, unchecked (2**31 -> inf): where(c, 2**31,
    half) works; every other dtype is c10's checked conversion, as in fill_."""
    _check_device(device)
    dtype = dtype or torch.get_default_dtype()
    dtypes.check_scalar(s, torch.float32 if dtype in (torch.float16, torch.bfloat16) else dtype)
    return tensor.wrap(_full((), dtypes.to_jax_dtype(dtype))(s))


@register(aten.zero_.default)
def zero_(self):
    target = each_location_once(self)
    tensor.write(target, tensor.zeros(target.numel(), dtypes.to_jax_dtype(self.dtype)).reshape(tuple(target.shape)))
    return self


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
        out.resize_((n,))  # first, as CPU: a size no memory holds fails here, with the allocator's error
    return store_into(out, _arange_values(n, start, step, out.dtype), resize=True)


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
    return lambda start, step: (jnp.arange(n, dtype=acc) * step + start).astype(jdt)


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
    if chosen.is_complex or chosen == torch.bool or _elsewhere(layout, device, pin_memory):
        return _composite(aten.arange.start_step, start, end, step, **kwargs)
    n = _arange_size(start, end, step, chosen)
    if n * chosen.itemsize > _ONE_PROGRAM_BYTES:
        # past a GiB the composite's order holds: resize_ checks the byte count (CPU's "Storage size
        # calculation overflowed"), then allocates, and an allocation that fails raises there and then
        return _composite(aten.arange.start_step, start, end, step, **kwargs)
    if n == 0:
        return tensor.empty((0,), chosen)
    with tensor.out_of_memory_as_torch():
        return tensor.wrap(_arange_values(n, start, step, chosen))


# arange(end) and arange(start, end) call the start_step composite directly (native::arange), not
# through the dispatcher: each needs the kernel too.
register(aten.arange.default)(_arange_end)
register(aten.arange.start)(_arange_start)


# linspace/logspace take their ends as c10 Scalars: Python numbers, or (the Tensor overloads, traced
# under torch.compile) 0-dim arrays holding the Scalar a tensor's item() would give (bool, int64,
# double or complex<double>). The helpers below treat both alike, so both give the same values.


def _as_scalar_array(t: torch.Tensor) -> jax.Array:
    """A 0-dim tensor's value as item() makes it a Scalar: bool, int64, double or complex<double>."""
    a = J(t)
    if a.dtype == jnp.bool_:
        return a
    if jnp.issubdtype(a.dtype, jnp.integer):
        return a.astype(jnp.int64)
    return a.astype(jnp.complex128 if jnp.iscomplexobj(a) else jnp.float64)


def _is_array(v) -> bool:
    return isinstance(v, jax.Array)


def _real(v):
    return jnp.real(v) if _is_array(v) else (v.real if isinstance(v, complex) else v)


def _check_fits(v, dtype: torch.dtype) -> None:
    """dtypes.check_scalar (c10's checked Scalar::to<T>), also for a 0-dim Scalar array."""
    if not _is_array(v):
        dtypes.check_scalar(v, dtype)
        return
    dtypes.check_array_fits(v, dtype)


def _as_integral(v, jdt):
    """A scalar as Scalar::to<scalar_t> makes it for an integral output (truncated; a negative
    integer wraps into an unsigned type: linspace(-1, 10, 5, dtype=uint8) starts at 255), as a double."""
    v = _real(v)
    if _is_array(v):
        if jdt == jnp.bool_:
            return (v != 0).astype(jnp.float64)
        whole = v if jnp.issubdtype(v.dtype, jnp.integer) else jnp.trunc(v).astype(jnp.int64)
        return whole.astype(jnp.int64).astype(jdt).astype(jnp.float64)
    if jdt == jnp.bool_:
        return float(bool(v))
    return float(np.asarray(int(v)).astype(jdt))


def _as(v, acc):
    """jnp.asarray(v, acc) for a Python scalar, the same conversion for a Scalar array."""
    return v.astype(acc) if _is_array(v) else jnp.asarray(v, acc)


def _widened(v):
    """jnp.asarray(v) for a Python scalar (its Scalar kind); a Scalar array already is one."""
    return v if _is_array(v) else jnp.asarray(v)


@register(aten.linspace.out)
def linspace_out(start, end, steps, *, out):
    """PyTorch's scalar formula (the one its CUDA kernel uses): start + i*step for the first half,
    end - (steps-1-i)*step for the second, in the output's precision; integer outputs truncate
    start and end first and step in double. (CPU's vectorised loop rounds differently, within
    float tolerance.)"""
    start, end = (s.item() if isinstance(s, torch.Tensor) else s for s in (start, end))
    if steps < 0:
        raise RuntimeError("number of steps must be non-negative")
    if out.numel() != steps:
        out.resize_((steps,))  # first, as CPU: a size no memory holds fails here
    if steps == 0:  # CPU converts nothing
        return out
    return store_into(out, _linspace_values(start, end, steps, out.dtype), resize=True)


def _linspace_values(start, end, steps, dtype):
    for v in (start, end) if steps > 1 else (start,):  # Scalar::to<scalar_t>, checked (one step: a fill)
        _check_fits(v, dtype)
    if steps > 1 and dtype == torch.bool:  # one step is a fill; more run CPU's kernel, which has no Bool
        raise NotImplementedError("\"linspace_cpu\" not implemented for 'Bool'")
    jdt = dtypes.to_jax_dtype(dtype)
    if dtype.is_complex or dtype.is_floating_point:
        acc = jdt  # each step rounds in the output dtype, as with c10::Half / BFloat16 scalars
    else:
        start, end, acc = _as_integral(start, jdt), _as_integral(end, jdt), jnp.float64
    if steps == 1:
        values = jnp.full((1,), _as(start, acc), acc)
    else:
        lo, hi = _as(start, acc), _as(end, acc)
        i = jnp.arange(steps)
        if dtype.is_complex:
            step = _scale(hi - lo, 1 / (steps - 1))
            values = jnp.where(i < steps // 2, lo + _scale(step, i), hi - _scale(step, steps - 1 - i))
        else:
            # each operation rounds to the dtype (XLA computes half in float32 inside one program)
            r = _rounding(acc)
            step = r(r(hi - lo) / (steps - 1))
            values = jnp.where(i < steps // 2, r(lo + r(step * i)), r(hi - r(step * (steps - 1 - i))))
    return dtypes.convert(values, jdt)


def _rounding(jdt):
    """Round a half-precision intermediate to its dtype as an eager op does (lax.reduce_precision: XLA
    drops a float32 -> half -> float32 round trip inside one program); other dtypes as they are."""
    bits = {jnp.dtype(jnp.float16): (5, 10), jnp.dtype(jnp.bfloat16): (8, 7)}.get(jnp.dtype(jdt))
    return (lambda x: x) if bits is None else (lambda x: jax.lax.reduce_precision(x, *bits))


def _scale(z, k):
    """A complex z times a real k as c10::complex<T> * T does it, part by part (jnp would multiply by
    k + 0j: (nan+0j) * 2 is nan+nanj there, nan+0j on CPU)."""
    k = jnp.asarray(k).astype(jnp.real(z).dtype)
    return jax.lax.complex(jnp.real(z) * k, jnp.imag(z) * k)


@register(aten.logspace.out)
def logspace_out(start, end, steps, base=10.0, *, out):
    """CPU's formula: start and end rounded to the output dtype, the step and the power in double
    (complex outputs: everything in the output dtype), halves mirrored from each end like linspace."""
    start, end = (s.item() if isinstance(s, torch.Tensor) else s for s in (start, end))
    if steps < 0:
        raise RuntimeError("number of steps must be non-negative")
    return store_into(out, _logspace_values(start, end, steps, base, out.dtype), resize=True)


def _logspace_values(start, end, steps, base, dtype):
    jdt = dtypes.to_jax_dtype(dtype)
    if steps == 0:  # CPU converts nothing
        return jnp.zeros((0,), jdt)
    if steps == 1:  # CPU fills base ** start (in double), converted to the dtype with fill_'s check
        acc = jnp.complex128 if dtype.is_complex else jnp.float64
        value = jnp.power(jnp.asarray(base, acc), _as(start, acc))
        if _is_array(start):
            _check_fits(value, dtype)
        else:  # a Python start: the check on the host (value may be staged into a traced program)
            with np.errstate(all="ignore"):
                host = np.power(np.asarray(base, acc), np.asarray(start, acc))
            dtypes.check_scalar(complex(host) if dtype.is_complex else float(host), dtype)
        return _logspace_integral(jnp.full((1,), value), jdt).astype(jdt)
    if not (dtype.is_floating_point or dtype.is_complex or dtype == torch.bool):
        info = torch.iinfo(dtype)
        message = f"value cannot be converted to type {_C_INT[dtype]} without overflow"
        for v in (start, end):  # Scalar::to<int type> is a checked conversion (unsigned: integers wrap)
            integral = jnp.issubdtype(v.dtype, jnp.integer) if _is_array(v) else isinstance(v, int)
            lowest = -info.max if integral and info.min == 0 else info.min
            if _is_array(v):
                x = _real(v)
                tracing.check_values(jnp.isnan(x) | (x < lowest) | (x > info.max), lambda: RuntimeError(message))
            elif math.isnan(v.real) or v.real < lowest or v.real > info.max:
                raise RuntimeError(message)
    else:
        for v in (start, end):  # Scalar::to<scalar_t>, checked
            _check_fits(v, dtype)
    if steps > 1 and dtype == torch.bool:  # one step is a fill; more run CPU's kernel, which has no Bool
        raise NotImplementedError("\"logspace_cpu\" not implemented for 'Bool'")
    if steps <= 1:
        acc = jnp.complex128 if dtype.is_complex else jnp.float64
        values = jnp.full((steps,), jnp.power(jnp.asarray(base, acc), _as(start, acc)))
    else:
        acc = jdt if dtype.is_complex else jnp.float64
        lo, hi = _widened(start).astype(jdt), _widened(end).astype(jdt)
        # integer outputs: the ends rounded to the dtype (-1 wraps to 255 in uint8), subtracted in double
        span = (hi.astype(acc) - lo.astype(acc)) if jnp.issubdtype(jdt, jnp.integer) else (hi - lo).astype(acc)
        step = span / jnp.asarray(steps - 1, acc)
        i = jnp.arange(steps)
        lo, hi = lo.astype(acc), hi.astype(acc)
        exponent = jnp.where(i < steps // 2, lo + step * i.astype(acc), hi - step * (steps - 1 - i).astype(acc))
        values = jnp.power(jnp.asarray(base, acc), exponent)
    return _logspace_integral(values, jdt).astype(jdt)


def _logspace_integral(values, jdt):
    if jnp.issubdtype(jdt, jnp.integer):
        # x86 converts through a 32- or 64-bit register (out of range: its minimum) and narrower
        # types keep the low bits
        via = jnp.int64 if jnp.dtype(jdt).itemsize == 8 else jnp.int32
        fits = jnp.abs(values) < 2.0 ** (jnp.iinfo(via).bits - 1)
        values = jnp.where(fits, jnp.where(fits, values, 0).astype(via), jnp.iinfo(via).min)
    return values


def _tensor_ends_kernel(name, scalar_op, values_fn):
    """linspace/logspace with 0-dim tensor ends (CPU: `at::linspace(start.item(), end.item(), ...)`).
    Concrete ends take that very path; traced ends (a compiled program) stay on the device as Scalar
    arrays through the same formula (steps is static), the value checks deferred to the program's."""

    def kernel(start, end, steps, *args, dtype=None, layout=None, device=None, pin_memory=None):
        ends = [(n, t) for n, t in (("start", start), ("end", end)) if isinstance(t, torch.Tensor)]
        if any(t.dim() != 0 for _, t in ends):
            dims = " and ".join(f"{n} with {t.dim()} dimension(s)" for n, t in ends)
            raise RuntimeError(f"{name} only supports 0-dimensional start and end tensors, but got {dims}.")
        if name == "logspace" and not args:
            args = (10.0,)  # base
        traced = [t for _, t in ends if tensor.is_jax(t) and tracing.is_traced(J(t))]
        options = {"dtype": dtype, "layout": layout, "device": device, "pin_memory": pin_memory}
        if not traced:
            start, end = (v.item() if isinstance(v, torch.Tensor) else v for v in (start, end))
            return scalar_op(start, end, steps, *args, **options)
        if steps < 0:
            raise RuntimeError("number of steps must be non-negative")
        result = _result_dtype(name, start, end, dtype)
        if steps == 0:  # CPU converts nothing
            return tensor.wrap(jnp.zeros((0,), dtypes.to_jax_dtype(result)))
        start, end = (_as_scalar_array(v) if isinstance(v, torch.Tensor) else v for v in (start, end))
        return tensor.wrap(values_fn(start, end, steps, *args, result))

    kernel.__qualname__ = f"{name}_tensor_ends"
    return kernel


def _result_dtype(name, start, end, dtype):
    """CPU's linspace_logspace_infer_options: complex ends make a complex result (the default complex
    dtype, or a passed dtype that must be complex); otherwise the passed or the default dtype."""
    complex_ends = any(
        (v.dtype.is_complex if isinstance(v, torch.Tensor) else isinstance(v, complex)) for v in (start, end)
    )
    if not complex_ends:
        return dtype or torch.get_default_dtype()
    inferred = torch.tensor(0j).dtype  # the default complex dtype
    if dtype is not None and not dtype.is_complex:
        raise RuntimeError(
            f"torch.{name}(): inferred dtype {dtypes.type_meta_name(inferred)} can't be safely cast to passed "
            f"dtype {dtypes.scalar_name(dtype)}"
        )
    return dtype or inferred


for _overload in ("Tensor_Tensor", "Tensor_Scalar", "Scalar_Tensor"):
    register(getattr(aten.linspace, _overload))(
        _tensor_ends_kernel("linspace", aten.linspace.default, _linspace_values)
    )
    register(getattr(aten.logspace, _overload))(
        _tensor_ends_kernel("logspace", aten.logspace.default, _logspace_values)
    )


_C_INT = {
    torch.uint8: "uint8_t",
    torch.int8: "int8_t",
    torch.int16: "int16_t",
    torch.int32: "int",
    torch.int64: "int64_t",
}


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
    _check_device(device)
    return tensor.wrap(_triangle_indices("tril_indices", row, col, offset, dtype or torch.int64, True))


@register(aten.triu_indices.default)
def triu_indices(row, col, offset=0, *, dtype=torch.int64, layout=None, device=None, pin_memory=None):
    _check_device(device)
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
