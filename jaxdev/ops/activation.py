"""Activation functions of torch.nn, with the `*_backward` kernels their autograd formulas call:
threshold (relu's backward), gelu, silu, sigmoid/tanh backward, hardtanh, leaky_relu, elu
(celu/selu decompose to it), hardsigmoid, hardswish, softplus, mish, softshrink/hardshrink,
log_sigmoid, logit, glu, prelu (mish_backward is CompositeImplicitAutograd: it decomposes; silu_backward
is too, but has CPU's kernel here: registry.FORMULA_COMPOSITES).

Each formula is PyTorch's CPU kernel's (same comparisons at the boundaries, so gradients at the
kinks agree); float16/bfloat16 compute in float32 through `apply`'s opmath.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import torch

from jaxdev import dtypes, rng, tensor
from jaxdev.ops.cpu_numerics import round_to
from jaxdev.ops.registry import aten, register, register_backward, register_functional, store_into
from jaxdev.ops.toolkit import J, apply, each_location_once, jitted, opmath, wrap_dim


def _floating(name, t):
    if not (t.dtype.is_floating_point or t.dtype.is_complex):
        raise NotImplementedError(f"\"{name}\" not implemented for '{dtypes.scalar_name(t.dtype)}'")


def _zero(x):
    return jnp.zeros((), x.dtype)


# --- forward formulas (x first, then the op's scalars) ------------------------------------------


def _hardtanh(x, lo, hi):
    return jnp.minimum(jnp.maximum(x, jnp.asarray(lo, x.dtype)), jnp.asarray(hi, x.dtype))


def _hardtanh_grad(g, x, lo, hi):
    return jnp.where((x <= lo) | (x >= hi), _zero(g), g)


def _leaky_relu(x, slope):
    return jnp.where(x > 0, x, x * slope)


def _leaky_relu_grad(g, x, slope):
    return jnp.where(x > 0, g, g * slope)


def _elu(x, alpha, scale, input_scale):
    return jnp.where(x > 0, x * scale, jnp.expm1(x * input_scale) * (alpha * scale))


def _elu_grad_from_input(g, x, alpha, scale, input_scale):
    return jnp.where(x > 0, g * scale, g * input_scale * scale * alpha * jnp.exp(x * input_scale))


def _elu_grad_from_result(g, y, alpha, scale, input_scale):
    return jnp.where(y > 0, g * scale, g * input_scale * (y + alpha * scale))


def _hardsigmoid(x):
    return jnp.minimum(jnp.maximum(x + 3, _zero(x)), jnp.asarray(6, x.dtype)) / 6


def _hardsigmoid_grad(g, x):
    return jnp.where((x > -3) & (x < 3), g / 6, _zero(g))


def _hardswish(x):
    return x * _hardsigmoid(x)


def _hardswish_grad(g, x):
    return jnp.where(x <= -3, _zero(g), jnp.where(x < 3, g * (x / 3 + 0.5), g))


def _softplus(x, beta, threshold):
    return jnp.where(x * beta > threshold, x, jnp.log1p(jnp.exp(x * beta)) / beta)


def _softplus_grad(g, x, beta, threshold):
    z = jnp.exp(x * beta)
    return jnp.where(x * beta > threshold, g, g * z / (z + 1))


def _mish(x):
    return x * jnp.tanh(jax.nn.softplus(x))


def _softshrink(x, lambd):
    # x * 0, not 0: NaN stays NaN (and -0.3 shrinks to -0.0), as on CPU.
    return jnp.where(x > lambd, x - lambd, jnp.where(x < -lambd, x + lambd, x * 0))


def _hardshrink(x, lambd):
    return jnp.where((x >= -lambd) & (x <= lambd), _zero(x), x)


def _shrink_grad(g, x, lambd):
    return jnp.where((x >= -lambd) & (x <= lambd), _zero(g), g)


def _log_sigmoid(x):
    """CPU's form: min(0, x) - log1p(exp(-|x|)) (log_sigmoid(+inf) is +0, as there)."""
    return jnp.minimum(jnp.zeros((), x.dtype), x) - jnp.log1p(jnp.exp(-jnp.abs(x)))


