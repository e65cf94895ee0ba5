"""Integer-only binary ops: bitwise and/or/xor, shifts (CPU's results for negative and too-wide
shifts), gcd and lcm (CPU's Euclid)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import torch

from jaxdev import dtypes
from jaxdev.ops.binary.rules import as_read, binary, in_place_of
from jaxdev.ops.kit import apply, result_type
from jaxdev.ops.registry import aten, register_functional

for _op, _fn in [
    (aten.bitwise_and.Tensor, jnp.bitwise_and),
    (aten.bitwise_and.Scalar, jnp.bitwise_and),
    (aten.bitwise_or.Tensor, jnp.bitwise_or),
    (aten.bitwise_or.Scalar, jnp.bitwise_or),
    (aten.bitwise_xor.Tensor, jnp.bitwise_xor),
    (aten.bitwise_xor.Scalar, jnp.bitwise_xor),
]:
    binary(_op, _fn)


def _integral(name, common):
    if common.is_floating_point or common.is_complex or common == torch.bool:
        raise NotImplementedError(f"\"{name}_cpu\" not implemented for '{dtypes.scalar_name(common)}'")


def _left_shift(a, b):
    """CPU's: a shift by a negative amount or by the width or more gives 0."""
    bits = jnp.iinfo(a.dtype).bits
    out = jnp.left_shift(a, jnp.clip(b, 0, bits - 1))
    return jnp.where((b < 0) | (b >= bits), jnp.zeros((), a.dtype), out)


def _right_shift(a, b):
    """CPU's: a shift by a negative amount or by the width or more fills with the sign bit (so an
    unsigned value becomes 0)."""
    bits = jnp.iinfo(a.dtype).bits
    beyond = (b < 0) | (b >= bits)
    if jnp.issubdtype(a.dtype, jnp.unsignedinteger):
        return jnp.where(beyond, jnp.zeros((), a.dtype), jnp.right_shift(a, jnp.where(beyond, 0, b).astype(a.dtype)))
    return jnp.right_shift(a, jnp.where(beyond, bits - 1, b).astype(a.dtype))


def _gcd(a, b):
    """CPU's Euclid on |a|, |b| with C's remainder (jnp.gcd never ends when an operand is INT64_MIN)."""

    def step(ab):
        a, b = ab
        live = a != 0
        r = jax.lax.rem(b, jnp.where(live, a, jnp.ones((), a.dtype)))
        return jnp.where(live, r, a), jnp.where(live, a, b)

    a, b = jnp.broadcast_arrays(jnp.abs(a), jnp.abs(b))
    return jax.lax.while_loop(lambda ab: jnp.any(ab[0] != 0), step, (a, b))[1]


def _lcm(a, b):
    """CPU's order of operations: |a / gcd * b|, 0 when the gcd is 0."""
    g = _gcd(a, b)
    safe = jnp.where(g == 0, jnp.ones((), a.dtype), g)
    return jnp.where(g == 0, jnp.zeros((), a.dtype), jnp.abs(a // safe * b))


def _integer_op(ops, name, fn):
    @register_functional(*ops)
    def kernel(self, other):
        common = result_type(self, other)
        _integral(name, common)
        return apply(fn, common, common, (as_read(self, common), as_read(other, common)))

    return kernel


_SHIFT_OVERLOADS = ("Tensor", "Tensor_Scalar", "Scalar_Tensor")


_integer_op([getattr(aten.bitwise_left_shift, o) for o in _SHIFT_OVERLOADS], "lshift", _left_shift)


_integer_op([getattr(aten.bitwise_right_shift, o) for o in _SHIFT_OVERLOADS], "rshift", _right_shift)


in_place_of(
    [aten.__ilshift__.Tensor, aten.__ilshift__.Scalar],
    _integer_op([aten.__lshift__.Tensor, aten.__lshift__.Scalar], "lshift", _left_shift),
)


in_place_of(
    [aten.__irshift__.Tensor, aten.__irshift__.Scalar],
    _integer_op([aten.__rshift__.Tensor, aten.__rshift__.Scalar], "rshift", _right_shift),
)


_integer_op([aten.gcd.default], "gcd", _gcd)


_integer_op([aten.lcm.default], "lcm", _lcm)
