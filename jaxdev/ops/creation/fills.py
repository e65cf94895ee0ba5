"""Factories that fill: empty, empty_strided, the zero tensor, fill_, zero_, scalar_tensor, and the
filled factories (zeros, ones, full and their _like/new_ forms) in one program; quantized dtypes refused."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import torch

from jaxdev import device as jax_device_module
from jaxdev import dtypes, tensor
from jaxdev.ops.kit import J, each_location_once, jitted
from jaxdev.ops.kit.cpu_numerics import narrowed
from jaxdev.ops.kit.new_memory import uninitialised_value
from jaxdev.ops.registry import aten, register


def check_device(device) -> None:
    if device is not None:
        device = torch.device(device)
        if device.index is not None:
            jax_device_module.check_index(device.index)


def _uninitialised(size, dtype: torch.dtype, strides) -> torch.Tensor:
    out = tensor.empty(size, dtype, strides)
    value = uninitialised_value(dtype)
    if value is not None and out.numel():
        fill_(out, value)
    return out


@register(aten.empty.memory_format)
def empty(size, *, dtype=None, layout=None, device=None, pin_memory=None, memory_format=None):
    check_device(device)
    return _uninitialised(size, dtype or torch.get_default_dtype(), tensor.strides_for(size, memory_format))


@register(aten.empty_strided.default)
def empty_strided(size, stride, *, dtype=None, layout=None, device=None, pin_memory=None):
    check_device(device)
    return _uninitialised(size, dtype or torch.get_default_dtype(), stride)


@register(aten._efficientzerotensor.default)
def efficient_zero_tensor(size, *, dtype=None, layout=None, device=None, pin_memory=None):
    """A plain zero-filled tensor: the values of PyTorch's lazy ZeroTensor, materialised."""
    check_device(device)
    return tensor.empty(size, dtype or torch.get_default_dtype())


def _fill_value(self, value):
    if isinstance(value, torch.Tensor):
        if value.dim() != 0:
            raise RuntimeError(
                f"fill_ only supports 0-dimension value tensor but got tensor with {value.dim()} dimensions."
            )
        return jnp.broadcast_to(narrowed(J(value), dtypes.to_jax_dtype(self.dtype)), tuple(self.shape))
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
    # a float64 number to a half through float, as c10 converts it (one step rounds once on some CPUs)
    return lambda value: jnp.full(shape, narrowed(jnp.asarray(value), jdt), dtype=jdt)


# --- factories that fill: one program for the values -------------------------------------------------
# ones/zeros/full and their _like/new_ forms are CompositeExplicitAutograd: empty (a program of zeros)
# then fill_ (a second program, and the write into the storage), 20-24 us for a 16-element ones_like.
# Here a plain request is one jitted fill and the result's wrapping; anything else (another device,
# layout or memory format, a strided template, pinned memory) runs the composite, on CPU's key, which
# reaches jax's empty and fill_ through the dispatcher.

_CPU_KEYS = torch._C.DispatchKeySet(torch._C.DispatchKey.CPU)


def elsewhere(layout, device, pin_memory) -> bool:
    """A factory's request for something other than a plain jax tensor (another device or layout, pinned
    memory), which its composite serves; a jax device's index is checked."""
    if layout not in (None, torch.strided) or pin_memory:
        return True
    if device is not None and torch.device(device).type != jax_device_module.NAME:
        return True
    check_device(device)
    return False


def _new_filled(size, dtype: torch.dtype, value, layout, device, pin_memory) -> torch.Tensor | None:
    """A new contiguous jax tensor of `size` holding `value`, or None where the composite must decide."""
    if elsewhere(layout, device, pin_memory) or dtype in dtypes.BYTE_CARRIERS:
        return None  # (raw bits: the composite's empty and zero_ serve zeros; fill_ refuses ones and full)
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


def composite(op, *args, **kwargs):
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
            return composite(op, self, *args, **kwargs)
        return out


def _register_new(op, fill):
    @register(op)
    def new(self, size, *args, dtype=None, layout=None, device=None, pin_memory=None):
        out = _new_filled(size, dtype or self.dtype, fill(args), layout, device, pin_memory)
        if out is None:
            return composite(op, self, size, *args, dtype=dtype, layout=layout, device=device, pin_memory=pin_memory)
        return out


def _register_factory(op, fill, infer):
    @register(op)
    def factory(size, *args, dtype=None, layout=None, device=None, pin_memory=None):
        value = fill(args)
        out = _new_filled(size, dtype or infer(value), value, layout, device, pin_memory)
        if out is None:
            return composite(op, size, *args, dtype=dtype, layout=layout, device=device, pin_memory=pin_memory)
        return out


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
    check_device(device)
    dtype = dtype or torch.get_default_dtype()
    dtypes.check_scalar(s, torch.float32 if dtype in (torch.float16, torch.bfloat16) else dtype)
    return tensor.wrap(_full((), dtypes.to_jax_dtype(dtype))(s))


@register(aten.zero_.default)
def zero_(self):
    target = each_location_once(self)
    tensor.write(target, tensor.zeros(target.numel(), dtypes.to_jax_dtype(self.dtype)).reshape(tuple(target.shape)))
    return self


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
