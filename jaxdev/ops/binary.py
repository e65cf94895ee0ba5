"""Elementwise binary ops: arithmetic (with alpha and rounding modes), powers, remainders,
comparisons, bitwise and logical ops. Result dtypes are `torch.result_type`'s; integer division by
zero raises as on CPU (deferred inside compiled programs); half precision computes in float32.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import torch

from jaxdev import dtypes, tensor, tracing
from jaxdev.ops.cpu_numerics import opaque, round_to
from jaxdev.ops.registry import aten, register, register_functional, store_into
from jaxdev.ops.toolkit import (
    apply,
    float_of,
    jitted,
    on_views,
    plain,
    result_type,
    same_dtype_bodies,
    typed_bodies,
    value,
)

_ADD, _OR, _SUB, _MUL, _AND, _DIV, _FMOD, _POW = map(
    plain,
    (jnp.add, jnp.logical_or, jnp.subtract, jnp.multiply, jnp.logical_and, jnp.true_divide, jnp.fmod, jnp.power),
)


# --- binary --------------------------------------------------------------------------------------


def _cpu_refuses(name: str, common: torch.dtype) -> Exception | None:
    """The error CPU's kernel for `name` raises for operands promoted to `common` (its dtype dispatch
    has no case for them), where jnp would compute something or raise its own error."""
    no_case = (
        (common.is_complex and name in _REAL_ONLY)
        or (not common.is_floating_point and name in _FLOAT_ONLY)
        or ((common.is_floating_point or common.is_complex) and name in _INTEGRAL_ONLY)
    )
    if no_case:
        return NotImplementedError(f"\"{name}_cpu\" not implemented for '{dtypes.scalar_name(common)}'")
    if common.is_complex and name in _NOT_COMPLEX:
        return RuntimeError(f"{name} not implemented for complex tensors.")
    return None


_REAL_ONLY = frozenset({"lt", "le", "gt", "ge", "atan2", "copysign"})
_FLOAT_ONLY = frozenset({"hypot"})
_INTEGRAL_ONLY = frozenset({"bitwise_and", "bitwise_or", "bitwise_xor"})
_NOT_COMPLEX = frozenset({"maximum", "minimum", "fmax", "fmin"})


def _as_read(x, common: torch.dtype):
    """A Python int past int64 (PyTorch holds 2**63 <= x < 2**64 as a uint64 Scalar) as CPU's kernels
    read it in `common`: a float, or its low 64 bits as int64 (which narrower integers wrap further).
    As it is, it overflowed the jitted body's int64 argument."""
    if type(x) is int and x >= 2**63:
        return float(x) if (common.is_floating_point or common.is_complex) else x - 2**64
    return x


def _checked_alpha(common: torch.dtype, alpha):
    """alpha as CPU's add/sub read it: c10's checked conversion to the result dtype (int8 with alpha=300
    raises; XLA wrapped it to 44)."""
    dtypes.check_scalar(alpha, common)
    return _as_read(alpha, common)


def _no_bool_or_complex(name: str, common: torch.dtype) -> None:
    """The division and remainder kernels of CPU (`<name>_cpu`) have no Bool or complex case (jnp
    divided bools into a ZeroDivisionError, and refused complex with its own TypeError)."""
    if common == torch.bool or common.is_complex:
        raise NotImplementedError(f"\"{name}\" not implemented for '{dtypes.scalar_name(common)}'")


def binary(op, fn, *, result=None, float_result=False, compute=None):
    """Binary op with torch's type promotion. `result`: fixed result dtype (comparisons)."""
    fn = plain(fn)
    name = op._schema.name.split("::")[1]

    def dtypes_of(common):  # the kernel's (compute, result) dtypes for two tensors of dtype `common`
        if _cpu_refuses(name, common) is not None:
            return None
        if float_result:
            common = float_of(common)
        return compute or common, result or common

    fast = {op: typed_bodies(fn, 2, dtypes_of)} if op._schema.arguments[1].type == torch.TensorType.get() else None

    @register_functional(op, fast=fast)
    def kernel(self, other):
        common = result_type(self, other)
        refused = _cpu_refuses(name, common)
        if refused is not None:
            raise refused
        other = _as_read(other, common)
        if float_result:
            common = float_of(common)
        return apply(fn, compute or common, result or common, (self, other))


