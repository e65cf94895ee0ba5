"""softmax and log_softmax, with their backward kernels: each body jitted whole, reduced in float32
for half precision (`half_to_float` as PyTorch's flag)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import torch

from jaxdev import dtypes
from jaxdev.ops.kit import J, compiled, on_views, opmath, wrap_dim
from jaxdev.ops.kit import transcendentals as tm
from jaxdev.ops.kit.cpu_numerics import round_to
from jaxdev.ops.kit.half_results import rounded_to
from jaxdev.ops.registry import aten, register_functional


def _softmax_body(x, fn, axis, compute, result):
    x = x.astype(compute)
    with rounded_to(result):  # a bfloat16 result may take the platform's exp and log (half_results.py)
        if x.ndim == 0:
            return fn(x[None], axis=0)[0].astype(result)
        return fn(x, axis=axis).astype(result)


def _no_case(name: str, self, axis: int) -> None:
    """CPU's softmax kernels have floating cases alone (jnp computed integer softmax in the integer
    dtype, and complex ones); an empty input never reaches them. The kernel's name says whether the
    dim is the last one."""
    if self.numel() != 0 and not self.dtype.is_floating_point:
        kernel = f"{name}_lastdim_kernel_impl" if axis == max(self.dim() - 1, 0) else f"{name}_kernel_impl"
        raise NotImplementedError(f"\"{kernel}\" not implemented for '{dtypes.scalar_name(self.dtype)}'")


def _softmax_like(fn, self, dim, half_to_float):
    result = dtypes.to_jax_dtype(torch.float32 if half_to_float else self.dtype)
    axis = wrap_dim(dim, self.dim())
    _no_case("softmax" if fn is tm.softmax else "log_softmax", self, axis)
    return on_views(compiled(_softmax_body, fn, axis, opmath(dtypes.to_jax_dtype(self.dtype)), result), (self,))


@register_functional(aten._softmax.default)
def softmax(self, dim, half_to_float):
    return _softmax_like(tm.softmax, self, dim, half_to_float)


def _log_softmax_lastdim_half(x):
    """CPU's last-dimension kernel for bfloat16/float16 (LogSoftmaxKernelImpl.h) keeps the row's
    max and sum in arrays of the input dtype: the float32 sum of exp(x - max) rounds to it, its log
    rounds again, and only then x - max - log(sum) is taken in float32 and rounded."""
    f32 = jnp.float32
    if x.size == 0:  # an empty row: jnp.max has no identity to give (CPU's result is empty)
        return x
    rounded = round_to(x.dtype)
    xf = x.astype(f32)
    m = jnp.max(xf, axis=-1, keepdims=True)
    with rounded_to(x.dtype):
        log_sum = rounded(tm.log(rounded(jnp.sum(tm.exp(xf - m), axis=-1, keepdims=True))))
    return (xf - m - log_sum).astype(x.dtype)


@register_functional(aten._log_softmax.default)
def log_softmax(self, dim, half_to_float):
    axis = wrap_dim(dim, self.dim())
    _no_case("log_softmax", self, axis)
    if self.dtype in (torch.bfloat16, torch.float16) and not half_to_float and axis == max(self.dim() - 1, 0):
        x = J(self)
        return compiled(_log_softmax_lastdim_half)(x.reshape(x.shape or (1,))).reshape(x.shape)
    return _softmax_like(tm.log_softmax, self, dim, half_to_float)


def _softmax_grad(g, y, axis, result):
    c = opmath(g.dtype)
    g, y = g.astype(c), y.astype(c)
    return (y * (g - jnp.sum(g * y, axis=axis, keepdims=True))).astype(result)


def _log_softmax_grad(g, y, axis, result):
    """g - exp(y) sum(g). Where exp is jaxdev's own (tm.own: tens of operations an element, a TPU's
    default) the result waits behind a barrier, computed once: XLA's TPU compiler recomputed it inside
    each product that reads it, the LM head's input and weight gradients (0.48 and 0.61 M estimated
    cycles, 0.28 and 0.32 M reading it; issue 37). A barrier computes nothing: the same values."""
    c = opmath(g.dtype)
    g, y = g.astype(c), y.astype(c)
    with rounded_to(result):
        out = (g - tm.exp(y) * jnp.sum(g, axis=axis, keepdims=True)).astype(result)
        return jax.lax.optimization_barrier(out) if tm.own_exp(y) else out


@register_functional(aten._softmax_backward_data.default)
def softmax_backward(grad_output, output, dim, input_dtype):
    axis = wrap_dim(dim, output.dim()) if output.dim() else None
    return on_views(compiled(_softmax_grad, axis, dtypes.to_jax_dtype(input_dtype)), (grad_output, output))


@register_functional(aten._log_softmax_backward_data.default)
def log_softmax_backward(grad_output, output, dim, input_dtype):
    axis = wrap_dim(dim, output.dim()) if output.dim() else None
    return on_views(compiled(_log_softmax_grad, axis, dtypes.to_jax_dtype(input_dtype)), (grad_output, output))
