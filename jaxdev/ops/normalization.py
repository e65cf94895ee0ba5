"""Batch norm and layer norm, forward and backward, with PyTorch's saved statistics:
batch norm saves the batch mean and 1/sqrt(biased var + eps) and updates running stats with the
unbiased variance; layer norm saves mean and rstd shaped like the input with normalized dims = 1.
Statistics are computed in float32 for float16/bfloat16 inputs, as on CPU.
"""

from __future__ import annotations

import math

import jax.numpy as jnp
import torch

from jaxdev import dtypes, tensor
from jaxdev.ops.kit import J, compiled, on_views, opmath
from jaxdev.ops.kit.cpu_numerics import divide_by, fma32, product32, round_to, wide
from jaxdev.ops.kit.formulas import layer_norm, rsqrt
from jaxdev.ops.registry import aten, register, register_functional


def _channel_shape(x):
    return (1, -1) + (1,) * (x.ndim - 2)


def _inv_std(var, eps):
    """CPU's InvStd: 1 / sqrt(var + eps), and 0 (not inf) when var and eps are both 0."""
    if eps != 0:
        return rsqrt(var + jnp.asarray(eps, var.dtype))
    return jnp.where(var != 0, rsqrt(var), jnp.zeros((), var.dtype))


def _check_batch_norm_dtypes(input, weight, bias, running_mean, running_var):
    """CPU's batch_norm_cpu dtype rules (mixed_type.h). Parameters share the input's dtype, or, where
    the first one given (weight, bias, running_mean, running_var in that order) differs from it, they
    are "mixed": every one float32 and the input bfloat16 or float16."""
    if not input.dtype.is_floating_point:
        raise NotImplementedError(f"\"batch_norm\" not implemented for '{dtypes.scalar_name(input.dtype)}'")
    params = [t for t in (weight, bias, running_mean, running_var) if t is not None]
    if not params:
        return
    if params[0].dtype != input.dtype:
        if any(t.dtype != torch.float32 for t in params):
            raise RuntimeError("mixed dtype (CPU): expect parameter to have scalar type of Float")
        if input.dtype not in (torch.bfloat16, torch.float16):
            raise RuntimeError("mixed dtype (CPU): all inputs must share same datatype.")
        return
    for t in params:
        if t.dtype != input.dtype:  # the kernel reads it as the input's type
            raise RuntimeError(
                f"expected scalar type {dtypes.scalar_name(input.dtype)} but found {dtypes.scalar_name(t.dtype)}"
            )


def _channel_reduction(x, input, training):
    """Batch norm's reduction axes (all but the channels), the channels' broadcast shape, and in
    training the count per channel, which CPU refuses to be 1 or less."""
    n = x.size // x.shape[1] if training else None
    if training and n <= 1:
        raise ValueError(f"Expected more than 1 value per channel when training, got input size {list(input.shape)}")
    return (0,) + tuple(range(2, x.ndim)), _channel_shape(x), n


def _batch_norm(input, weight, bias, running_mean, running_var, training, momentum, eps):
    _check_batch_norm_dtypes(input, weight, bias, running_mean, running_var)
    x = J(input)
    if x.dtype in (jnp.bfloat16, jnp.float16):
        return _batch_norm_half(x, input, weight, bias, running_mean, running_var, training, momentum, eps)
    c = opmath(x.dtype)
    xc = x.astype(c)
    axes, shape, n = _channel_reduction(x, input, training)
    if training:
        mean = jnp.mean(xc, axis=axes)
        var = jnp.mean(jnp.square(xc - mean.reshape(shape)), axis=axes)
        invstd = _inv_std(var, eps)
        for stat, new in ((running_mean, mean), (running_var, var * n / (n - 1))):
            if stat is not None:
                old = J(stat)
                tensor.write(stat, ((1 - momentum) * old.astype(c) + momentum * new).astype(old.dtype))
        save_mean, save_invstd = mean, invstd
    else:
        mean = J(running_mean).astype(c)
        invstd = rsqrt(J(running_var).astype(c) + eps)
        save_mean = save_invstd = jnp.zeros((0,), c)
    y = (xc - mean.reshape(shape)) * invstd.reshape(shape)
    if weight is not None:
        y = y * J(weight).astype(c).reshape(shape)
    if bias is not None:
        y = y + J(bias).astype(c).reshape(shape)
    return y.astype(x.dtype), save_mean, save_invstd