def _no_float_alpha(common, alpha):
    """CPU's alpha_check, against the result dtype."""
    if isinstance(alpha, bool) and common != torch.bool:
        raise RuntimeError("Boolean alpha only supported for Boolean results.")
    if isinstance(alpha, float) and not (common.is_floating_point or common.is_complex):
        raise RuntimeError("For integral input tensors, argument alpha must not be a floating point number.")
    if isinstance(alpha, complex) and not common.is_complex:
        raise RuntimeError("For non-complex input tensors, argument alpha must not be a complex number.")


def _add_alpha(a, b, alpha):
    return a + b * alpha if a.dtype != jnp.bool_ else jnp.logical_or(a, jnp.logical_and(b, alpha))


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


def _real(dtype: torch.dtype) -> bool:
    return not (dtype.is_complex or dtype == torch.bool)


@register_functional(aten.add.Tensor, aten.add.Scalar, fast={aten.add.Tensor: same_dtype_bodies(_ADD, 2, _real)})
def add(self, other, *, alpha=1):
    common = result_type(self, other)
    if type(alpha) is not int:  # the default alpha=1 needs no check
        _no_float_alpha(common, alpha)
    other = _as_read(other, common)
    if alpha != 1:
        alpha = _checked_alpha(common, alpha)
    if common.is_complex:
        return apply(_add_complex, common, common, (self, other), (complex(alpha),))
    if alpha == 1:
        return apply(_ADD if common != torch.bool else _OR, common, common, (self, other))
    return apply(_add_alpha, common, common, (self, other), (alpha,))


def _sub_alpha(a, b, alpha):
    return a - b * alpha


def _is_bool(x) -> bool:
    """A bool operand: a bool tensor, or a Python bool (PyTorch wraps it as a bool tensor)."""
    return x.dtype == torch.bool if isinstance(x, torch.Tensor) else isinstance(x, bool)


def _check_subtraction(self, other):
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


@register_functional(aten.sub.Tensor, aten.sub.Scalar, fast={aten.sub.Tensor: same_dtype_bodies(_SUB, 2, _real)})
def sub(self, other, *, alpha=1):
    _check_subtraction(self, other)  # before promotion: bool - 2**63 (a uint64 Scalar) is refused as a bool
    common = result_type(self, other)
    if type(alpha) is not int:
        _no_float_alpha(common, alpha)
    other = _as_read(other, common)
    if alpha != 1:
        alpha = _checked_alpha(common, alpha)
    if common.is_complex:
        return apply(_sub_complex, common, common, (self, other), (complex(alpha),))
    if alpha == 1:
        return apply(_SUB, common, common, (self, other))
    return apply(_sub_alpha, common, common, (self, other), (alpha,))


def _mul_of_bool(a, b):
    # XLA's simplifier rewrites x * convert(bool) into select(bool, x, 0), which loses inf * 0 = NaN
    # (CPU: inf * False is nan, (-inf+0j) * False is nan+nanj); the barrier keeps the product.
    a, b = opaque((a, b))
    return a * b


@register_functional(
    aten.mul.Tensor, aten.mul.Scalar, fast={aten.mul.Tensor: same_dtype_bodies(_MUL, 2, lambda d: d != torch.bool)}
)
def mul(self, other):
    common = result_type(self, other)
    if common == torch.bool:
        return apply(_AND, common, common, (self, other))
    other = _as_read(other, common)
    fn = _mul_of_bool if _is_bool(self) or _is_bool(other) else _MUL
    return apply(fn, common, common, (self, other), exact_numbers=True)


def _trunc_div(a, b):
    if jnp.issubdtype(a.dtype, jnp.integer):
        q = jnp.abs(a) // jnp.abs(b)
        return jnp.where((a < 0) != (b < 0), -q, q)
    return jnp.trunc(a / b)