def _log_sigmoid_grad(g, x):
    return g * jax.nn.sigmoid(-x)


def _logit(x, eps):
    if eps is not None:
        x = jnp.clip(x, eps, 1 - eps)
    return jnp.log(x / (1 - x))


def _logit_rounded(x, eps, half):
    """CPU's bfloat16/float16 logit is Vectorized<half> arithmetic: 1 - x, the division and the log
    each round to the half dtype (as do eps and 1 - eps, the clamp bounds)."""

    rounded = round_to(half)
    if eps is not None:
        lo = jnp.asarray(eps, half).astype(x.dtype)
        x = jnp.clip(x, lo, rounded(1 - lo))
    return jnp.log(rounded(x / rounded(1 - x)))


def _logit_bfloat16(x, eps):
    return _logit_rounded(x, eps, jnp.bfloat16)


def _logit_float16(x, eps):
    return _logit_rounded(x, eps, jnp.float16)


def _logit_grad(g, x, eps):
    if eps is None:
        return jnp.where((x < 0) | (x > 1), jnp.nan, g / (x * (1 - x)))
    return jnp.where((x < eps) | (x > 1 - eps), _zero(g), g / (x * (1 - x)))


# --- registrations ------------------------------------------------------------------------------


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
    _floating("leaky_relu_cpu", self)
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


@register_functional(aten.elu.default)
def elu(self, alpha=1, scale=1, input_scale=1):
    _floating("elu_cpu", self)
    return apply(_elu, self.dtype, self.dtype, (self,), (alpha, scale, input_scale))


@register_functional(aten.elu_backward.default)
def elu_backward(grad_output, alpha, scale, input_scale, is_result, self_or_result):
    if is_result and alpha < 0:
        raise RuntimeError(
            "In-place elu backward calculation is triggered with a negative slope which is not "
            "supported. This is caused by calling in-place forward function with a negative slope, "
            "please call out-of-place version instead."
        )
    fn = _elu_grad_from_result if is_result else _elu_grad_from_input
    dt = self_or_result.dtype
    return apply(fn, dt, dt, (grad_output, self_or_result), (alpha, scale, input_scale))


def _unary(op, fn, name):
    @register_functional(op)
    def kernel(self, *scalars):
        _floating(name, self)
        return apply(fn, self.dtype, self.dtype, (self,), scalars)


def _unary_backward(op, fn):
    @register_functional(op)
    def kernel(grad_output, self, *scalars):
        return apply(fn, self.dtype, self.dtype, (grad_output, self), scalars)


_unary(aten.hardsigmoid.default, _hardsigmoid, "hardsigmoid_cpu")
_unary(aten.hardswish.default, _hardswish, "hardswish_cpu")
_unary(aten.mish.default, _mish, "mish_cpu")
_unary_backward(aten.hardsigmoid_backward.default, _hardsigmoid_grad)
_unary_backward(aten.hardswish_backward.default, _hardswish_grad)
_unary_backward(aten.softplus_backward.default, _softplus_grad)
_unary_backward(aten.softshrink_backward.default, _shrink_grad)
_unary_backward(aten.hardshrink_backward.default, _shrink_grad)


@register_functional(aten.softplus.default)
def softplus(self, beta=1, threshold=20):
    _floating("softplus_cpu", self)
    return apply(_softplus, self.dtype, self.dtype, (self,), (beta, threshold))


@register_functional(aten.softshrink.default)
def softshrink(self, lambd=0.5):
    if lambd < 0:
        raise RuntimeError(f"lambda must be greater or equal to 0, but found to be {lambd}.")
    _floating("softshrink_cpu", self)
    return apply(_softshrink, self.dtype, self.dtype, (self,), (lambd,))


@register_functional(aten.hardshrink.default)
def hardshrink(self, lambd=0.5):
    _floating("hardshrink_cpu", self)
    return apply(_hardshrink, self.dtype, self.dtype, (self,), (lambd,))


