"""Smooth activations and their backward kernels: elu (celu/selu decompose to it), softplus, mish,
log_sigmoid, logit (half precision rounded as CPU rounds it), gelu (exact and tanh), silu, glu, and
sigmoid/tanh backward."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import torch

from jaxdev import dtypes
from jaxdev.ops.activation.common import floating_only, register_unary, register_unary_backward, zero_like
from jaxdev.ops.kit import J, apply, jitted, opmath, wrap_dim
from jaxdev.ops.kit import transcendentals as tm
from jaxdev.ops.kit.cpu_arithmetic import fmadd
from jaxdev.ops.kit.cpu_numerics import round_to
from jaxdev.ops.kit.division import divide
from jaxdev.ops.registry import aten, register_backward, register_functional


def _elu(x, alpha, scale, input_scale):
    return jnp.where(x > 0, x * scale, tm.expm1(x * input_scale) * (alpha * scale))


def _elu_grad_from_input(g, x, alpha, scale, input_scale):
    return jnp.where(x > 0, g * scale, g * input_scale * scale * alpha * tm.exp(x * input_scale))


def _elu_grad_from_result(g, y, alpha, scale, input_scale):
    return jnp.where(y > 0, g * scale, g * input_scale * (y + alpha * scale))


def _softplus(x, beta, threshold):
    # beta reaches the program as a value, not a constant XLA could fold: a TPU's division by it was
    # 2 ulps off (mish's gradient, which cancels near x = -1.19, 3.7x plain's there), IEEE's divide's
    return jnp.where(x * beta > threshold, x, divide(tm.log1p(tm.exp(x * beta)), beta))


def _softplus_grad(g, x, beta, threshold):
    z = tm.exp(x * beta)
    return jnp.where(x * beta > threshold, g, divide(g * z, z + 1))


def _mish(x):
    return x * tm.tanh(tm.softplus(x))


def _log_sigmoid(x):
    """CPU's form: min(0, x) - log1p(exp(-|x|)) (log_sigmoid(+inf) is +0, as there)."""
    return jnp.minimum(jnp.zeros((), x.dtype), x) - tm.log1p(tm.exp(-jnp.abs(x)))


def _log_sigmoid_grad(g, x):
    return g * tm.sigmoid(-x)


def _logit(x, eps):
    if eps is not None:
        x = jnp.clip(x, eps, 1 - eps)
    return tm.log(divide(x, 1 - x))  # IEEE's quotient where the platform's is not: log of ~1 magnifies it


def _logit_rounded(x, eps, half):
    """CPU's bfloat16/float16 logit is Vectorized<half> arithmetic: 1 - x, the division and the log
    each round to the half dtype (as do eps and 1 - eps, the clamp bounds)."""

    rounded = round_to(half)
    if eps is not None:
        lo = rounded(jnp.asarray(eps, x.dtype))  # c10 makes the half of a double through float
        x = jnp.clip(x, lo, rounded(1 - lo))
    return tm.log(rounded(x / rounded(1 - x)))


def _logit_bfloat16(x, eps):
    return _logit_rounded(x, eps, jnp.bfloat16)


def _logit_float16(x, eps):
    return _logit_rounded(x, eps, jnp.float16)


def _logit_grad(g, x, eps):
    if eps is None:
        return jnp.where((x < 0) | (x > 1), jnp.nan, divide(g, x * (1 - x)))
    return jnp.where((x < eps) | (x > 1 - eps), zero_like(g), divide(g, x * (1 - x)))


@register_functional(aten.elu.default)
def elu(self, alpha=1, scale=1, input_scale=1):
    floating_only("elu_cpu", self)
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


register_unary(aten.mish.default, _mish, "mish_cpu")


register_unary_backward(aten.softplus_backward.default, _softplus_grad)


@register_functional(aten.softplus.default)
def softplus(self, beta=1, threshold=20):
    floating_only("softplus_cpu", self)
    return apply(_softplus, self.dtype, self.dtype, (self,), (beta, threshold))


@register_functional(aten.logit.default)
def logit(self, eps=None):
    if self.dtype.is_complex:  # CPU's logit dispatches real floating_only types only
        raise NotImplementedError(f"\"logit_cpu\" not implemented for '{dtypes.scalar_name(self.dtype)}'")
    dt = self.dtype if self.dtype.is_floating_point else torch.get_default_dtype()
    body = {torch.bfloat16: _logit_bfloat16, torch.float16: _logit_float16}.get(dt, _logit)
    return apply(body, dt, dt, (self,), (eps,))


