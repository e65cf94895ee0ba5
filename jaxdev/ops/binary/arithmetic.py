"""add, sub, rsub, mul, the divisions (true, trunc and floor rounding, floor_divide) and the
remainders: alpha checked and read as CPU reads it; integer division by zero raises as on CPU
(deferred inside compiled programs)."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import torch

from jaxdev import dtypes, tracing
from jaxdev.ops.binary.rules import (
    ADD,
    AND,
    FMOD,
    OR,
    SUB,
    as_read,
    check_subtraction,
    checked_alpha,
    in_place_of,
    int_div_check,
    is_bool,
    no_bool_or_complex,
    no_float_alpha,
    real_dtype,
)
from jaxdev.ops.kit import apply, float_of, result_type, same_dtype_bodies, value
from jaxdev.ops.kit.cpu_numerics import divide, opaque, round_to
from jaxdev.ops.kit.division import fmod as c_fmod
from jaxdev.ops.kit.formulas import DIV, MUL, add_alpha, sub_alpha
from jaxdev.ops.registry import aten, numbers_as_data, register_functional


def _times_complex_alpha(b, alpha):
    """b * alpha as c10::complex multiplies (CPU's add/sub compute a + alpha * b even for alpha 1:
    (1+0j) + (inf+0j) is inf+nanj there), spelled out so that XLA cannot drop the multiply."""
    ar, ai = jnp.real(alpha), jnp.imag(alpha)
    br, bi = jnp.real(b), jnp.imag(b)
    return jax.lax.complex(br * ar - bi * ai, br * ai + bi * ar)


def _add_complex(a, b, alpha):
    return a + _times_complex_alpha(b, alpha)


def _sub_complex(a, b, alpha):
    return a - _times_complex_alpha(b, alpha)


def _is_one(alpha) -> bool:
    """alpha is 1. A lifted (traced) alpha never is, for the program's sake: a + b * 1 is a + b, bit for bit."""
    return not tracing.is_traced(alpha) and alpha == 1


@register_functional(aten.add.Tensor, aten.add.Scalar, fast={aten.add.Tensor: same_dtype_bodies(ADD, 2, real_dtype)})
def add(self, other, *, alpha=1):
    common = result_type(self, other)
    if type(alpha) is not int:  # the default alpha=1 needs no check
        no_float_alpha(common, alpha)
    other = as_read(other, common)
    one = _is_one(alpha)
    if not one:
        alpha = checked_alpha(common, alpha)
    if common.is_complex:
        return apply(_add_complex, common, common, (self, other), (complex(alpha),))
    if one:
        return apply(ADD if common != torch.bool else OR, common, common, (self, other))
    return apply(add_alpha, common, common, (self, other), (alpha,))


@register_functional(aten.sub.Tensor, aten.sub.Scalar, fast={aten.sub.Tensor: same_dtype_bodies(SUB, 2, real_dtype)})
def sub(self, other, *, alpha=1):
    check_subtraction(self, other)  # before promotion: bool - 2**63 (a uint64 Scalar) is refused as a bool
    common = result_type(self, other)
    if type(alpha) is not int:
        no_float_alpha(common, alpha)
    other = as_read(other, common)
    one = _is_one(alpha)
    if not one:
        alpha = checked_alpha(common, alpha)
    if common.is_complex:
        return apply(_sub_complex, common, common, (self, other), (complex(alpha),))
    if one:
        return apply(SUB, common, common, (self, other))
    return apply(sub_alpha, common, common, (self, other), (alpha,))


def _mul_of_bool(a, b):
    # XLA's simplifier rewrites x * convert(bool) into select(bool, x, 0), which loses inf * 0 = NaN
    # (CPU: inf * False is nan, (-inf+0j) * False is nan+nanj); the barrier keeps the product.
    a, b = opaque((a, b))
    return a * b


@register_functional(
    aten.mul.Tensor, aten.mul.Scalar, fast={aten.mul.Tensor: same_dtype_bodies(MUL, 2, lambda d: d != torch.bool)}
)
def mul(self, other):
    common = result_type(self, other)
    if common == torch.bool:
        return apply(AND, common, common, (self, other))
    other = as_read(other, common)
    fn = _mul_of_bool if is_bool(self) or is_bool(other) else MUL
    return apply(fn, common, common, (self, other), exact_numbers=True)


def _trunc_div(a, b):
    if jnp.issubdtype(a.dtype, jnp.integer):
        q = jnp.abs(a) // jnp.abs(b)
        return jnp.where((a < 0) != (b < 0), -q, q)
    # DIV: a true division (a broadcast divisor behind the barrier, where XLA would multiply by its
    # reciprocal), IEEE's where the platform's is not (a TPU): k, not k - ulp
    return jnp.trunc(DIV(a, b))


def _floor_div(a, b, rounded=lambda v: v):
    if jnp.issubdtype(a.dtype, jnp.integer):
        return jnp.floor_divide(a, b)
    # CPU's div_floor_floating: through fmod, so inf // 2 is nan and -5 // inf is -1, as in Python;
    # `rounded` after each operation where CPU runs it in a half's own arithmetic
    mod = c_fmod(a, b)
    div = rounded(divide(rounded(a - mod), b))
    div = jnp.where((mod != 0) & ((b < 0) != (mod < 0)), rounded(div - 1), div)
    floor = jnp.floor(div)
    floor = jnp.where(rounded(div - floor) > 0.5, floor + 1, floor)
    floor = jnp.where(div != 0, floor, jnp.copysign(jnp.zeros((), a.dtype), a / b))
    return jnp.where(b == 0, a / b, floor)


