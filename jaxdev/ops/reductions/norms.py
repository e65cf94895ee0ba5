"""Norms: linalg.vector_norm (and its value function, which foreach's _foreach_norm runs too),
torch.norm's aten overloads and renorm."""

from __future__ import annotations

import jax.numpy as jnp
import torch

from jaxdev import dtypes
from jaxdev.ops.kit import J, axes, jitted, wrap_dim
from jaxdev.ops.kit.formulas import vector_norm_value
from jaxdev.ops.registry import aten, register_functional


def _check_norm_dtype(self, dtype):
    if dtype.is_complex and not self.dtype.is_complex:
        raise RuntimeError(
            f"linalg.vector_norm: dtype should be real for real inputs, but got {dtypes.scalar_name(dtype)}"
        )
    if self.dtype.is_complex and not dtype.is_complex:
        raise RuntimeError(
            f"linalg.vector_norm: dtype should be complex for complex inputs, but got {dtypes.scalar_name(dtype)}"
        )
    if torch.promote_types(self.dtype, dtype) != dtype:
        raise RuntimeError(
            f"linalg.vector_norm: the dtype of the input ({dtypes.scalar_name(self.dtype)}) should be convertible "
            f"without narrowing to the specified dtype ({dtypes.scalar_name(dtype)})"
        )


@register_functional(aten.linalg_vector_norm.default)
def vector_norm(self, ord=2, dim=None, keepdim=False, *, dtype=None):
    if not (self.dtype.is_floating_point or self.dtype.is_complex):
        raise RuntimeError(
            f"linalg.vector_norm: Expected a floating point or complex tensor as input. Got {dtypes.scalar_name(self.dtype)}"
        )
    ax = axes(dim, self.dim())
    _check_norm_identity(self, ord, dim)
    if dtype is not None:
        _check_norm_dtype(self, dtype)
    src = dtype or self.dtype
    return _vector_norm(ord, ax, bool(keepdim), src)(J(self))


@jitted
def _vector_norm(ord, ax, keepdim, src):
    """vector_norm_value as one program (eagerly its abs, power, sum and root were ~50 us)."""
    return lambda values: vector_norm_value(values, ord, ax, keepdim, src)


def _check_norm_identity(self, ord, dim) -> None:
    """CPU's error for the inf norm or a negative one (a min or max, or a sum of infinities) over no
    elements, which has no identity: jnp raised its own ValueError. The dim is named as given (and the
    missing space after it is CPU's)."""
    if self.numel() != 0 or not (ord < 0 or ord == float("inf")):
        return
    dims = [dim] if isinstance(dim, int) else list(dim or ())
    if not dims:
        raise RuntimeError(
            f"linalg.vector_norm cannot compute the {ord:g} norm on an empty tensor because the operation "
            "does not have an identity"
        )
    for d in dims:
        if self.dim() > 0 and self.shape[d] == 0:
            raise RuntimeError(
                f"linalg.vector_norm cannot compute the {ord:g} norm on the dimension {d}because this dimension "
                "is empty and the operation does not have an identity"
            )


def _norm(self, p, dim, keepdim, dtype):
    if not (self.dtype.is_floating_point or self.dtype.is_complex):
        raise RuntimeError(
            f"norm(): input dtype should be either floating point or complex. Got {dtypes.scalar_name(self.dtype)} instead."
        )
    if dtype is not None:
        if not (dtype.is_floating_point or dtype.is_complex):
            raise RuntimeError(
                "norm(): the desired output dtype should be either floating point or complex. "
                f"Got {dtypes.scalar_name(dtype)} instead."
            )
        _check_norm_dtype(self, dtype)
        if dtype.is_complex:  # CPU's norm writes a real result into a complex-typed out and refuses it
            real = {torch.complex64: "float", torch.complex128: "double"}.get(dtype, str(dtype.to_real()))
            raise RuntimeError(f"Expected out tensor to have dtype {real}, but got c10::complex<{real}> instead")
    return vector_norm(self, 2 if p is None else p, dim, keepdim, dtype=dtype)


@register_functional(aten.norm.ScalarOpt_dim)
def norm_dim(self, p, dim, keepdim=False):
    return _norm(self, p, dim, keepdim, None)


@register_functional(aten.norm.ScalarOpt_dim_dtype)
def norm_dim_dtype(self, p, dim, keepdim, *, dtype):
    return _norm(self, p, dim, keepdim, dtype)


@register_functional(aten.norm.Scalar)
def norm_all(self, p=2):
    return _norm(self, p, None, False, None)


@register_functional(aten.norm.ScalarOpt_dtype)
def norm_all_dtype(self, p, *, dtype):
    return _norm(self, p, None, False, dtype)


def _renorm_factor(norm, maxnorm):
    """CPU's scale: maxnorm / (norm + 1e-7) where the norm exceeds maxnorm, else 1."""
    return jnp.where(norm > maxnorm, maxnorm / (norm + jnp.asarray(1e-7, norm.dtype)), jnp.ones((), norm.dtype))


@register_functional(aten.renorm.default)
def renorm(self, p, dim, maxnorm):
    if self.dim() <= 1:
        raise RuntimeError(f"renorm: input needs at least 2 dimensions, got {self.dim()} dimensions")
    if p <= 0:
        raise RuntimeError("renorm: non-positive-norm not supported")
    if maxnorm < 0:
        raise RuntimeError(f"renorm: expected maxnorm to be >= 0 but got {maxnorm:g}")
    d = wrap_dim(dim, self.dim())
    others = [i for i in range(self.dim()) if i != d]
    acc = torch.float32 if self.dtype in (torch.float16, torch.bfloat16) else None
    norm = vector_norm(self, p, others, True, dtype=acc)
    # the factor is held in the input's dtype (complex inputs: a complex factor), then multiplies
    factor = _renorm_factor(norm, jnp.asarray(maxnorm, norm.dtype)).astype(dtypes.to_jax_dtype(self.dtype))
    return J(self) * factor
