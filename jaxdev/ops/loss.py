"""Losses: nll_loss (1-D/2-D input) and nll_loss2d (images), forward and backward, with PyTorch's
weights, ignore_index and reductions (mean divides by the total weight of the kept targets)."""

from __future__ import annotations

import jax.numpy as jnp

from jaxdev import dtypes
from jaxdev.ops.pointwise import _opmath
from jaxdev.ops.registry import J, aten, register_functional

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
    bad = jnp.any(valid & ((t < 0) | (t >= C)))
    if bool(bad):
        raise IndexError(f"Target {int(jnp.max(jnp.where(valid, t, 0)))} is out of bounds.")
    w = J(weight)[tt] if weight is not None else jnp.ones(tt.shape, x.dtype)
    w = jnp.where(valid, w, 0).astype(_opmath(x.dtype))
    val = jnp.take_along_axis(x, tt[..., None], axis=-1)[..., 0] if x.ndim > 1 else x[tt]
    return val.astype(_opmath(x.dtype)), w, tt, valid


def _forward(self, target, weight, reduction, ignore_index):
    val, w, _, _ = _picked(self, target, weight, ignore_index)
    dt = dtypes.to_jax_dtype(self.dtype)
    losses = -val * w
    total = jnp.sum(w)
    if reduction == _NONE and self.dim() > 1:
        return losses.astype(dt), jnp.zeros((), dt)
    if reduction == _SUM or reduction == _NONE:
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
        raise ValueError(f"Expected 2 or fewer dimensions (got {self.dim()})" if self.dim() > 2 else "input tensor should be 1D or 2D")
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