def _floor_div(a, b):
    if jnp.issubdtype(a.dtype, jnp.integer):
        return jnp.floor_divide(a, b)
    # CPU's div_floor_floating: through fmod, so inf // 2 is nan and -5 // inf is -1, as in Python
    mod = jnp.fmod(a, b)
    div = (a - mod) / b
    div = jnp.where((mod != 0) & ((b < 0) != (mod < 0)), div - 1, div)
    floor = jnp.floor(div)
    floor = jnp.where(div - floor > 0.5, floor + 1, floor)
    floor = jnp.where(div != 0, floor, jnp.copysign(jnp.zeros((), a.dtype), a / b))
    return jnp.where(b == 0, a / b, floor)


@register_functional(
    aten.div.Tensor, aten.div.Scalar, fast={aten.div.Tensor: same_dtype_bodies(_DIV, 2, lambda d: float_of(d) is d)}
)
def div(self, other):
    common = float_of(result_type(self, other))
    return apply(_DIV, common, common, (_as_read(self, common), _as_read(other, common)), exact_numbers=True)


@register_functional(aten.div.Tensor_mode, aten.div.Scalar_mode)
def div_mode(self, other, *, rounding_mode=None):
    common = result_type(self, other)
    if rounding_mode is None:
        return div(self, other)
    if rounding_mode not in ("trunc", "floor"):
        raise RuntimeError(
            f"div expected rounding_mode to be one of None, 'trunc', or 'floor' but found '{rounding_mode}'"
        )
    _no_bool_or_complex("div_trunc_cpu" if rounding_mode == "trunc" else "div_floor_cpu", common)
    other = _as_read(other, common)
    if not (common.is_floating_point or common.is_complex):
        tracing.check_values(jnp.asarray(value(other)) == 0, lambda: RuntimeError("ZeroDivisionError"))
    fn = _trunc_div if rounding_mode == "trunc" else _floor_div
    return apply(fn, common, common, (self, other), exact_numbers=True)


def _remainder(a, b):
    if jnp.issubdtype(a.dtype, jnp.integer):
        return jnp.remainder(a, b)
    r = jnp.fmod(a, b)
    return jnp.where((r != 0) & ((r < 0) != (b < 0)), r + b, r)


def _int_div_check(name, self, other):
    """(common dtype, other as the kernel reads it), after CPU's refusals and its integer division by
    zero check."""
    common = result_type(self, other)
    _no_bool_or_complex(name, common)
    other = _as_read(other, common)
    if not (common.is_floating_point or common.is_complex):
        tracing.check_values(jnp.asarray(value(other)) == 0, lambda: RuntimeError("ZeroDivisionError"))
    return common, other


@register_functional(aten.remainder.Tensor, aten.remainder.Scalar)
def remainder(self, other):
    common, other = _int_div_check("remainder_cpu", self, other)
    return apply(_remainder, common, common, (self, other))


@register_functional(aten.fmod.Tensor, aten.fmod.Scalar)
def fmod(self, other):
    common, other = _int_div_check("fmod_cpu", self, other)
    return apply(_FMOD, common, common, (self, other))


@register_functional(aten.pow.Tensor_Tensor, aten.pow.Tensor_Scalar)
def pow_tensor(self, exponent):
    common = result_type(self, exponent)
    if common == torch.bool and isinstance(exponent, torch.Tensor):  # a bool number exponent copies
        raise NotImplementedError("\"pow\" not implemented for 'Bool'")
    integral = not (common.is_floating_point or common.is_complex)
    if not isinstance(exponent, torch.Tensor):
        if not (common in (torch.float32, torch.float64) or common.is_complex):  # those read a double
            dtypes.check_scalar(exponent, common)  # c10's checked Scalar::to<scalar_t>: int8 ** 300 raises
        exponent = _as_read(exponent, common)
    if integral and not isinstance(exponent, torch.Tensor) and exponent < 0:
        raise RuntimeError("Integers to negative integer powers are not allowed.")
    if not isinstance(exponent, torch.Tensor) and not integral:
        special = _scalar_power(common, exponent)
        if special is not None:
            return apply(special, common, common, (self,))
        if common in (torch.float16, torch.bfloat16):
            exponent = _as_half(exponent, common)
    return apply(_int_pow if integral and common != torch.bool else _POW, common, common, (self, exponent))


