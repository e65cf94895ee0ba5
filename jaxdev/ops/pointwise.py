"""Elementwise ops. One line per op; the factories below hold what they share.

Dtypes follow PyTorch exactly: the result dtype is torch's own (`torch.result_type`, int->float for
float-valued ops, bool for comparisons), and float16/bfloat16 are computed in float32 and rounded
once, as PyTorch's CPU kernels do ("opmath").
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import torch

from jaxdev import dtypes, tracing
from jaxdev.ops.registry import aten, register_functional
from jaxdev.ops.toolkit import J, apply, float_of, opmath, plain, value

_ADD, _OR, _SUB, _MUL, _AND, _DIV, _FMOD, _POW, _ABS, _SIGN = map(
    plain,
    (
        jnp.add,
        jnp.logical_or,
        jnp.subtract,
        jnp.multiply,
        jnp.logical_and,
        jnp.true_divide,
        jnp.fmod,
        jnp.power,
        jnp.abs,
        jnp.sign,
    ),
)


# --- unary ---------------------------------------------------------------------------------------


def unary_float(op, fn):
    """Float-valued op: integer and bool inputs give the default float dtype."""
    fn = plain(fn)

    @register_functional(op)
    def kernel(self):
        dt = float_of(self.dtype)
        return apply(fn, dt, dt, (self,))

    kernel.__qualname__ = op.name()


def unary_same(op, fn, *, no_bool=None):
    fn = plain(fn)

    @register_functional(op)
    def kernel(self):
        if no_bool and self.dtype == torch.bool:
            raise RuntimeError(no_bool)
        return apply(fn, self.dtype, self.dtype, (self,))

    kernel.__qualname__ = op.name()


def unary_bool(op, fn):
    fn = plain(fn)

    @register_functional(op)
    def kernel(self):
        return apply(fn, self.dtype, torch.bool, (self,))

    kernel.__qualname__ = op.name()


for _op, _fn in [
    (aten.sin.default, jnp.sin),
    (aten.cos.default, jnp.cos),
    (aten.tan.default, jnp.tan),
    (aten.asin.default, jnp.arcsin),
    (aten.acos.default, jnp.arccos),
    (aten.atan.default, jnp.arctan),
    (aten.sinh.default, jnp.sinh),
    (aten.cosh.default, jnp.cosh),
    (aten.tanh.default, jnp.tanh),
    (aten.asinh.default, jnp.arcsinh),
    (aten.acosh.default, jnp.arccosh),
    (aten.atanh.default, jnp.arctanh),
    (aten.exp.default, jnp.exp),
    (aten.exp2.default, jnp.exp2),
    (aten.expm1.default, jnp.expm1),
    (aten.log.default, jnp.log),
    (aten.log2.default, jnp.log2),
    (aten.log10.default, jnp.log10),
    (aten.log1p.default, jnp.log1p),
    (aten.sqrt.default, jnp.sqrt),
    (aten.rsqrt.default, jax.lax.rsqrt),
    (aten.sigmoid.default, jax.nn.sigmoid),
    (aten.erf.default, jax.scipy.special.erf),
    (aten.erfc.default, jax.scipy.special.erfc),
    (aten.erfinv.default, jax.scipy.special.erfinv),
    (aten.reciprocal.default, jnp.reciprocal),
]:
    unary_float(_op, _fn)


def _frac(x):
    return x - jnp.trunc(x)


def _relu(x):
    return jnp.maximum(x, jnp.zeros((), x.dtype))


def _bitwise_not(x):
    return jnp.logical_not(x) if x.dtype == jnp.bool_ else jnp.invert(x)


for _op, _fn in [
    (aten.neg.default, jnp.negative),
    (aten.floor.default, jnp.floor),
    (aten.ceil.default, jnp.ceil),
    (aten.trunc.default, jnp.trunc),
    (aten.round.default, jnp.round),
    (aten.frac.default, _frac),
    (aten.relu.default, _relu),
    (aten.bitwise_not.default, _bitwise_not),
]:
    unary_same(
        _op,
        _fn,
        no_bool="Negation, the `-` operator, on a bool tensor is not supported. If you are trying to invert a mask, use the `~` or `logical_not()` operator instead."
        if _op is aten.neg.default
        else None,
    )

for _op, _fn in [
    (aten.isnan.default, jnp.isnan),
    (aten.logical_not.default, jnp.logical_not),
    (aten.signbit.default, jnp.signbit),
    (aten.isinf.default, jnp.isinf),
    (aten.isneginf.default, jnp.isneginf),
    (aten.isposinf.default, jnp.isposinf),
]:
    unary_bool(_op, _fn)


@register_functional(aten.abs.default)
def abs_(self):
    result = self.dtype.to_real()
    return apply(_ABS, self.dtype, result, (self,))


def _sgn(z):
    magnitude = jnp.abs(z)
    return jnp.where(magnitude == 0, jnp.zeros((), z.dtype), z / magnitude.astype(z.dtype))


@register_functional(aten.sgn.default)
def sgn(self):
    """sign() for real tensors, z/|z| (0 at 0) for complex ones."""
    if self.dtype.is_complex:
        return apply(_sgn, self.dtype, self.dtype, (self,))
    return sign(self)


@register_functional(aten.sign.default)
def sign(self):
    if self.dtype.is_complex:
        raise RuntimeError(
            "Unlike NumPy, torch.sign is not intended to support complex numbers. Please use torch.sgn instead."
        )
    if self.dtype == torch.bool:
        return J(self)
    return apply(_SIGN, self.dtype, self.dtype, (self,))


@functools.cache
def _round_to(decimals):
    return functools.partial(jnp.round, decimals=decimals)


@register_functional(aten.round.decimals)
def round_decimals(self, *, decimals):
    return apply(_round_to(decimals), self.dtype, self.dtype, (self,))


# --- binary --------------------------------------------------------------------------------------


def _common(a, b) -> torch.dtype:
    return torch.result_type(a, b)


def binary(op, fn, *, result=None, float_result=False, compute=None):
    """Binary op with torch's type promotion. `result`: fixed result dtype (comparisons)."""
    fn = plain(fn)

    @register_functional(op)
    def kernel(self, other):
        common = _common(self, other)
        if float_result:
            common = float_of(common)
        return apply(fn, compute or common, result or common, (self, other))

    kernel.__qualname__ = op.name()


