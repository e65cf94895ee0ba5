"""Losses, forward and backward: nll_loss (1-D/2-D input) and nll_loss2d (images) with PyTorch's
weights, ignore_index and reductions (mean divides by the total weight of the kept targets); mse,
smooth L1, Huber and binary cross-entropy (log clamped at -100, as PyTorch does)."""

from __future__ import annotations

import jax.numpy as jnp
import torch

from jaxdev import dtypes, tracing
from jaxdev.ops.registry import aten, register_functional
from jaxdev.ops.toolkit import J, compiled, opmath

_NONE, _MEAN, _SUM = 0, 1, 2


def _classes_last(x):
    """(N, C, *rest) -> (N, *rest, C); (C,) stays."""
    return x if x.ndim == 1 else jnp.moveaxis(x, 1, -1)


def _picked(self, target, weight, ignore_index):
    x = _classes_last(J(self))
    t = J(target)
    C = x.shape[-1]
    valid = t != ignore_index
    safe = jnp.where(valid, t, 0)
    tt = safe if x.ndim > 1 else safe.reshape(())
    tracing.check_values(
        valid & ((t < 0) | (t >= C)),
        lambda: IndexError(f"Target {int(jnp.max(jnp.where(valid, t, 0)))} is out of bounds."),
    )
    w = J(weight)[tt] if weight is not None else jnp.ones(tt.shape, x.dtype)
    w = jnp.where(valid, w, 0).astype(opmath(x.dtype))
    val = jnp.take_along_axis(x, tt[..., None], axis=-1)[..., 0] if x.ndim > 1 else x[tt]
    return val.astype(opmath(x.dtype)), w, tt, valid


def _forward(self, target, weight, reduction, ignore_index):
    val, w, _, _ = _picked(self, target, weight, ignore_index)
    dt = dtypes.to_jax_dtype(self.dtype)
    losses = -val * w
    total = jnp.sum(w)
    if reduction == _NONE and self.dim() > 1:
        return losses.astype(dt), jnp.zeros((), dt)
    if reduction in (_SUM, _NONE):
        return jnp.sum(losses).astype(dt), total.astype(dt)
    return (jnp.sum(losses) / total).astype(dt), total.astype(dt)


def _backward(grad_output, self, target, weight, reduction, ignore_index, total_weight):
    _, w, tt, _ = _picked(self, target, weight, ignore_index)
    x = J(self)
    g = J(grad_output).astype(w.dtype)
    if reduction == _MEAN:
        g = g / J(total_weight).astype(w.dtype)
    coeff = -w * g
    xl = _classes_last(x)
    if xl.ndim == 1:
        grad = jnp.zeros(xl.shape, w.dtype).at[tt].set(coeff)
    else:
        onehot = jnp.arange(xl.shape[-1]) == tt[..., None]
        grad = jnp.where(onehot, coeff[..., None], 0)
    grad = grad if x.ndim == 1 else jnp.moveaxis(grad, -1, 1)
    return grad.astype(x.dtype)


@register_functional(aten.nll_loss_forward.default)
def nll_loss_forward(self, target, weight, reduction, ignore_index):
    if self.dim() not in (1, 2):
        raise ValueError(
            f"Expected 2 or fewer dimensions (got {self.dim()})"
            if self.dim() > 2
            else "input tensor should be 1D or 2D"
        )
    return _forward(self, target, weight, reduction, ignore_index)


@register_functional(aten.nll_loss_backward.default)
def nll_loss_backward(grad_output, self, target, weight, reduction, ignore_index, total_weight):
    return _backward(grad_output, self, target, weight, reduction, ignore_index, total_weight)


@register_functional(aten.nll_loss2d_forward.default)
def nll_loss2d_forward(self, target, weight, reduction, ignore_index):
    return _forward(self, target, weight, reduction, ignore_index)


@register_functional(aten.nll_loss2d_backward.default)
def nll_loss2d_backward(grad_output, self, target, weight, reduction, ignore_index, total_weight):
    return _backward(grad_output, self, target, weight, reduction, ignore_index, total_weight)


# --- elementwise regression and binary losses ----------------------------------------------------

_BCE_LOG_FLOOR = -100.0  # PyTorch clamps log() at -100 so a 0/1 prediction gives a finite loss
_BCE_EPS = 1e-12  # and keeps the gradient's denominator above this


def _reduce(losses, reduction):
    if reduction == _MEAN:
        return jnp.mean(losses)
    if reduction == _SUM:
        return jnp.sum(losses)
    return losses


def _grad_norm(n, reduction):
    return 1.0 / n if reduction == _MEAN else 1.0


def _mse(x, t, reduction):
    return _reduce(jnp.square(x - t), reduction)


def _mse_grad(g, x, t, reduction):
    d = x - t
    return jnp.broadcast_to(2.0 * _grad_norm(d.size, reduction) * d * g, d.shape)


