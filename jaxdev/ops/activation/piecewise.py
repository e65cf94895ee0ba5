"""Piecewise-linear activations and their backward kernels: threshold (relu's backward), hardtanh,
leaky_relu, hardsigmoid, hardswish, softshrink/hardshrink, prelu and rrelu (its slopes drawn per call).
The comparisons at the kinks are CPU's, so gradients there agree."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import torch

from jaxdev import dtypes, rng, tensor
from jaxdev.ops.activation.common import floating_only, register_unary, register_unary_backward, zero_like
from jaxdev.ops.kit import J, apply, cpu_numerics, each_location_once, jitted, opmath
from jaxdev.ops.kit.cpu_numerics import divide
from jaxdev.ops.registry import aten, register, register_backward, register_functional, store_into


def _hardtanh(x, lo, hi):
    return jnp.minimum(jnp.maximum(x, jnp.asarray(lo, x.dtype)), jnp.asarray(hi, x.dtype))


def _hardtanh_grad(g, x, lo, hi):
    return jnp.where((x <= lo) | (x >= hi), zero_like(g), g)


def _leaky_relu(x, slope):
    return jnp.where(x > 0, x, x * slope)


def _leaky_relu_grad(g, x, slope):
    return jnp.where(x > 0, g, g * slope)


def _by(v, k: int):
    """v / k as a true division: behind the barrier where the platform divides as IEEE does (XLA would
    multiply by 1/k: 29,838 of 100k float32 hardswish values and 31,761 of its gradients an ulp off
    CPU's), IEEE's through division.divide where it does not (a TPU)."""
    if cpu_numerics.division_ieee():
        return cpu_numerics.divide_by(v, k)
    return divide(v, jnp.asarray(k, v.dtype))


def _sixth(v):
    return _by(v, 6)


def _hardsigmoid(x):
    return _sixth(jnp.minimum(jnp.maximum(x + 3, zero_like(x)), jnp.asarray(6, x.dtype)))


def _hardsigmoid_grad(g, x):
    """CPU's: g * one_sixth, a float constant 1.0f / 6.0f in every dtype (for float64 0.1666666716...,
    not 1/6), a product, not a division."""
    return jnp.where((x > -3) & (x < 3), g * jnp.asarray(np.float32(1) / np.float32(6), g.dtype), zero_like(g))


def _hardswish(x):
    """CPU's order, x * min(max(x + 3, 0), 6) / 6: x * hardsigmoid(x) rounded differently (34,511 of
    100k float32 values an ulp off) and kept 3e38 where x * 6 overflows to CPU's inf."""
    return _sixth(x * jnp.minimum(jnp.maximum(x + 3, zero_like(x)), jnp.asarray(6, x.dtype)))


def _hardswish_grad(g, x):
    # x / 3 a true division (_by): x / 3 + 1/2 cancels near x = -3/2
    # CPU's masks: x <= -3 gives 0, x >= 3 gives g, anything else (NaN too) the middle
    return jnp.where(x <= -3, zero_like(g), jnp.where(x >= 3, g, g * (_by(x, 3) + 0.5)))


def _softshrink(x, lambd):
    # x * 0, not 0: NaN stays NaN (and -0.3 shrinks to -0.0), as on CPU.
    return jnp.where(x > lambd, x - lambd, jnp.where(x < -lambd, x + lambd, x * 0))


def _hardshrink(x, lambd):
    return jnp.where((x >= -lambd) & (x <= lambd), zero_like(x), x)


def _shrink_grad(g, x, lambd):
    return jnp.where((x >= -lambd) & (x <= lambd), zero_like(g), g)


@register_functional(aten.hardtanh.default)
def hardtanh(self, min_val=-1, max_val=1):
    if self.dtype == torch.bool:
        raise RuntimeError("Bool inputs not supported for hardtanh")
    return apply(_hardtanh, self.dtype, self.dtype, (self,), (min_val, max_val))


@register_functional(aten.hardtanh_backward.default)
def hardtanh_backward(grad_output, self, min_val, max_val):
    return apply(_hardtanh_grad, self.dtype, self.dtype, (grad_output, self), (min_val, max_val))


@register_functional(aten.leaky_relu.default)
def leaky_relu(self, negative_slope=0.01):
    floating_only("leaky_relu_cpu", self)
    return apply(_leaky_relu, self.dtype, self.dtype, (self,), (negative_slope,))


@register_functional(aten.leaky_relu_backward.default)
def leaky_relu_backward(grad_output, self, negative_slope, self_is_result):
    if self_is_result and negative_slope < 0:
        raise RuntimeError(
            "In-place leakyReLu backward calculation is triggered with a negative slope which is not "
            "supported. This is caused by calling in-place forward function with a negative slope, "
            "please call out-of-place version instead. File an issue at "
            "https://github.com/pytorch/pytorch if you do require supporting in-place leakRelu "
            "backward calculation with negative slope"
        )
    return apply(_leaky_relu_grad, self.dtype, self.dtype, (grad_output, self), (negative_slope,))


