"""What every binary kernel applies: PyTorch's type promotion, the dtypes CPU's kernels refuse, how
they read a number operand and alpha, and `binary`, the kernel factory of the plain elementwise ops."""

from __future__ import annotations

import jax.numpy as jnp
import torch

from jaxdev import dtypes, tensor, tracing
from jaxdev.ops.kit import apply, complex_pow, float_of, plain, result_type, typed_bodies, value
from jaxdev.ops.kit.division import fmod
from jaxdev.ops.registry import register, register_functional, store_into

# fmod: C's, exact where the platform's rem is not (a TPU's is a - b trunc(a / b) on its approximate quotient)
ADD, OR, SUB, AND, FMOD = map(plain, (jnp.add, jnp.logical_or, jnp.subtract, jnp.logical_and, fmod))
# jnp.power, or jaxdev's float32 and complex64 pow where its own functions are chosen (a TPU); complex
# special values CPU's cpow's
POW = complex_pow.pow


def cpu_refuses(name: str, common: torch.dtype) -> Exception | None:
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


def as_read(x, common: torch.dtype):
    """A Python int past int64 (PyTorch holds 2**63 <= x < 2**64 as a uint64 Scalar) as CPU's kernels
    read it in `common`: a float, or its low 64 bits as int64 (which narrower integers wrap further).
    As it is, it overflowed the jitted body's int64 argument."""
    if type(x) is int and x >= 2**63:
        return float(x) if (common.is_floating_point or common.is_complex) else x - 2**64
    return x


def checked_alpha(common: torch.dtype, alpha):
    """alpha as CPU's add/sub read it: c10's checked conversion to the result dtype (int8 with alpha=300
    raises; XLA wrapped it to 44), and for float16 and bfloat16 its value in that dtype: their kernels
    multiply by alpha converted to the tensor's dtype, in float (a float alpha had 15-54 % of the
    elements an ulp or more from CPU's; the last elements of a vectorized loop's tail still round each
    step in half on CPU, which no element-wise program can follow)."""
    dtypes.check_scalar(alpha, common)
    alpha = as_read(alpha, common)
    if common not in (torch.float16, torch.bfloat16):
        return alpha
    half = dtypes.to_jax_dtype(common)
    if tracing.is_traced(alpha):  # a lifted number (fused eager's program data)
        return jnp.asarray(alpha).astype(half).astype(jnp.float32)
    return float(half.type(alpha))


def no_bool_or_complex(name: str, common: torch.dtype) -> None:
    """The division and remainder kernels of CPU (`<name>_cpu`) have no Bool or complex case (jnp
    divided bools into a ZeroDivisionError, and refused complex with its own TypeError)."""
    if common == torch.bool or common.is_complex:
        raise NotImplementedError(f"\"{name}\" not implemented for '{dtypes.scalar_name(common)}'")


def binary(op, fn, *, result=None, float_result=False, compute=None):
    """Binary op with torch's type promotion. `result`: fixed result dtype (comparisons)."""
    fn = plain(fn)
    name = op._schema.name.split("::")[1]

    def dtypes_of(common):  # the kernel's (compute, result) dtypes for two tensors of dtype `common`
        if cpu_refuses(name, common) is not None:
            return None
        if float_result:
            common = float_of(common)
        return compute or common, result or common

    fast = {op: typed_bodies(fn, 2, dtypes_of)} if op._schema.arguments[1].type == torch.TensorType.get() else None

    @register_functional(op, fast=fast)
    def kernel(self, other):
        common = result_type(self, other)
        refused = cpu_refuses(name, common)
        if refused is not None:
            raise refused
        other = as_read(other, common)
        if float_result:
            common = float_of(common)
        return apply(fn, compute or common, result or common, (self, other))


def no_float_alpha(common, alpha):
    """CPU's alpha_check, against the result dtype."""
    if isinstance(alpha, bool) and common != torch.bool:
        raise RuntimeError("Boolean alpha only supported for Boolean results.")
    if isinstance(alpha, float) and not (common.is_floating_point or common.is_complex):
        raise RuntimeError("For integral input tensors, argument alpha must not be a floating point number.")
    if isinstance(alpha, complex) and not common.is_complex:
        raise RuntimeError("For non-complex input tensors, argument alpha must not be a complex number.")


def real_dtype(dtype: torch.dtype) -> bool:
    return not (dtype.is_complex or dtype == torch.bool)


def is_bool(x) -> bool:
    """A bool operand: a bool tensor, or a Python bool (PyTorch wraps it as a bool tensor)."""
    return x.dtype == torch.bool if isinstance(x, torch.Tensor) else isinstance(x, bool)


def check_subtraction(self, other):
    if is_bool(self) and is_bool(other):
        raise RuntimeError(
            "Subtraction, the `-` operator, with two bool tensors is not supported. "
            "Use the `^` or `logical_xor()` operator instead."
        )
    if is_bool(self) or is_bool(other):
        raise RuntimeError(
            "Subtraction, the `-` operator, with a bool tensor is not supported. "
            "If you are trying to invert a mask, use the `~` or `logical_not()` operator instead."
        )


def int_div_check(name, self, other):
    """(common dtype, other as the kernel reads it), after CPU's refusals and its integer division by
    zero check."""
    common = result_type(self, other)
    no_bool_or_complex(name, common)
    other = as_read(other, common)
    if not (common.is_floating_point or common.is_complex):
        tracing.check_values(jnp.asarray(value(other)) == 0, lambda: RuntimeError("ZeroDivisionError"))
    return common, other


def in_place_of(ops, functional):
    """In-place kernels for `ops` whose names do not pair them with their functional op, so none was
    derived and they ran on the CPU fallback, whose copies hide an overlap (`x //= y`, `x <<= y`):
    CPU's order, the overlap of self with other checked first, then `functional` stored into self."""

    @register(*ops)
    def kernel(self, other):
        tensor.check_no_partial_overlap(self, [other] if isinstance(other, torch.Tensor) else [])
        store_into(self, functional(self, other), resize=False)
        return self

    return kernel
