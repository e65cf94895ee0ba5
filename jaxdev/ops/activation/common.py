"""What the activation kernels share: CPU's float-only refusal, a typed zero, and the kernel factories
of a formula applied to (x, *scalars) and of its gradient (grad_output, x, *scalars)."""

from __future__ import annotations

import jax.numpy as jnp

from jaxdev import dtypes
from jaxdev.ops.kit import apply
from jaxdev.ops.registry import register_functional


def floating_only(name, t):
    if not (t.dtype.is_floating_point or t.dtype.is_complex):
        raise NotImplementedError(f"\"{name}\" not implemented for '{dtypes.scalar_name(t.dtype)}'")


def zero_like(x):
    return jnp.zeros((), x.dtype)


def register_unary(op, fn, name):
    @register_functional(op)
    def kernel(self, *scalars):
        floating_only(name, self)
        return apply(fn, self.dtype, self.dtype, (self,), scalars)


def register_unary_backward(op, fn):
    @register_functional(op)
    def kernel(grad_output, self, *scalars):
        return apply(fn, self.dtype, self.dtype, (grad_output, self), scalars)