def _ones(x):
    return jnp.ones_like(x)


def _same(x):
    return x


def _square(x):
    return x * x


def _cube(x):
    return x * x * x


def _inverse_square(x):
    return jnp.reciprocal(x * x)


def _bf16(x):
    return round_to(jnp.bfloat16)(x)


def _cube_bf16(x):
    return _bf16(x * x) * x


def _inverse_square_bf16(x):
    return jnp.reciprocal(_bf16(x * x))


_SQRT, _RECIPROCAL = plain(jnp.sqrt), plain(jnp.reciprocal)


def _scalar_power(common, exponent):
    """CPU's pow(Tensor, Scalar) for a floating or complex result (Pow.cpp, PowKernel.cpp): exponent 0
    fills 1 and 1 copies (any dtype); float/double/bfloat16/complex take sqrt, rsqrt and reciprocal's
    kernels for 0.5, -0.5 and -1; float/double/complex multiply for 2, 3 and -2 (x*x, x*x*x, 1/(x*x)),
    bfloat16 likewise with its exponent and each product rounded to bfloat16. std::pow's general
    formula (exp(e*log(x)) for complex) is far less exact than the product there. None: std::pow."""
    if exponent == 0:
        return _ones
    if exponent == 1:
        return _same
    if common == torch.float16:
        return None
    if exponent == 0.5:
        return _SQRT
    if exponent == -0.5:
        return jax.lax.rsqrt
    if exponent == -1:
        return _RECIPROCAL
    bf16 = common == torch.bfloat16
    if bf16:
        exponent = _as_half(exponent, common)
    if exponent == 2:
        return _square
    if exponent == 3:
        return _cube_bf16 if bf16 else _cube
    if exponent == -2:
        return _inverse_square_bf16 if bf16 else _inverse_square
    return None


def _as_half(exponent, dtype):
    """The exponent as CPU's half and bfloat16 kernels read it (Scalar::to<Half>, to<BFloat16>):
    rounded to the dtype (a complex exponent makes the result complex: not reached)."""
    try:
        return torch.tensor(exponent, dtype=dtype).item()
    except Exception:
        return exponent
    try:
        return torch.tensor(exponent, dtype=torch.bfloat16).item()
    except Exception:
        return exponent


def _int_pow(base, e):
    """Integer power as PyTorch computes it: a negative exponent gives 0, except for bases 1 and -1."""
    e = jnp.asarray(e, base.dtype)
    negative = jnp.where(base == 1, 1, jnp.where(base == -1, jnp.where(e % 2 == 0, 1, -1), 0)).astype(base.dtype)
    return jnp.where(e < 0, negative, jnp.power(base, jnp.maximum(e, 0)))


@register_functional(aten.pow.Scalar, inplace=False)
def pow_scalar(self, exponent):
    common = torch.result_type(exponent, self)
    if common == torch.bool:
        raise NotImplementedError("\"pow\" not implemented for 'Bool'")
    integral = not (common.is_floating_point or common.is_complex) and common != torch.bool
    return apply(_int_pow if integral else _POW, common, common, (_as_read(self, common), exponent))


@register(aten.pow_.Scalar)
def pow_tensor_scalar_(self, exponent):
    """x.pow_(scalar) is pow.Tensor_Scalar in place. Its overload name pairs it with pow.Scalar (whose
    self is the Scalar), so deriving it by name computed std::pow in float32 with the exponent unrounded,
    missing CPU's bfloat16 rsqrt/sqrt/product kernels (normalize's backward takes pow_(-0.5))."""
    store_into(self, pow_tensor(self, exponent), resize=False)
    return self


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


def _floating_only(name, fn):
    """A float-only binary op: integer inputs raise CPU's NotImplementedError."""

    @register_functional(getattr(aten, name).default)
    def kernel(self, other):
        common = result_type(self, other)
        if not (common.is_floating_point or common.is_complex):
            raise NotImplementedError(f"\"{name}_cpu\" not implemented for '{dtypes.scalar_name(common)}'")
        return apply(fn, common, common, (self, other))