def _batch_norm_half(x, input, weight, bias, running_mean, running_var, training, momentum, eps):
    """CPU's bfloat16/float16 kernel (batch_norm_kernel.cpp), step by step. Statistics sum in float32
    (the variance's squares in float64: below). Every step gives these bits traced into one program
    too (fused eager), where XLA's CPU compiler contracts a product into the sum that uses it and
    makes a division by a constant a product with its reciprocal (product32, divide_by, wide).
    Its parameter dtype is the input's unless a parameter is float32 ("mixed type"), and the saved
    mean and invstd are stored in it, so the output is normalised with the *rounded* statistics:
    alpha = invstd * weight and beta = bias - mean * alpha in float32, then x * alpha + beta as one
    fused multiply-add (the vectorised loop's contraction), rounded to the input dtype (with float32
    parameters beta is a fused multiply-add as well). bfloat16
    parameters also keep the variance sum, the divisions by n and n - 1 (n itself rounded) and the
    running-average arithmetic in bfloat16, one rounding per c10::BFloat16 operation; float16 ones
    keep those in float32 and round only what they store (measured against CPU: bit-equal)."""
    f32 = jnp.dtype(jnp.float32)
    params = [t for t in (weight, bias, running_mean, running_var) if t is not None]
    mixed = any(t.dtype == torch.float32 for t in params)
    pdt = f32 if mixed else x.dtype
    per_op = pdt == jnp.bfloat16  # bfloat16 parameters: every statistic step rounds

    def rounded(v, dt=pdt):
        return round_to(dt)(v)

    xc = x.astype(f32)
    axes, shape, n = _channel_reduction(x, input, training)
    if training:
        mean = divide_by(jnp.sum(xc, axis=axes), n)
        # squares exact in float64 (where it is native), so a product contracted into the sum that
        # uses it (one program: fused eager's) changes nothing; its float32 sum was an ulp off
        # per-op mode's there in 24 of 40 draws. One rounding to float32 after the sum.
        centred = wide(xc - mean.reshape(shape))
        var_sum = jnp.sum(centred * centred, axis=axes).astype(f32)
        save_mean = rounded(mean)
        if per_op:
            var_sum = rounded(var_sum)
            var = rounded(divide_by(var_sum, rounded(jnp.float32(n))))
        else:
            var = divide_by(var_sum, n)
        save_invstd = rounded(_inv_std(var, eps))
        if per_op:
            mom = rounded(jnp.float32(momentum))
            keep = rounded(1 - mom)
            unbiased = rounded(divide_by(var_sum, rounded(jnp.float32(n - 1))))
            new_mean = lambda old: rounded(mom * save_mean) + rounded(keep * old)
            new_var = lambda old: product32(mom, unbiased) + rounded(keep * old)
        else:
            mom = jnp.float32(momentum)
            keep = 1 - mom
            unbiased = divide_by(var_sum, n - 1)
            new_mean = lambda old: product32(mom, mean) + product32(keep, old)
            new_var = lambda old: product32(mom, unbiased) + product32(keep, old)
        if running_mean is not None:
            old = J(running_mean)
            tensor.write(running_mean, new_mean(old.astype(f32)).astype(old.dtype))
        if running_var is not None:
            old = J(running_var)
            tensor.write(running_var, new_var(old.astype(f32)).astype(old.dtype))
        m, invstd = save_mean, save_invstd
        saved = (save_mean.astype(pdt), save_invstd.astype(pdt))
    else:
        m = J(running_mean).astype(f32)
        invstd = rsqrt(J(running_var).astype(f32) + jnp.float32(eps))
        saved = (jnp.zeros((0,), pdt), jnp.zeros((0,), pdt))
    alpha = invstd * J(weight).astype(f32) if weight is not None else invstd
    b = J(bias).astype(f32) if bias is not None else jnp.float32(0)
    # an exact product and one rounding: a fused multiply-add (cpu_numerics.fma32). float32
    # parameters: CPU's compiler contracts bias - mean * alpha too; half ones it does not, nor may XLA
    # in one program (product32)
    beta = fma32(-m, alpha, jnp.broadcast_to(b, alpha.shape)) if mixed else b - product32(m, alpha)
    y = fma32(xc, alpha.reshape(shape), beta.reshape(shape))
    return (y.astype(x.dtype), *saved)