def _no_float_alpha(common, alpha):
    if isinstance(alpha, float) and not (common.is_floating_point or common.is_complex):
        raise RuntimeError("For integral input tensors, argument alpha must not be a floating point number.")
    if isinstance(alpha, complex) and not common.is_complex:
        raise RuntimeError("For non-complex input tensors, argument alpha must not be a complex number.")


def _add_alpha(a, b, alpha):
    return a + b * alpha if a.dtype != jnp.bool_ else jnp.logical_or(a, jnp.logical_and(b, alpha))


@register_functional(aten.add.Tensor, aten.add.Scalar)
def add(self, other, *, alpha=1):
    common = _common(self, other)
    _no_float_alpha(common, alpha)
    if alpha == 1:
        return apply(_ADD if common != torch.bool else _OR, common, common, (self, other))
    return apply(_add_alpha, common, common, (self, other), (alpha,))


def _sub_alpha(a, b, alpha):
    return a - b * alpha


def _is_bool(x) -> bool:
    """A bool operand: a bool tensor, or a Python bool (PyTorch wraps it as a bool tensor)."""
    return x.dtype == torch.bool if isinstance(x, torch.Tensor) else isinstance(x, bool)


@register_functional(aten.sub.Tensor, aten.sub.Scalar)
def sub(self, other, *, alpha=1):
    common = _common(self, other)
    if _is_bool(self) and _is_bool(other):
        raise RuntimeError(
            "Subtraction, the `-` operator, with two bool tensors is not supported. "
            "Use the `^` or `logical_xor()` operator instead."
        )
    if _is_bool(self) or _is_bool(other):
        raise RuntimeError(
            "Subtraction, the `-` operator, with a bool tensor is not supported. "
            "If you are trying to invert a mask, use the `~` or `logical_not()` operator instead."
        )
    _no_float_alpha(common, alpha)
    if alpha == 1:
        return apply(_SUB, common, common, (self, other))
    return apply(_sub_alpha, common, common, (self, other), (alpha,))


@register_functional(aten.mul.Tensor, aten.mul.Scalar)
def mul(self, other):
    common = _common(self, other)
    return apply(_MUL if common != torch.bool else _AND, common, common, (self, other))


def _trunc_div(a, b):
    if jnp.issubdtype(a.dtype, jnp.integer):
        q = jnp.abs(a) // jnp.abs(b)
        return jnp.where((a < 0) != (b < 0), -q, q)
    return jnp.trunc(a / b)