register_unary(aten.hardsigmoid.default, _hardsigmoid, "hardsigmoid_cpu")


register_unary(aten.hardswish.default, _hardswish, "hardswish_cpu")


register_unary_backward(aten.hardsigmoid_backward.default, _hardsigmoid_grad)


register_unary_backward(aten.hardswish_backward.default, _hardswish_grad)


register_unary_backward(aten.softshrink_backward.default, _shrink_grad)


register_unary_backward(aten.hardshrink_backward.default, _shrink_grad)


@register_functional(aten.softshrink.default)
def softshrink(self, lambd=0.5):
    if lambd < 0:
        raise RuntimeError(f"lambda must be greater or equal to 0, but found to be {lambd}.")
    floating_only("softshrink_cpu", self)
    return apply(_softshrink, self.dtype, self.dtype, (self,), (lambd,))


@register_functional(aten.hardshrink.default)
def hardshrink(self, lambd=0.5):
    floating_only("hardshrink_cpu", self)
    return apply(_hardshrink, self.dtype, self.dtype, (self,), (lambd,))


def _prelu(x, w):
    return jnp.where(x > 0, x, w * x)


@register_functional(aten._prelu_kernel.default)
def prelu(self, weight):
    floating_only("prelu_cpu", self)
    dt = torch.result_type(self, weight)
    return apply(_prelu, dt, dt, (self, weight))


register_backward(aten._prelu_kernel_backward.default, aten._prelu_kernel.default)


def _threshold_grad(g, x, t):
    return jnp.where(x <= t, jnp.zeros((), g.dtype), g)


def _threshold(x, t, v):
    return jnp.where(x <= t, jnp.asarray(v, x.dtype), x)


@register_functional(aten.threshold_backward.default)
def threshold_backward(grad_output, self, threshold):
    common = torch.result_type(grad_output, self)
    return apply(_threshold_grad, common, common, (grad_output, self), (threshold,))


@register_functional(aten.threshold.default, inplace=False)
def threshold(self, threshold, value):
    return apply(_threshold, self.dtype, self.dtype, (self,), (threshold, value))


@register(aten.threshold_.default)
def threshold_(self, threshold, value):
    """CPU's threshold_ skips TensorIterator's internal-overlap check: an expanded tensor is thresholded
    (each location once: every alias of it reads the same value and gets the same result)."""
    target = each_location_once(self)
    store_into(target, apply(_threshold, self.dtype, self.dtype, (target,), (threshold, value)), resize=False)
    return self


@jitted
def _rrelu_train(lower: float, upper: float, jdt, noise_jdt):
    c = opmath(jnp.dtype(jdt))

    def body(key, x):
        r = jax.random.uniform(key, x.shape, c, lower, upper)
        neg = x <= 0  # NaN is not: it passes with slope 1, as on CPU
        out = jnp.where(neg, x.astype(c) * r, x.astype(c)).astype(jdt)
        return out, jnp.where(neg, r, jnp.ones((), c)).astype(noise_jdt)

    return body


@register_functional(aten.rrelu_with_noise.default)
def rrelu_with_noise(self, noise, lower=0.125, upper=1 / 3, training=False, generator=None):
    """CPU's rule: training draws r ~ U(lower, upper) for each x <= 0 (output x * r, noise r) and
    writes noise 1 elsewhere; evaluation is leaky_relu with slope (lower + upper) / 2 and leaves
    noise alone. The draws come from the jax device's RNG, not CPU's stream."""
    if tuple(noise.shape) != tuple(self.shape):
        raise RuntimeError(
            "noise tensor shape must match self tensor shape. Got self.shape = "
            f"{list(self.shape)} noise.shape = {list(noise.shape)}"
        )
    if not training:
        return leaky_relu(self, (lower + upper) / 2)
    if self.dtype not in (torch.float32, torch.float64, torch.bfloat16):
        raise NotImplementedError(
            f"\"rrelu_with_noise_out_cpu\" not implemented for '{dtypes.scalar_name(self.dtype)}'"
        )
    if noise.dtype != self.dtype:
        raise RuntimeError(
            f"expected scalar type {dtypes.scalar_name(self.dtype)} but found {dtypes.scalar_name(noise.dtype)}"
        )
    if not lower <= upper:
        raise RuntimeError(
            "Expected from <= to to be true, but got false.  (Could this error message be improved?  "
            "If so, please report an enhancement request to PyTorch.)"
        )
    jdt = dtypes.to_jax_dtype(self.dtype)
    out, r = _rrelu_train(float(lower), float(upper), jdt, dtypes.to_jax_dtype(noise.dtype))(
        rng.next_key(generator), J(self)
    )
    tensor.write(noise, r)
    return out