def _logaddexp2(a, b):
    return jnp.logaddexp2(a, b)


def _logaddexp(a, b):
    if not jnp.iscomplexobj(a):
        return jnp.logaddexp(a, b)
    # CPU's complex formula: the operand with the larger real part plus log1p(exp(difference)),
    # which keeps that operand's imaginary part where a principal-branch log would wrap it by 2*pi
    larger = jnp.real(a) >= jnp.real(b)
    m, n = jnp.where(larger, a, b), jnp.where(larger, b, a)
    return m + jnp.log1p(jnp.exp(n - m))


_floating_only("logaddexp", _logaddexp)
_floating_only("logaddexp2", _logaddexp2)


@register_functional(aten.nextafter.default)
def nextafter(self, other):
    """The next representable value in the operands' own dtype: half precision computed in float32
    (opmath) would step by a float32 ulp and round back to the very same half."""
    common = result_type(self, other)
    if not common.is_floating_point:
        raise NotImplementedError(f"\"nextafter_cpu\" not implemented for '{dtypes.scalar_name(common)}'")
    return on_views(_nextafter(dtypes.to_jax_dtype(common)), (self, other))


@jitted
def _nextafter(jdt):
    return lambda a, b: jnp.nextafter(a.astype(jdt), b.astype(jdt))


def _heaviside(x, values):
    return jnp.where(x == 0, values, (x > 0).astype(x.dtype))


@register_functional(aten.heaviside.default)
def heaviside(self, values):
    if self.dtype != values.dtype:
        raise RuntimeError("heaviside is not yet implemented for tensors with different dtypes.")
    return apply(_heaviside, self.dtype, self.dtype, (self, values))


@register_functional(aten.floor_divide.default, aten.floor_divide.Scalar)
def floor_divide(self, other):
    common, other = _int_div_check("div_floor_cpu", self, other)
    return apply(_floor_div, common, common, (self, other), exact_numbers=True)


@register(aten.floor_divide_.Tensor)
def floor_divide_(self, other):
    """`x //= y`: floor_divide.default in place (its overload name, Tensor, does not pair it with the
    functional overload `default`, so it was not derived and ran on the CPU fallback)."""
    tensor.check_no_partial_overlap(self, [other])
    store_into(self, floor_divide(self, other), resize=False)
    return self


def _rsub(a, b, alpha):
    return b - a * alpha


@register_functional(aten.rsub.Tensor, aten.rsub.Scalar)
def rsub(self, other, alpha=1):  # alpha is positional in rsub.Scalar, keyword-only in rsub.Tensor
    _check_subtraction(self, other)  # before promotion: bool - 2**63 (a uint64 Scalar) is refused as a bool
    common = result_type(self, other)
    if type(alpha) is not int:
        _no_float_alpha(common, alpha)
    if alpha != 1:
        alpha = _checked_alpha(common, alpha)
    return apply(_rsub, common, common, (self, _as_read(other, common)), (alpha,))


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


# --- shifts, gcd, lcm: integer-only ------------------------------------------------------------------


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
        return apply(fn, common, common, (_as_read(self, common), _as_read(other, common)))


_SHIFT_OVERLOADS = ("Tensor", "Tensor_Scalar", "Scalar_Tensor")
_integer_op([getattr(aten.bitwise_left_shift, o) for o in _SHIFT_OVERLOADS], "lshift", _left_shift)
_integer_op([getattr(aten.bitwise_right_shift, o) for o in _SHIFT_OVERLOADS], "rshift", _right_shift)
_integer_op([aten.__lshift__.Tensor, aten.__lshift__.Scalar], "lshift", _left_shift)
_integer_op([aten.__rshift__.Tensor, aten.__rshift__.Scalar], "rshift", _right_shift)
_integer_op([aten.gcd.default], "gcd", _gcd)
_integer_op([aten.lcm.default], "lcm", _lcm)