def _floor_div(a, b):
    return jnp.floor_divide(a, b) if jnp.issubdtype(a.dtype, jnp.integer) else jnp.floor(a / b)


@register_functional(aten.div.Tensor, aten.div.Scalar)
def div(self, other):
    common = float_of(_common(self, other))
    return apply(_DIV, common, common, (self, other))


@register_functional(aten.div.Tensor_mode, aten.div.Scalar_mode)
def div_mode(self, other, *, rounding_mode=None):
    common = _common(self, other)
    if rounding_mode is None:
        return div(self, other)
    if rounding_mode not in ("trunc", "floor"):
        raise RuntimeError(
            f"div expected rounding_mode to be one of None, 'trunc', or 'floor' but found '{rounding_mode}'"
        )
    if not (common.is_floating_point or common.is_complex):
        tracing.check_values(jnp.asarray(value(other)) == 0, lambda: ZeroDivisionError("ZeroDivisionError"))
    fn = _trunc_div if rounding_mode == "trunc" else _floor_div
    return apply(fn, common, common, (self, other))


def _remainder(a, b):
    if jnp.issubdtype(a.dtype, jnp.integer):
        return jnp.remainder(a, b)
    r = jnp.fmod(a, b)
    return jnp.where((r != 0) & ((r < 0) != (b < 0)), r + b, r)


def _int_div_check(self, other):
    common = _common(self, other)
    if not (common.is_floating_point or common.is_complex):
        tracing.check_values(jnp.asarray(value(other)) == 0, lambda: RuntimeError("ZeroDivisionError"))
    return common


@register_functional(aten.remainder.Tensor, aten.remainder.Scalar)
def remainder(self, other):
    common = _int_div_check(self, other)
    return apply(_remainder, common, common, (self, other))


@register_functional(aten.fmod.Tensor, aten.fmod.Scalar)
def fmod(self, other):
    common = _int_div_check(self, other)
    return apply(_FMOD, common, common, (self, other))


def _int_pow(a, b):
    return jnp.power(a, b)


@register_functional(aten.pow.Tensor_Tensor, aten.pow.Tensor_Scalar)
def pow_(self, exponent):
    common = _common(self, exponent)
    integral = not (common.is_floating_point or common.is_complex)
    if integral and not isinstance(exponent, torch.Tensor) and exponent < 0:
        raise RuntimeError("Integers to negative integer powers are not allowed.")
    return apply(_int_pow if integral and common != torch.bool else _POW, common, common, (self, exponent))


def _int_pow(base, e):
    """Integer power as PyTorch computes it: a negative exponent gives 0, except for bases 1 and -1."""
    e = jnp.asarray(e, base.dtype)
    negative = jnp.where(base == 1, 1, jnp.where(base == -1, jnp.where(e % 2 == 0, 1, -1), 0)).astype(base.dtype)
    return jnp.where(e < 0, negative, jnp.power(base, jnp.maximum(e, 0)))


@register_functional(aten.pow.Scalar)
def pow_scalar(self, exponent):
    common = _common(exponent, self)
    integral = not (common.is_floating_point or common.is_complex) and common != torch.bool
    return apply(_int_pow if integral else _POW, common, common, (self, exponent))


for _op, _fn in [
    (aten.maximum.default, jnp.maximum),
    (aten.minimum.default, jnp.minimum),
    (aten.fmax.default, jnp.fmax),
    (aten.fmin.default, jnp.fmin),
    (aten.bitwise_and.Tensor, jnp.bitwise_and),
    (aten.bitwise_and.Scalar, jnp.bitwise_and),
    (aten.bitwise_or.Tensor, jnp.bitwise_or),
    (aten.bitwise_or.Scalar, jnp.bitwise_or),
    (aten.bitwise_xor.Tensor, jnp.bitwise_xor),
    (aten.bitwise_xor.Scalar, jnp.bitwise_xor),
]:
    binary(_op, _fn)

for _op, _fn in [
    (aten.atan2.default, jnp.arctan2),
    (aten.hypot.default, jnp.hypot),
    (aten.copysign.Tensor, jnp.copysign),
    (aten.copysign.Scalar, jnp.copysign),
]:
    binary(_op, _fn, float_result=True)