@functools.cache
def _rounding_div_of(mode: str, dtype: torch.dtype):
    """div's trunc or floor kernel for a result of `dtype`. A half tensor divided by a tensor is CPU's
    Half arithmetic, each operation rounded to the half (float16 1179 / 2.6796875 truncated is 440, 439
    from float32's quotient; floor went 77 of 2,000 float16 values off); by a number or a 0-d tensor
    (a CPU scalar, read in float) CPU computes in float, as float32 is."""
    plain = _trunc_div if mode == "trunc" else _floor_div
    if dtype not in (torch.float16, torch.bfloat16):
        return plain
    rounded = round_to(dtypes.to_jax_dtype(dtype))

    def half_div(a, b):
        if jnp.ndim(b) == 0:
            return plain(a, b)
        if mode == "trunc":
            return jnp.trunc(rounded(DIV(a, b)))
        return _floor_div(a, b, rounded)

    return half_div


@register_functional(
    aten.div.Tensor, aten.div.Scalar, fast={aten.div.Tensor: same_dtype_bodies(DIV, 2, lambda d: float_of(d) is d)}
)
def div(self, other):
    common = float_of(result_type(self, other))
    return apply(DIV, common, common, (as_read(self, common), as_read(other, common)), exact_numbers=True)


# Their number operand and alpha reach the jitted bodies as data (a traced one promotes as a Python float:
# kit.result_type): fused eager lifts them, so an optimizer's changing step size is no new program.
numbers_as_data((1, "alpha"), aten.add.Tensor, aten.add.Scalar, aten.sub.Tensor, aten.sub.Scalar)
numbers_as_data((1,), aten.mul.Tensor, aten.mul.Scalar, aten.div.Tensor, aten.div.Scalar)


@register_functional(aten.div.Tensor_mode, aten.div.Scalar_mode)
def div_mode(self, other, *, rounding_mode=None):
    common = result_type(self, other)
    if rounding_mode is None:
        return div(self, other)
    if rounding_mode not in ("trunc", "floor"):
        raise RuntimeError(
            f"div expected rounding_mode to be one of None, 'trunc', or 'floor' but found '{rounding_mode}'"
        )
    no_bool_or_complex("div_trunc_cpu" if rounding_mode == "trunc" else "div_floor_cpu", common)
    other = as_read(other, common)
    if not (common.is_floating_point or common.is_complex):
        tracing.check_values(jnp.asarray(value(other)) == 0, lambda: RuntimeError("ZeroDivisionError"))
    fn = _rounding_div_of(rounding_mode, common)
    return apply(fn, common, common, (self, other), exact_numbers=True)


def _remainder(a, b):
    if jnp.issubdtype(a.dtype, jnp.integer):
        return jnp.remainder(a, b)
    r = c_fmod(a, b)
    return jnp.where((r != 0) & ((r < 0) != (b < 0)), r + b, r)


@register_functional(aten.remainder.Tensor, aten.remainder.Scalar)
def remainder(self, other):
    common, other = int_div_check("remainder_cpu", self, other)
    return apply(_remainder, common, common, (self, other))


@register_functional(aten.remainder.Scalar_Tensor)
def remainder_scalar_tensor(self, other):
    """`number % tensor` (__rmod__): CPU's remainder of the number as a wrapped 0-dim tensor, here a
    0-dim jax tensor already of the promoted dtype (it ran on the CPU fallback)."""
    wrapped = torch.full((), self, dtype=torch.result_type(self, other), device=other.device)
    return remainder(wrapped, other)


@register_functional(aten.fmod.Tensor, aten.fmod.Scalar)
def fmod(self, other):
    common, other = int_div_check("fmod_cpu", self, other)
    return apply(FMOD, common, common, (self, other))


@register_functional(aten.floor_divide.default, aten.floor_divide.Scalar)
def floor_divide(self, other):
    common, other = int_div_check("div_floor_cpu", self, other)
    return apply(_rounding_div_of("floor", common), common, common, (self, other), exact_numbers=True)


# `x //= y`: floor_divide.default in place (its overload name, Tensor, does not pair it with `default`)
floor_divide_ = in_place_of([aten.floor_divide_.Tensor], floor_divide)


def _rsub(a, b, alpha):
    return b - a * alpha


@register_functional(aten.rsub.Tensor, aten.rsub.Scalar)
def rsub(self, other, alpha=1):  # alpha is positional in rsub.Scalar, keyword-only in rsub.Tensor
    check_subtraction(self, other)  # before promotion: bool - 2**63 (a uint64 Scalar) is refused as a bool
    common = result_type(self, other)
    if type(alpha) is not int:
        no_float_alpha(common, alpha)
    if alpha != 1:
        alpha = checked_alpha(common, alpha)
    return apply(_rsub, common, common, (self, as_read(other, common)), (alpha,))