@register_functional(aten.native_batch_norm.default)
def native_batch_norm(input, weight, bias, running_mean, running_var, training, momentum, eps):
    return _batch_norm(input, weight, bias, running_mean, running_var, training, momentum, eps)


@register(aten._native_batch_norm_legit.default)
def native_batch_norm_legit(input, weight, bias, running_mean, running_var, training, momentum, eps):
    return tuple(
        tensor.wrap(a) for a in _batch_norm(input, weight, bias, running_mean, running_var, training, momentum, eps)
    )


@register(aten._native_batch_norm_legit.no_stats)
def native_batch_norm_legit_no_stats(input, weight, bias, training, momentum, eps):
    return tuple(tensor.wrap(a) for a in _batch_norm(input, weight, bias, None, None, training, momentum, eps))


@register_functional(aten.native_batch_norm_backward.default)
def native_batch_norm_backward(
    grad_out, input, weight, running_mean, running_var, save_mean, save_invstd, train, eps, output_mask
):
    x, g = J(input), J(grad_out)
    c = opmath(x.dtype)
    x, g = x.astype(c), g.astype(c)
    axes = (0,) + tuple(range(2, x.ndim))
    shape = _channel_shape(x)
    if train:
        mean, invstd = J(save_mean).astype(c), J(save_invstd).astype(c)
    else:
        mean = J(running_mean).astype(c)
        invstd = rsqrt(J(running_var).astype(c) + eps)
    w = J(weight).astype(c) if weight is not None else jnp.ones_like(mean)
    xhat = (x - mean.reshape(shape)) * invstd.reshape(shape)
    gb = jnp.sum(g, axis=axes)
    gw = jnp.sum(g * xhat, axis=axes)
    if train:
        n = x.size // x.shape[1]
        gx = (w * invstd).reshape(shape) / n * (n * g - gb.reshape(shape) - xhat * gw.reshape(shape))
    else:
        gx = g * (w * invstd).reshape(shape)
    pdt = J(weight).dtype if weight is not None else x.dtype
    return (
        gx.astype(J(input).dtype) if output_mask[0] else None,
        gw.astype(pdt) if output_mask[1] else None,
        gb.astype(pdt) if output_mask[2] else None,
    )


def _layer_axes(input, normalized_shape):
    axis = input.dim() - len(normalized_shape)
    if axis < 0 or tuple(input.shape[axis:]) != tuple(normalized_shape):
        raise RuntimeError(
            f"Given normalized_shape={list(normalized_shape)}, expected input with shape "
            f"[*, {', '.join(str(s) for s in normalized_shape)}], but got input of size{list(input.shape)}"
        )
    return tuple(range(axis, input.dim()))


@register_functional(aten.native_layer_norm.default)
def native_layer_norm(input, normalized_shape, weight, bias, eps):
    axes = _layer_axes(input, normalized_shape)
    return on_views(compiled(layer_norm, axes, eps), (input, weight, bias))  # views read inside its program