def _smooth_l1(x, t, reduction, beta):
    z = jnp.abs(x - t)
    return _reduce(z if beta == 0 else jnp.where(z < beta, 0.5 * z * z / beta, z - 0.5 * beta), reduction)


def _smooth_l1_grad(g, x, t, reduction, beta):
    d = x - t
    local = jnp.sign(d) if beta == 0 else jnp.where(jnp.abs(d) < beta, d / beta, jnp.sign(d))
    return jnp.broadcast_to(local * _grad_norm(d.size, reduction) * g, d.shape)


def _huber(x, t, reduction, delta):
    z = jnp.abs(x - t)
    return _reduce(jnp.where(z < delta, 0.5 * z * z, delta * (z - 0.5 * delta)), reduction)


def _huber_grad(g, x, t, reduction, delta):
    d = x - t
    return jnp.broadcast_to(jnp.clip(d, -delta, delta) * _grad_norm(d.size, reduction) * g, d.shape)


def _bce(x, t, w, reduction):
    log_x = jnp.maximum(jnp.log(x), _BCE_LOG_FLOOR)
    log_1mx = jnp.maximum(jnp.log1p(-x), _BCE_LOG_FLOOR)
    losses = -((t * log_x) + (1 - t) * log_1mx)
    return _reduce(losses * w if w is not None else losses, reduction)


def _bce_grad(g, x, t, w, reduction):
    grad = (x - t) / jnp.maximum((1 - x) * x, _BCE_EPS) * _grad_norm(x.size, reduction) * g
    return grad * w if w is not None else grad


def _pointwise_loss(body, self, target, *static, extra=()):
    dtype = torch.result_type(self, target)
    jdt = dtypes.to_jax_dtype(dtype)
    c = opmath(jdt)
    arrays = [J(self).astype(c), J(target).astype(c), *extra]
    return compiled(body, *static)(*arrays).astype(jdt)


@register_functional(aten.mse_loss.default)
def mse_loss(self, target, reduction=_MEAN):
    return _pointwise_loss(_mse, self, target, reduction)


@register_functional(aten.mse_loss_backward.default)
def mse_loss_backward(grad_output, self, target, reduction):
    return _loss_grad(_mse_grad, grad_output, self, target, reduction)


@register_functional(aten.smooth_l1_loss.default)
def smooth_l1_loss(self, target, reduction=_MEAN, beta=1.0):
    if beta < 0:
        raise RuntimeError("smooth_l1_loss does not support negative values for beta.")
    return _pointwise_loss(_smooth_l1, self, target, reduction, beta)


@register_functional(aten.smooth_l1_loss_backward.default)
def smooth_l1_loss_backward(grad_output, self, target, reduction, beta):
    return _loss_grad(_smooth_l1_grad, grad_output, self, target, reduction, beta)


@register_functional(aten.huber_loss.default)
def huber_loss(self, target, reduction=_MEAN, delta=1.0):
    if delta <= 0:
        raise RuntimeError("huber_loss does not support non-positive values for delta.")
    return _pointwise_loss(_huber, self, target, reduction, delta)


@register_functional(aten.huber_loss_backward.default)
def huber_loss_backward(grad_output, self, target, reduction, delta):
    return _loss_grad(_huber_grad, grad_output, self, target, reduction, delta)


def _loss_grad(body, grad_output, self, target, *static, extra=()):
    jdt = dtypes.to_jax_dtype(self.dtype)
    c = opmath(jdt)
    arrays = [J(grad_output).astype(c), J(self).astype(c), J(target).astype(c), *extra]
    return compiled(body, *static)(*arrays).astype(jdt)


def _bce_checks(self, target, weight):
    if tuple(self.shape) != tuple(target.shape):
        raise ValueError(
            f"Using a target size ({target.shape}) that is different to the input size "
            f"({self.shape}) is deprecated. Please ensure they have the same size."
        )
    x = J(self)
    tracing.check_values((x < 0) | (x > 1), lambda: RuntimeError("all elements of input should be between 0 and 1"))
    c = opmath(x.dtype)
    return None if weight is None else jnp.broadcast_to(J(weight).astype(c), x.shape)


@register_functional(aten.binary_cross_entropy.default)
def binary_cross_entropy(self, target, weight=None, reduction=_MEAN):
    w = _bce_checks(self, target, weight)
    return _pointwise_loss(_bce, self, target, reduction, extra=(w,))


@register_functional(aten.binary_cross_entropy_backward.default)
def binary_cross_entropy_backward(grad_output, self, target, weight=None, reduction=_MEAN):
    c = opmath(dtypes.to_jax_dtype(self.dtype))
    w = None if weight is None else jnp.broadcast_to(J(weight).astype(c), tuple(self.shape))
    return _loss_grad(_bce_grad, grad_output, self, target, reduction, extra=(w,))