@register_functional(aten.logit_backward.default)
def logit_backward(grad_output, self, eps=None):
    return apply(_logit_grad, self.dtype, self.dtype, (grad_output, self), (eps,))


@register_functional(aten.log_sigmoid_forward.default)
def log_sigmoid_forward(self):
    floating_only("log_sigmoid_forward_cpu", self)
    y = apply(_log_sigmoid, self.dtype, self.dtype, (self,))
    return y, apply(_log_sigmoid_buffer, self.dtype, self.dtype, (self,))


def _log_sigmoid_buffer(x):
    """CPU's buffer (its backward reads it): exp(-|x|), in opmath."""
    return tm.exp(-jnp.abs(x))


@register_functional(aten.log_sigmoid_backward.default)
def log_sigmoid_backward(grad_output, self, buffer):
    return apply(_log_sigmoid_grad, self.dtype, self.dtype, (grad_output, self))


@jitted
def _glu(axis, compute):
    def fwd(x):
        a, b = jnp.split(x.astype(compute), 2, axis=axis)
        return (a * tm.sigmoid(b)).astype(x.dtype)

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
    floating_only("glu", self)
    return _glu(_glu_axis(self, dim), opmath(dtypes.to_jax_dtype(self.dtype)))(J(self))


register_backward(aten.glu_backward.default, aten.glu.default)


@register_functional(aten.gelu.default)
def gelu(self, *, approximate="none"):
    if approximate not in ("none", "tanh"):
        raise RuntimeError("approximate argument must be either none or tanh.")
    fn = _gelu_tanh if approximate == "tanh" else _gelu_exact
    return apply(fn, self.dtype, self.dtype, (self,))


def _gelu_exact(x):
    return tm.gelu(x, approximate=False)


def _gelu_tanh(x):
    return tm.gelu(x, approximate=True)


def _gelu_exact_grad(g, x):
    cdf = 0.5 * (1 + tm.erf(x / jnp.sqrt(2.0).astype(x.dtype)))
    pdf = tm.exp(-0.5 * x * x) / jnp.sqrt(2 * jnp.pi).astype(x.dtype)
    return g * (cdf + x * pdf)


def _gelu_tanh_grad(g, x):
    return g * jax.grad(lambda v: jnp.sum(tm.gelu(v, approximate=True)))(x)


@register_functional(aten.gelu_backward.default)
def gelu_backward(grad_output, self, *, approximate="none"):
    fn = _gelu_tanh_grad if approximate == "tanh" else _gelu_exact_grad
    return apply(fn, self.dtype, self.dtype, (grad_output, self))


def _silu(x):
    """CPU's formula, x / (1 + exp(-x)) (its division IEEE's where the platform's is not: division.py),
    where x * sigmoid(x) loses x's last bits to a subnormal sigmoid (silu(-88) was -0.0, CPU -5.3e-37;
    XLA flushes subnormals) and is up to 3 ulps off across [-87, -17]."""
    if jnp.issubdtype(x.dtype, jnp.floating):
        return divide(x, 1 + tm.exp(-x))
    return x * tm.sigmoid(x)


@register_functional(aten.silu.default)
def silu(self):
    return apply(_silu, self.dtype, self.dtype, (self,))


def _silu_grad(g, x):
    s = tm.sigmoid(x)
    return g * s * fmadd(x, 1 - s, 1)  # CPU's 1 + x (1 - s) is one fused multiply-add


@register_functional(aten.silu_backward.default)
def silu_backward(grad_output, self):
    """CPU's kernel: dy * s * (1 + x (1 - s)) in float32 for half, rounded once; the composite
    (registry.FORMULA_COMPOSITES) rounds each of its five ops to float16 (1.4x tolerance from the
    float64 gradient where CPU is 0.26x)."""
    return apply(_silu_grad, self.dtype, self.dtype, (grad_output, self))


def _sigmoid_grad(g, y):
    slope = (1 - y) * y
    return g * (jnp.conj(slope) if jnp.iscomplexobj(slope) else slope)


def _tanh_grad(g, y):
    slope = 1 - y * y if jnp.iscomplexobj(y) else fmadd(-y, y, 1)  # CPU's 1 - y^2: one fused multiply-add
    return g * (jnp.conj(slope) if jnp.iscomplexobj(slope) else slope)


@register_functional(aten.sigmoid_backward.default)
def sigmoid_backward(grad_output, output):
    return apply(_sigmoid_grad, output.dtype, output.dtype, (grad_output, output))


@register_functional(aten.tanh_backward.default)
def tanh_backward(grad_output, output):
    return apply(_tanh_grad, output.dtype, output.dtype, (grad_output, output))
