"""Complex numbers: building them (complex, polar), their angle and the materialised conjugate.

`conj()` itself is a view with PyTorch's conjugate bit (jaxdev/tensor.py resolves it on read);
`conj_physical` is the op that writes the conjugated values.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import torch

from jaxdev import dtypes, layout
from jaxdev.ops.kit import J, apply, float_of, out_dtypes
from jaxdev.ops.kit import transcendentals as tm
from jaxdev.ops.kit import transcendentals_atan as ta
from jaxdev.ops.registry import aten, register, register_functional, store_into

_FLOATS = (torch.float16, torch.float32, torch.float64)


def _angle(x):
    if jnp.iscomplexobj(x):
        return ta.atan2(jnp.imag(x), jnp.real(x))  # jnp.angle's formula
    # PyTorch's real angle: pi for negatives, 0 otherwise (-0 included), NaN stays NaN.
    return jnp.where(jnp.isnan(x), x, jnp.where(x < 0, jnp.asarray(math.pi, x.dtype), jnp.zeros((), x.dtype)))


@register_functional(aten.angle.default)
def angle(self):
    dt = self.dtype.to_real() if self.dtype.is_complex else float_of(self.dtype)
    return apply(_angle, self.dtype if self.dtype.is_complex else dt, dt, (self,))


@register_functional(aten._conj_physical.default)
def conj_physical(self):
    x = J(self)
    return jnp.conj(x) if jnp.iscomplexobj(x) else x


@register(aten.conj_physical.out)  # the functional form is composite; its out= form reaches the device
def conj_physical_out(self, *, out):
    value = conj_physical(self)
    out_dtypes.check("aten::conj_physical.out", "aten::conj_physical", (out,), (value,), (self,))
    resized = tuple(out.shape) != tuple(value.shape)  # CPU's TensorIterator lays it out as self lies
    strides = layout.elementwise_strides([(tuple(self.shape), self.stride())]) if resized else None
    return store_into(out, value, resize=True, strides=strides)


@register(aten.conj_physical_.default)
def conj_physical_(self):
    return store_into(self, conj_physical(self), resize=False)


def _check_parts(name, a, b):
    if a.dtype != b.dtype:
        raise RuntimeError(
            f"Expected object of scalar type {dtypes.scalar_name(a.dtype)} but got scalar type "
            f"{dtypes.scalar_name(b.dtype)} for second argument"
        )
    if a.dtype not in _FLOATS:
        raise RuntimeError(
            f"Expected both inputs to be Half, Float or Double tensors but got {dtypes.scalar_name(a.dtype)} and "
            f"{dtypes.scalar_name(b.dtype)}"
        )
    if name == "polar" and a.dtype == torch.float16:
        raise NotImplementedError("\"polar_cpu\" not implemented for 'Half'")


def _complex(re, im):
    return jax.lax.complex(re, im)


def _polar(r, theta):
    return jax.lax.complex(r * tm.cos(theta), r * tm.sin(theta))


@register_functional(aten.complex.default)
def complex_(real, imag):
    _check_parts("complex", real, imag)
    return _pair(_complex, real, imag)


@register_functional(aten.polar.default)
def polar(abs, angle):
    _check_parts("polar", abs, angle)
    return _pair(_polar, abs, angle)


def _pair(fn, a, b):
    x, y = J(a), J(b)
    shape = jnp.broadcast_shapes(x.shape, y.shape)
    x, y = jnp.broadcast_to(x, shape), jnp.broadcast_to(y, shape)
    if a.dtype == torch.float16:
        dtypes.to_jax_dtype(torch.complex32)  # raises: complex32 has no JAX type
    return fn(x, y)