for _name, _fn in [
    ("eq", jnp.equal),
    ("ne", jnp.not_equal),
    ("lt", jnp.less),
    ("le", jnp.less_equal),
    ("gt", jnp.greater),
    ("ge", jnp.greater_equal),
]:
    binary(getattr(aten, _name).Tensor, _fn, result=torch.bool)
    binary(getattr(aten, _name).Scalar, _fn, result=torch.bool)

for _name, _fn in [("logical_and", jnp.logical_and), ("logical_or", jnp.logical_or), ("logical_xor", jnp.logical_xor)]:
    binary(getattr(aten, _name).default, _fn, result=torch.bool)


# --- ternary -------------------------------------------------------------------------------------


def _where(a, b, cond):
    return jnp.where(cond, a, b)


@register_functional(aten.where.self)
def where(condition, self, other):
    if condition.dtype not in (torch.bool, torch.uint8):
        raise RuntimeError(
            f"where expected condition to be a boolean tensor, but got a tensor with dtype {dtypes.scalar_name(condition.dtype)}"
        )
    common = _common(self, other)
    cond = J(condition).astype(bool)
    return apply(_where, common, common, (self, other), (cond,))


def _clamp(x, lo, hi):
    if lo is not None:
        x = jnp.where(jnp.isnan(x) | (x >= lo), x, lo) if jnp.issubdtype(x.dtype, jnp.floating) else jnp.maximum(x, lo)
    if hi is not None:
        x = jnp.where(jnp.isnan(x) | (x <= hi), x, hi) if jnp.issubdtype(x.dtype, jnp.floating) else jnp.minimum(x, hi)
    return x


@register_functional(aten.clamp.default, aten.clamp.Tensor)
def clamp(self, min=None, max=None):
    if min is None and max is None:
        raise RuntimeError("torch.clamp: At least one of 'min' or 'max' must not be None")
    common = self.dtype
    for bound in (min, max):
        if bound is not None:
            common = torch.result_type(torch.empty(self.shape, dtype=common, device="meta"), bound)
    lo = None if min is None else jnp.asarray(value(min)).astype(opmath(dtypes.to_jax_dtype(common)))
    hi = None if max is None else jnp.asarray(value(max)).astype(opmath(dtypes.to_jax_dtype(common)))
    return apply(_clamp, common, common, (self,), (lo, hi))


@register_functional(aten.clamp_min.default, aten.clamp_min.Tensor)
def clamp_min(self, min):
    return clamp(self, min, None)


@register_functional(aten.clamp_max.default, aten.clamp_max.Tensor)
def clamp_max(self, max):
    return clamp(self, None, max)


def _lerp(a, b, w):
    return a + w * (b - a)


def _addcmul(s, a, b, v):
    return s + v * a * b


def _addcdiv(s, a, b, v):
    return s + v * a / b


@register_functional(aten.lerp.Scalar, aten.lerp.Tensor)
def lerp(self, end, weight):
    common = self.dtype
    return apply(_lerp, common, common, (self, end, weight))


@register_functional(aten.addcmul.default)
def addcmul(self, tensor1, tensor2, *, value=1):
    common = torch.promote_types(torch.result_type(tensor1, tensor2), self.dtype)
    return apply(_addcmul, common, common, (self, tensor1, tensor2), (value,))


@register_functional(aten.addcdiv.default)
def addcdiv(self, tensor1, tensor2, *, value=1):
    common = torch.promote_types(torch.result_type(tensor1, tensor2), self.dtype)
    if not (common.is_floating_point or common.is_complex):
        raise RuntimeError(
            "Integer division with addcdiv is no longer supported, and in a future release addcdiv "
            "will perform a true division of tensor1 and tensor2. The historic addcdiv behavior can be "
            "implemented as (input + value * torch.trunc(tensor1 / tensor2)).to(input.dtype) for integer "
            "inputs and as (input + value * tensor1 / tensor2) for float inputs. The future addcdiv "
            "behavior is just the latter implementation: (input + value * tensor1 / tensor2), for all dtypes."
        )
    return apply(_addcdiv, common, common, (self, tensor1, tensor2), (value,))


def _triangle(keep):
    def kernel(self, diagonal=0):
        x = J(self)
        if x.ndim < 2:
            raise RuntimeError(f"{keep.__name__}: input tensor must have at least 2 dimensions")
        return keep(x, diagonal)

    return kernel


register_functional(aten.triu.default)(_triangle(jnp.triu))
register_functional(aten.tril.default)(_triangle(jnp.tril))
