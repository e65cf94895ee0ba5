"""Elementwise selects and blends: where, clamp (min/max), lerp, addcmul/addcdiv, and triu/tril
(a select by position). Result dtypes are `torch.result_type`'s.
"""

from __future__ import annotations

import jax.numpy as jnp
import torch

from jaxdev import dtypes
from jaxdev.ops.kit import J, apply, formulas, opmath, value
from jaxdev.ops.registry import aten, numbers_as_data, register_functional

# --- ternary -------------------------------------------------------------------------------------


def _where(a, b, cond):
    return jnp.where(cond.astype(bool), a, b)  # a uint8 condition too; inside the program (eagerly ~15 us)


@register_functional(aten.where.self)
def where(condition, self, other):
    if condition.dtype not in (torch.bool, torch.uint8):
        raise RuntimeError(
            f"where expected condition to be a boolean tensor, but got a tensor with dtype {dtypes.scalar_name(condition.dtype)}"
        )
    common = torch.result_type(self, other)
    return apply(_where, common, common, (self, other), (J(condition),))


def _clamp(x, lo, hi):
    # The bounds arrive as they were given (numbers, or arrays of a tensor bound) and meet x's compute
    # dtype here, inside the program (eagerly, each conversion was a dispatch of its own).
    lo = None if lo is None else jnp.asarray(lo).astype(x.dtype)
    hi = None if hi is None else jnp.asarray(hi).astype(x.dtype)
    if lo is not None:
        x = jnp.where(jnp.isnan(x) | (x >= lo), x, lo) if jnp.issubdtype(x.dtype, jnp.floating) else jnp.maximum(x, lo)
    if hi is not None:
        x = jnp.where(jnp.isnan(x) | (x <= hi), x, hi) if jnp.issubdtype(x.dtype, jnp.floating) else jnp.minimum(x, hi)
    return x


@register_functional(aten.clamp.default, aten.clamp.Tensor)
def clamp(self, min=None, max=None):
    if min is None and max is None:
        raise RuntimeError("torch.clamp: At least one of 'min' or 'max' must not be None")
    # A complex bound makes the result type complex, which CPU's clamp refuses first. (CPU's clamp_ and
    # clamp(out=) of a real tensor convert a complex Python scalar bound through double instead, a
    # RuntimeError when its imaginary part is not 0; this kernel serves all three and follows clamp.)
    bounds = (self, min, max)
    if any(isinstance(b, complex) or (isinstance(b, torch.Tensor) and b.dtype.is_complex) for b in bounds):
        raise NotImplementedError("clamp is not supported for complex types")
    common = self.dtype
    for bound in (min, max):
        if bound is not None:
            like = self if common is self.dtype else torch.empty(self.shape, dtype=common, device="meta")
            common = torch.result_type(like, bound)
    if common == torch.bool:  # CPU has no Bool clamp kernels; a tensor bound alone is maximum/minimum
        tensors = [isinstance(b, torch.Tensor) for b in (min, max) if b is not None]
        if len(tensors) == 2:
            name = "clamp_cpu" if all(tensors) else "clamp_scalar_cpu"
            raise NotImplementedError(f"\"{name}\" not implemented for 'Bool'")
        if not tensors[0]:
            name = "clamp_min_scalar_cpu" if max is None else "clamp_max_scalar_cpu"
            raise NotImplementedError(f"\"{name}\" not implemented for 'Bool'")
    for bound in (min, max):
        if bound is not None and not isinstance(bound, torch.Tensor):
            dtypes.check_scalar(bound, common)  # c10's checked Scalar::to<scalar_t>
    lo, hi = (None if b is None else value(b) for b in (min, max))
    if any(type(b) is int and not -(2**63) <= b < 2**63 for b in (lo, hi)):  # past a jit argument's int64
        c = opmath(dtypes.to_jax_dtype(common))
        lo, hi = (None if b is None else jnp.asarray(b).astype(c) for b in (lo, hi))
    return apply(_clamp, common, common, (self,), (lo, hi))


@register_functional(aten.clamp_min.default, aten.clamp_min.Tensor)
def clamp_min(self, min):
    return clamp(self, min, None)


@register_functional(aten.clamp_max.default, aten.clamp_max.Tensor)
def clamp_max(self, max):
    return clamp(self, None, max)


def _opmath(dtype: torch.dtype) -> torch.dtype:
    """The dtype CPU's kernels read a Scalar argument in: float for half precision."""
    return torch.float32 if dtype in (torch.float16, torch.bfloat16) else dtype


def _lerp_checks(self, end, weight) -> None:
    """CPU's lerp: end (and a weight of 1 or more dims) of self's dtype, a floating or complex self,
    a number weight that fits self's opmath type (jnp promoted, interpolated integers, and took 0.5j
    for a real weight)."""
    for name, other in (("end", end), ("weight", weight)):
        if isinstance(other, torch.Tensor) and (name == "end" or other.dim() > 0) and other.dtype != self.dtype:
            raise RuntimeError(
                f"expected dtype {dtypes.type_meta_name(self.dtype)} for `{name}` but got dtype "
                f"{dtypes.type_meta_name(other.dtype)}"
            )
    if not (self.dtype.is_floating_point or self.dtype.is_complex):
        kernel = "lerp_kernel_tensor" if isinstance(weight, torch.Tensor) else "lerp_kernel_scalar"
        raise NotImplementedError(f"\"{kernel}\" not implemented for '{dtypes.scalar_name(self.dtype)}'")
    if not isinstance(weight, torch.Tensor):
        dtypes.check_scalar(weight, _opmath(self.dtype))


@register_functional(aten.lerp.Scalar, aten.lerp.Tensor)
def lerp(self, end, weight):
    _lerp_checks(self, end, weight)
    common = self.dtype
    if not isinstance(weight, torch.Tensor):
        return apply(formulas.lerp_by_number, common, common, (self, end), (weight,))
    return apply(formulas.lerp, common, common, (self, end, weight))


@register_functional(aten.addcmul.default)
def addcmul(self, tensor1, tensor2, *, value=1):
    common = torch.promote_types(torch.result_type(tensor1, tensor2), self.dtype)
    dtypes.check_scalar(value, _opmath(common))  # c10's checked value.to<scalar_t>: int8 with 300 raises
    return apply(formulas.addcmul, common, common, (self, tensor1, tensor2), (_as_scalar_t(value, common),))


def _as_scalar_t(value, dtype: torch.dtype):
    """`value` as CPU's kernels read it (value.to<scalar_t>()): truncated toward zero for an integer
    dtype (addcmul of int64 tensors with value=1.9 multiplies by 1)."""
    if isinstance(value, float) and not (dtype.is_floating_point or dtype.is_complex or dtype == torch.bool):
        return int(value)
    return value


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
    return apply(formulas.addcdiv, common, common, (self, tensor1, tensor2), (value,))


# value and a number weight reach the jitted bodies as they are (fused eager lifts them: registry.DYNAMIC_NUMBERS)
numbers_as_data(("value",), aten.addcmul.default, aten.addcdiv.default)
numbers_as_data((2,), aten.lerp.Scalar)


def _triangle(keep):
    def kernel(self, diagonal=0):
        x = J(self)
        if x.ndim < 2:
            raise RuntimeError(f"{keep.__name__}: input tensor must have at least 2 dimensions")
        return keep(x, diagonal)

    return kernel


register_functional(aten.triu.default)(_triangle(jnp.triu))
register_functional(aten.tril.default)(_triangle(jnp.tril))
