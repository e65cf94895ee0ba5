"""linspace and logspace, with Scalar or 0-dim tensor ends, as CPU computes them."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import torch

from jaxdev import dtypes, tensor, tracing
from jaxdev.ops.kit import J
from jaxdev.ops.kit.cpu_numerics import divide_by, narrowed, round_to
from jaxdev.ops.registry import aten, register, store_into

_C_INT = {
    torch.uint8: "uint8_t",
    torch.int8: "int8_t",
    torch.int16: "int16_t",
    torch.int32: "int",
    torch.int64: "int64_t",
}


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
    half = jdt in (jnp.float16, jnp.bfloat16)
    if half:
        # c10::Half / BFloat16 scalars: each operation computed in float and rounded to the half, stated
        # as float32 arithmetic with round_to (float16 operations' code depends on the CPU: issue 41)
        acc, r = jnp.float32, round_to(jdt)
        start, end = (r(_as(v, acc)) for v in (start, end))  # a double to the half through float
    elif dtype.is_complex or dtype.is_floating_point:
        acc = jdt  # each step rounds in the output dtype
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
            # each operation rounds to the dtype, as C++ arithmetic in it does; an integer operand is
            # the dtype's value of it (c10's half operators convert it first)
            if half:
                step = r(divide_by(r(hi - lo), float(np.asarray(steps - 1, jdt))))
                k, rest = r(i.astype(acc)), r((steps - 1 - i).astype(acc))
            else:
                r = round_to(acc)
                step, k, rest = r(r(hi - lo) / (steps - 1)), i, steps - 1 - i
            values = jnp.where(i < steps // 2, r(lo + r(step * k)), r(hi - r(step * rest)))
    return dtypes.convert(values, jdt)


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
        return narrowed(_logspace_integral(jnp.full((1,), value), jdt), jdt)
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
        lo, hi = narrowed(_widened(start), jdt), narrowed(_widened(end), jdt)
        # integer outputs: the ends rounded to the dtype (-1 wraps to 255 in uint8), subtracted in double;
        # floating ones subtracted in the dtype, a half's difference of halves rounded by round_to (exact
        # in double, then one rounding: no float16 operation, whose code depends on the CPU)
        if jnp.issubdtype(jdt, jnp.integer):
            span = hi.astype(acc) - lo.astype(acc)
        elif jdt in (jnp.float16, jnp.bfloat16):
            span = round_to(jdt)(hi.astype(acc) - lo.astype(acc))
        else:
            span = (hi - lo).astype(acc)
        step = span / jnp.asarray(steps - 1, acc)
        i = jnp.arange(steps)
        lo, hi = lo.astype(acc), hi.astype(acc)
        exponent = jnp.where(i < steps // 2, lo + step * i.astype(acc), hi - step * (steps - 1 - i).astype(acc))
        values = jnp.power(jnp.asarray(base, acc), exponent)
    return narrowed(_logspace_integral(values, jdt), jdt)


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
