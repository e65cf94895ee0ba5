"""Float-valued binary ops: logaddexp, logaddexp2, nextafter, heaviside, atan2, hypot, copysign."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
from jax import lax

from jaxdev import dtypes
from jaxdev.ops.binary.rules import binary
from jaxdev.ops.kit import apply, capabilities, cpu_numerics, jitted, on_views, result_type
from jaxdev.ops.kit import transcendentals as tm
from jaxdev.ops.kit import transcendentals_atan as ta
from jaxdev.ops.kit import transcendentals_inverse as ti
from jaxdev.ops.registry import aten, register_functional


def _floating_only(name, fn):
    """A float-only binary op: integer inputs raise CPU's NotImplementedError."""

    @register_functional(getattr(aten, name).default)
    def kernel(self, other):
        common = result_type(self, other)
        if not (common.is_floating_point or common.is_complex):
            raise NotImplementedError(f"\"{name}_cpu\" not implemented for '{dtypes.scalar_name(common)}'")
        return apply(fn, common, common, (self, other))


_INV_LN2 = np.float32(1 / np.log(2))


def _logaddexp2(a, b):
    """jnp.logaddexp2; where jaxdev's functions are chosen (a TPU, where jnp's is XLA's exp2 and log1p)
    CPU's formula on them: equal infinities as they are, else max + log1p(exp2(-|a - b|)) / log(2)
    (a half computed in float32 and rounded once)."""
    dt = jnp.result_type(a, b)
    if jnp.iscomplexobj(a) or not tm.own(dt):
        return jnp.logaddexp2(a, b)
    a, b = a.astype(jnp.float32), b.astype(jnp.float32)
    out = jnp.maximum(a, b) + tm.log1p(ti.exp2(-jnp.abs(a - b))) * _INV_LN2
    return jnp.where(jnp.isinf(a) & (a == b), a, out).astype(dt)


def _logaddexp(a, b):
    if not jnp.iscomplexobj(a):
        return tm.logaddexp(a, b)
    # CPU's complex formula: the operand with the larger real part plus log1p(exp(difference)),
    # which keeps that operand's imaginary part where a principal-branch log would wrap it by 2*pi
    larger = jnp.real(a) >= jnp.real(b)
    m, n = jnp.where(larger, a, b), jnp.where(larger, b, a)
    return m + tm.log1p(tm.exp(n - m))


_floating_only("logaddexp", _logaddexp)


_floating_only("logaddexp2", _logaddexp2)


@register_functional(aten.nextafter.default)
def nextafter(self, other):
    """The next representable value in the operands' own dtype: half precision computed in float32
    (opmath) would step by a float32 ulp and round back to the very same half."""
    common = result_type(self, other)
    if not common.is_floating_point:
        raise NotImplementedError(f"\"nextafter_cpu\" not implemented for '{dtypes.scalar_name(common)}'")
    capabilities.refuse_float64_bits("torch.nextafter", common)
    return on_views(_nextafter(dtypes.to_jax_dtype(common)), (self, other))


@jitted
def _nextafter(jdt):
    return lambda a, b: nextafter_values(a.astype(jdt), b.astype(jdt))


def nextafter_values(a, b):
    """jnp.nextafter, float64's on its bits where the platform emulates float64 (XLA's own raised
    'Binary op and ... s32 and u32' on a TPU): IEEE's values, subnormals compared exactly (no float
    comparison, which XLA's CPU backend makes with subnormals as zero)."""
    if a.dtype != jnp.float64 or cpu_numerics.float64_native():
        return jnp.nextafter(a, b)
    magnitude = np.int64(2**63 - 1)
    bits, other = (lax.bitcast_convert_type(v, jnp.int64) for v in (a, b))
    # the bits as an integer in the values' order (both zeros 0): sign and magnitude to two's complement
    key, other_key = (jnp.where(v < 0, -(v & magnitude), v) for v in (bits, other))
    stepped = jnp.where((other_key > key) == (key > 0), bits + 1, bits - 1)  # |a| grows: b beyond a from 0
    smallest = jnp.where(other_key < 0, np.int64(1 - 2**63), np.int64(1))  # the smallest subnormal, b's sign
    out = jnp.where(key == other_key, other, jnp.where(key == 0, smallest, stepped))
    nan = ((bits & magnitude) > 0x7FF0000000000000) | ((other & magnitude) > 0x7FF0000000000000)
    return jnp.where(nan, a + b, lax.bitcast_convert_type(out, jnp.float64))


def _heaviside(x, values):
    return jnp.where(x == 0, values, (x > 0).astype(x.dtype))


@register_functional(aten.heaviside.default)
def heaviside(self, values):
    if self.dtype != values.dtype:
        raise RuntimeError("heaviside is not yet implemented for tensors with different dtypes.")
    return apply(_heaviside, self.dtype, self.dtype, (self, values))


for _op, _fn in [
    (aten.atan2.default, ta.atan2),
    (aten.hypot.default, jnp.hypot),
    (aten.copysign.Tensor, jnp.copysign),
    (aten.copysign.Scalar, jnp.copysign),
]:
    binary(_op, _fn, float_result=True)
