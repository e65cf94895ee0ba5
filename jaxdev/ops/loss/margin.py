"""Multi-class margin losses, forward and backward (CPU: LossMultiMargin.cpp, LossMultiLabelMargin.cpp)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import torch

from jaxdev import dtypes, tracing
from jaxdev.ops.kit import J, compiled
from jaxdev.ops.loss.common import MEAN, NONE
from jaxdev.ops.registry import aten, register_functional

# --- multi-class margin losses (LossMultiMargin.cpp, LossMultiLabelMargin.cpp) --------------------


def _margin_geometry(self, op: str) -> tuple[int, int]:
    """(nframe, dim) as CPU's shape check computes them, with its refusals."""
    if self.dtype not in (torch.float32, torch.float64):
        raise NotImplementedError(f"\"{op}\" not implemented for '{dtypes.scalar_name(self.dtype)}'")
    nd = self.dim()
    if not ((nd == 2 and self.shape[1] != 0) or (nd == 1 and self.shape[0] != 0) or nd == 0):
        raise RuntimeError(
            f"Expected non-empty vector or matrix with optional 0-dim batch size, but got: {list(self.shape)}"
        )
    return (1, 1 if nd == 0 else self.shape[0]) if nd <= 1 else (self.shape[0], self.shape[1])


def _expect_dtype(t, dtype) -> None:
    if t.dtype != dtype:
        raise RuntimeError(f"expected scalar type {dtypes.scalar_name(dtype)} but found {dtypes.scalar_name(t.dtype)}")


def _multi_margin_checks(self, target, p, weight, op):
    n, d = _margin_geometry(self, op)
    if p not in (1, 2):
        raise RuntimeError("only p == 1 and p == 2 supported")
    if not (target.dim() <= 1 and target.numel() == n):
        raise RuntimeError(
            "multi_margin_loss: target tensor should be 1-D with size equal to the number of input samples "
            f"(batch size). Expected target size [{n}], but got {list(target.shape)}. Input has shape "
            f"{list(self.shape)}."
        )
    if weight is not None and not (weight.dim() <= 1 and weight.numel() == d):
        raise RuntimeError(f"inconsistent weight size, expected {d} but got {list(weight.shape)}")
    _expect_dtype(target, torch.int64)
    if weight is not None:
        _expect_dtype(weight, self.dtype)
    t = J(target).reshape(n)
    tracing.check_values((t < 0) | (t >= d), lambda: RuntimeError("target out of range"))
    return n, d, t


def _multi_margin_terms(x, t, w, p, margin):
    """Per (row, class): the hinge terms CPU sums, with the target class masked out; and z > 0."""
    d = x.shape[1]
    tt = jnp.clip(t, 0, d - 1)
    xt = jnp.take_along_axis(x, tt[:, None], axis=1)
    z = jnp.asarray(margin, x.dtype) - xt + x
    off_target = jnp.arange(d) != tt[:, None]
    hit = (z > 0) & off_target
    wt = None if w is None else w[tt][:, None]
    return z, hit, wt, tt


def _multi_margin_body(x, t, w, p, margin, reduction, per_row):
    n, d = x.shape
    z, hit, wt, _ = _multi_margin_terms(x, t, w, p, margin)
    h = z if p == 1 else z * z
    if wt is not None:
        h = h * wt
    s = jnp.sum(jnp.where(hit, h, 0), axis=1) / d
    if per_row:
        return s
    acc = s.astype(jnp.float64) if s.dtype == jnp.float32 else s  # CPU accumulates rows in acc_type (double)
    total = jnp.sum(acc)
    return (total / n if reduction == MEAN else total).astype(x.dtype)


def _multi_margin_grad_body(g, x, t, w, p, margin, reduction, per_row):
    n, d = x.shape
    z, hit, wt, tt = _multi_margin_terms(x, t, w, p, margin)
    scale = jnp.asarray(1.0 / (n * d) if reduction == MEAN else 1.0 / d, x.dtype)
    h = jnp.broadcast_to(scale, z.shape) if p == 1 else 2 * scale * z
    if wt is not None:
        h = h * wt
    h = jnp.where(hit, h, 0)
    onehot = jnp.arange(d) == tt[:, None]
    grad = jnp.where(onehot, -jnp.sum(h, axis=1, keepdims=True), h)
    return grad * (g.reshape(n, 1) if per_row else g.reshape(()))


@register_functional(aten.multi_margin_loss.default)
def multi_margin_loss(self, target, p=1, margin=1, weight=None, reduction=MEAN):
    n, d, t = _multi_margin_checks(self, target, p, weight, "multi_margin_loss_cpu_kernel")
    per_row = reduction == NONE and target.dim() > 0
    w = None if weight is None else J(weight).reshape(d)
    x = J(self).reshape(n, d)
    return compiled(_multi_margin_body, int(p), margin, reduction, per_row)(x, t, w)


