"""Neural-network ops reached by torch.nn and its autograd formulas: softmax, activations and
their backward kernels, dropout."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import torch

from jaxdev import dtypes, rng
from jaxdev.ops.registry import aten, register_functional
from jaxdev.ops.toolkit import J, apply, compiled, opmath, wrap_dim


def _softmax_body(x, fn, axis, compute, result):
    x = x.astype(compute)
    if x.ndim == 0:
        return fn(x[None], axis=0)[0].astype(result)
    return fn(x, axis=axis).astype(result)


def _softmax_like(fn, self, dim, half_to_float):
    result = dtypes.to_jax_dtype(torch.float32 if half_to_float else self.dtype)
    axis = wrap_dim(dim, self.dim())
    return compiled(_softmax_body, fn, axis, opmath(dtypes.to_jax_dtype(self.dtype)), result)(J(self))


@register_functional(aten._softmax.default)
def softmax(self, dim, half_to_float):
    return _softmax_like(jax.nn.softmax, self, dim, half_to_float)


@register_functional(aten._log_softmax.default)
def log_softmax(self, dim, half_to_float):
    return _softmax_like(jax.nn.log_softmax, self, dim, half_to_float)


def _softmax_grad(g, y, axis, result):
    c = opmath(g.dtype)
    g, y = g.astype(c), y.astype(c)
    return (y * (g - jnp.sum(g * y, axis=axis, keepdims=True))).astype(result)


def _log_softmax_grad(g, y, axis, result):
    c = opmath(g.dtype)
    g, y = g.astype(c), y.astype(c)
    return (g - jnp.exp(y) * jnp.sum(g, axis=axis, keepdims=True)).astype(result)


@register_functional(aten._softmax_backward_data.default)
def softmax_backward(grad_output, output, dim, input_dtype):
    axis = wrap_dim(dim, output.dim()) if output.dim() else None
    return compiled(_softmax_grad, axis, dtypes.to_jax_dtype(input_dtype))(J(grad_output), J(output))


@register_functional(aten._log_softmax_backward_data.default)
def log_softmax_backward(grad_output, output, dim, input_dtype):
    axis = wrap_dim(dim, output.dim()) if output.dim() else None
    return compiled(_log_softmax_grad, axis, dtypes.to_jax_dtype(input_dtype))(J(grad_output), J(output))


def _threshold_grad(g, x, t):
    return jnp.where(x <= t, jnp.zeros((), g.dtype), g)


def _threshold(x, t, v):
    return jnp.where(x <= t, jnp.asarray(v, x.dtype), x)


@register_functional(aten.threshold_backward.default)
def threshold_backward(grad_output, self, threshold):
    common = torch.result_type(grad_output, self)
    return apply(_threshold_grad, common, common, (grad_output, self), (threshold,))


@register_functional(aten.threshold.default)
def threshold(self, threshold, value):
    return apply(_threshold, self.dtype, self.dtype, (self,), (threshold, value))


@register_functional(aten.gelu.default)
def gelu(self, *, approximate="none"):
    if approximate not in ("none", "tanh"):
        raise RuntimeError("approximate argument must be either none or tanh.")
    fn = _gelu_tanh if approximate == "tanh" else _gelu_exact
    return apply(fn, self.dtype, self.dtype, (self,))


def _gelu_exact(x):
    return jax.nn.gelu(x, approximate=False)


def _gelu_tanh(x):
    return jax.nn.gelu(x, approximate=True)


def _gelu_exact_grad(g, x):
    cdf = 0.5 * (1 + jax.scipy.special.erf(x / jnp.sqrt(2.0).astype(x.dtype)))
    pdf = jnp.exp(-0.5 * x * x) / jnp.sqrt(2 * jnp.pi).astype(x.dtype)
    return g * (cdf + x * pdf)


def _gelu_tanh_grad(g, x):
    return g * jax.grad(lambda v: jnp.sum(jax.nn.gelu(v, approximate=True)))(x)


@register_functional(aten.gelu_backward.default)
def gelu_backward(grad_output, self, *, approximate="none"):
    fn = _gelu_tanh_grad if approximate == "tanh" else _gelu_exact_grad
    return apply(fn, self.dtype, self.dtype, (grad_output, self))


def _silu(x):
    return x * jax.nn.sigmoid(x)


@register_functional(aten.silu.default)
def silu(self):
    return apply(_silu, self.dtype, self.dtype, (self,))


def _sigmoid_grad(g, y):
    return g * (1 - y) * y


def _tanh_grad(g, y):
    return g * (1 - y * y)


@register_functional(aten.sigmoid_backward.default)
def sigmoid_backward(grad_output, output):
    return apply(_sigmoid_grad, output.dtype, output.dtype, (grad_output, output))


@register_functional(aten.tanh_backward.default)
def tanh_backward(grad_output, output):
    return apply(_tanh_grad, output.dtype, output.dtype, (grad_output, output))


@register_functional(aten.native_dropout.default)
def native_dropout(input, p, train):
    x = J(input)
    if not train or p == 0:
        return x, jnp.ones(x.shape, jnp.bool_)
    if p == 1:
        return jnp.zeros_like(x), jnp.zeros(x.shape, jnp.bool_)
    mask = jax.random.bernoulli(rng.next_key(), 1.0 - p, x.shape)
    c = opmath(x.dtype)
    return (x.astype(c) * mask / (1.0 - p)).astype(x.dtype), mask


@register_functional(aten.native_dropout_backward.default)
def native_dropout_backward(grad_output, mask, scale):
    g = J(grad_output)
    return (g.astype(opmath(g.dtype)) * J(mask) * scale).astype(g.dtype)