@register_functional(aten.logit.default)
def logit(self, eps=None):
    if self.dtype.is_complex:  # CPU's logit dispatches real floating types only
        raise NotImplementedError(f"\"logit_cpu\" not implemented for '{dtypes.scalar_name(self.dtype)}'")
    dt = self.dtype if self.dtype.is_floating_point else torch.get_default_dtype()
    body = {torch.bfloat16: _logit_bfloat16, torch.float16: _logit_float16}.get(dt, _logit)
    return apply(body, dt, dt, (self,), (eps,))


@register_functional(aten.logit_backward.default)
def logit_backward(grad_output, self, eps=None):
    return apply(_logit_grad, self.dtype, self.dtype, (grad_output, self), (eps,))


@register_functional(aten.log_sigmoid_forward.default)
def log_sigmoid_forward(self):
    _floating("log_sigmoid_forward_cpu", self)
    y = apply(_log_sigmoid, self.dtype, self.dtype, (self,))
    return y, apply(_log_sigmoid_buffer, self.dtype, self.dtype, (self,))


def _log_sigmoid_buffer(x):
    """CPU's buffer (its backward reads it): exp(-|x|), in opmath."""
    return jnp.exp(-jnp.abs(x))


@register_functional(aten.log_sigmoid_backward.default)
def log_sigmoid_backward(grad_output, self, buffer):
    return apply(_log_sigmoid_grad, self.dtype, self.dtype, (grad_output, self))


# --- glu: halves along a dim ----------------------------------------------------------------------


@jitted
def _glu(axis, compute):
    def fwd(x):
        a, b = jnp.split(x.astype(compute), 2, axis=axis)
        return (a * jax.nn.sigmoid(b)).astype(x.dtype)

    return fwd


def _glu_axis(self, dim):
    if self.dim() == 0:
        raise RuntimeError("glu does not support scalars because halving size must be even")
    a = wrap_dim(dim, self.dim())
    if self.shape[a] % 2:
        raise RuntimeError(f"Halving dimension must be even, but dimension {a} is size {self.shape[a]}")
    return a


@register_functional(aten.glu.default)
def glu(self, dim=-1):
    _floating("glu", self)
    return _glu(_glu_axis(self, dim), opmath(dtypes.to_jax_dtype(self.dtype)))(J(self))


register_backward(aten.glu_backward.default, aten.glu.default)


# --- prelu (torch.prelu has already reshaped the weight to broadcast along the channel dim) ------


def _prelu(x, w):
    return jnp.where(x > 0, x, w * x)


@register_functional(aten._prelu_kernel.default)
def prelu(self, weight):
    _floating("prelu_cpu", self)
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


def _silu_grad(g, x):
    s = jax.nn.sigmoid(x)
    return g * s * (1 + x * (1 - s))


@register_functional(aten.silu_backward.default)
def silu_backward(grad_output, self):
    """CPU's kernel: dy * s * (1 + x (1 - s)) in float32 for half, rounded once; the composite
    (registry.FORMULA_COMPOSITES) rounds each of its five ops to float16 (1.4x tolerance from the
    float64 gradient where CPU is 0.26x)."""
    return apply(_silu_grad, self.dtype, self.dtype, (grad_output, self))


# Complex gradients are conjugate (Wirtinger) derivatives: PyTorch multiplies by the conjugate slope.


def _sigmoid_grad(g, y):
    slope = (1 - y) * y
    return g * (jnp.conj(slope) if jnp.iscomplexobj(slope) else slope)


def _tanh_grad(g, y):
    slope = 1 - y * y
    return g * (jnp.conj(slope) if jnp.iscomplexobj(slope) else slope)


@register_functional(aten.sigmoid_backward.default)
def sigmoid_backward(grad_output, output):
    return apply(_sigmoid_grad, output.dtype, output.dtype, (grad_output, output))


@register_functional(aten.tanh_backward.default)
def tanh_backward(grad_output, output):
    return apply(_tanh_grad, output.dtype, output.dtype, (grad_output, output))


# --- rrelu (randomized leaky ReLU): the slope of each non-positive element drawn per call -----------


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