@register_functional(aten.multi_margin_loss_backward.default)
def multi_margin_loss_backward(grad_output, self, target, p, margin, weight=None, reduction=MEAN):
    n, d, t = _multi_margin_checks(self, target, p, weight, "multi_margin_loss_backward_cpu_kernel")
    per_row = reduction == NONE and grad_output.dim() > 0
    w = None if weight is None else J(weight).reshape(d)
    x = J(self).reshape(n, d)
    g = J(grad_output).astype(x.dtype)
    grad = compiled(_multi_margin_grad_body, int(p), margin, reduction, per_row)(g, x, t, w)
    return grad.reshape(tuple(self.shape))


def _multilabel_checks(self, target, op):
    n, d = _margin_geometry(self, op)
    ok = (target.dim() <= 1 and target.numel() == d) if self.dim() <= 1 else (tuple(target.shape) == (n, d))
    if not ok:
        raise RuntimeError(f"inconsistent target size: {list(target.shape)} for input of size: {list(self.shape)}")
    _expect_dtype(target, torch.int64)
    t = J(target).reshape(n, d)
    tracing.check_values((t < -1) | (t >= d), lambda: RuntimeError("argument #2 'target' is out of range"))
    return n, d, t


def _multilabel_pairs(x, t, given=None):
    """(z, hinge mask over (row, k, class), onehot of target k, is_target): target k counts until the
    first -1; the backward masks with the `is_target` it is given, as CPU does."""
    d = x.shape[1]
    listed = jnp.cumprod((t >= 0).astype(jnp.int32), axis=1).astype(bool)
    onehot = (jnp.clip(t, 0, d - 1)[:, :, None] == jnp.arange(d)) & listed[:, :, None]
    is_target = jnp.any(onehot, axis=1) if given is None else given != 0
    xt = jnp.take_along_axis(x, jnp.clip(t, 0, d - 1), axis=1)
    z = 1 - xt[:, :, None] + x[:, None, :]
    hit = (z > 0) & listed[:, :, None] & ~is_target[:, None, :]
    return z, hit, onehot, is_target


def _multilabel_body(x, t, reduction, per_row):
    n, d = x.shape
    z, hit, _, is_target = _multilabel_pairs(x, t)
    acc = jnp.float64  # CPU sums each row in acc_type (double for float), rounds it to the dtype,
    rows = jnp.sum(jnp.where(hit, z, 0).astype(acc), axis=(1, 2)).astype(x.dtype)
    if per_row:
        return rows / d, is_target.astype(x.dtype)
    total = jnp.sum(rows.astype(acc)) / d  # and sums the rows in acc_type again
    if reduction == MEAN:
        total = total / n
    return total.astype(x.dtype), is_target.astype(x.dtype)


def _multilabel_grad_body(g, x, t, is_target, reduction, per_row):
    n, d = x.shape
    _, hit, onehot, _ = _multilabel_pairs(x, t, is_target)
    scale = jnp.asarray(1.0 / (n * d) if reduction == MEAN else 1.0 / d, x.dtype)
    up = jnp.sum(hit, axis=1).astype(x.dtype)  # per class d: pairs (k, d) that push d up
    # counts past 256 are not bfloat16 values: HIGHEST, not a TPU's one-pass default
    counts = jnp.sum(hit, axis=2).astype(x.dtype)
    down = jnp.einsum("nk,nkc->nc", counts, onehot.astype(x.dtype), precision=jax.lax.Precision.HIGHEST)
    grad = (up - down) * scale
    return grad * (g.reshape(n, 1) if per_row else g.reshape(()))


@register_functional(aten.multilabel_margin_loss_forward.default)
def multilabel_margin_loss_forward(self, target, reduction):
    n, d, t = _multilabel_checks(self, target, "multilabel_margin_loss_forward_out_frame")
    per_row = reduction == NONE and target.dim() > 1
    out, is_target = compiled(_multilabel_body, reduction, per_row)(J(self).reshape(n, d), t)
    return out, is_target.reshape(tuple(target.shape))


@register_functional(aten.multilabel_margin_loss_backward.default)
def multilabel_margin_loss_backward(grad_output, self, target, reduction, is_target):
    n, d, t = _multilabel_checks(self, target, "multilabel_margin_loss_backward_out_frame")
    if tuple(is_target.shape) != tuple(target.shape):
        raise RuntimeError(
            f"Expected tensor for argument #5 'is_target' to have same size as tensor for argument #3 'target'; "
            f"but {list(is_target.shape)} does not equal {list(target.shape)} "
            "(while checking arguments for multilabel_margin_loss_backward_cpu_template)"
        )
    _expect_dtype(is_target, self.dtype)
    mask = J(is_target).reshape(n, d)
    tracing.check_values((mask < 0) | (mask > 1), lambda: RuntimeError("argument #5 'is_target' is out of range"))
    per_row = reduction == NONE and grad_output.dim() > 0
    x = J(self).reshape(n, d)
    grad = compiled(_multilabel_grad_body, reduction, per_row)(J(grad_output).astype(x.dtype), x, t, mask)
    return grad.reshape(tuple(self.shape))