def _rows_input_grad(gxhat, xhat, r, axes):
    """Layer norm's input gradient from its row sums: rstd / n (n gxhat - sum gxhat - xhat sum(gxhat
    xhat)), CPU's formula. Where XLA makes a row sum broadcast straight back over its rows a
    reduce-window inside the consumer's fusion (capabilities' `row_sums_fuse_as_windows`: a TPU), the
    sums are scaled by rstd / n at row shape first, as JAX's own derivative has them, so that they
    stay reductions that fuse with the bias and weight gradients' (float32's roundings either way)."""
    from jaxdev.ops.kit import capabilities  # imports the fallback, which needs the ops package loaded

    n = math.prod(xhat.shape[a] for a in axes)
    total = jnp.sum(gxhat, axis=axes, keepdims=True)
    weighed = jnp.sum(gxhat * xhat, axis=axes, keepdims=True)
    if capabilities.fact("row_sums_fuse_as_windows"):
        k = r / n
        return r * gxhat - k * total - xhat * (k * weighed)
    return r / n * (n * gxhat - total - xhat * weighed)


def _layer_norm_grad(g, x, mean, rstd, w, b, axes, mask):
    lead = tuple(range(axes[0]))
    c = opmath(x.dtype)
    xc, g = x.astype(c), g.astype(c)
    m, r = mean.astype(c), rstd.astype(c)
    xhat = (xc - m) * r
    gxhat = g * w.astype(c) if w is not None else g
    gx = _rows_input_grad(gxhat, xhat, r, axes)
    if w is not None and mask[1]:
        # CPU's dgamma loop weighs dy by rstd * x + (-rstd * mean), contracted to a fused multiply-add:
        # where x == mean that is the product's rounding error, not 0 (a 1-element row: -4e-5, not 0)
        t = xhat
        if c == jnp.float32:
            t = fma32(r, xc, -r * m)
        gw = jnp.sum(g * t, axis=lead).astype(w.dtype)
    else:
        gw = None
    gb = jnp.sum(g, axis=lead).astype(b.dtype) if b is not None and mask[2] else None
    return (gx.astype(x.dtype) if mask[0] else None), gw, gb


@register_functional(aten.native_layer_norm_backward.default)
def native_layer_norm_backward(grad_out, input, normalized_shape, mean, rstd, weight, bias, output_mask):
    axes = _layer_axes(input, normalized_shape)
    fn = compiled(_layer_norm_grad, axes, tuple(bool(m) for m in output_mask))
    return on_views(fn, (grad_out, input, mean, rstd, weight, bias))


# --- the update / no-update pair batch_norm lowers to (CPU: Normalization.cpp) -----------------------


@register_functional(aten._batch_norm_with_update.default)
def batch_norm_with_update(input, weight, bias, running_mean, running_var, momentum, eps):
    """CPU's _batch_norm_with_update: native_batch_norm in training mode (the running statistics
    updated in place), plus the empty uint8 `reserve` CUDA's cuDNN path would fill."""
    out, save_mean, save_invstd = _batch_norm(input, weight, bias, running_mean, running_var, True, momentum, eps)
    return out, save_mean, save_invstd, jnp.zeros((0,), jnp.uint8)


@register_functional(aten.batch_norm_backward.default)
def batch_norm_backward(
    grad_out, input, weight, running_mean, running_var, save_mean, save_var, update, eps, output_mask, reserve
):
    """CPU's batch_norm_backward: native_batch_norm_backward with train = update (`reserve` unused)."""
    return native_batch_norm_backward(
        grad_out, input, weight, running_mean, running_var, save_mean, save_var, update, eps, output_mask
    )


@register_functional(aten._batch_norm_no_update.default)
def batch_norm_no_update(input, weight, bias, running_mean, running_var, momentum, eps):
    """CPU's _batch_norm_no_update: batch_norm_cpu in evaluation mode (empty saved statistics). Its
    generic kernel calls batch_norm_cpu itself, so the device needs its own. CPU crashes without
    running statistics; this raises instead."""
    if running_mean is None or running_var is None:
        raise RuntimeError("_batch_norm_no_update: running_mean and running_var must be defined")
    out, save_mean, save_invstd = _batch_norm(input, weight, bias, running_mean, running_var, False, momentum, eps)
    return out, save_mean, save_invstd, jnp.zeros((0,), jnp.uint8)
