"""nll_loss (1-D/2-D input) and nll_loss2d (images), forward and backward, with PyTorch's weights,
ignore_index and reductions (mean divides by the total weight of the kept targets)."""

from __future__ import annotations

import jax.numpy as jnp
import torch

from jaxdev import dtypes, tracing
from jaxdev.ops.kit import J, compiled, opmath
from jaxdev.ops.loss.common import MEAN, NONE, SUM
from jaxdev.ops.registry import aten, register_functional


def _classes_last(x):
    """(N, C, *rest) -> (N, *rest, C); (C,) stays."""
    return x if x.ndim == 1 else jnp.moveaxis(x, 1, -1)


def _picked(x, t, w, ignore_index):
    """Traceable: each target's input value and weight (0 where ignored), in the compute dtype, and
    the targets made safe to index with."""
    x = _classes_last(x)
    t = t.astype(jnp.int64)  # CPU reads targets as int64: a uint8 255 is not ignore_index -1
    valid = t != ignore_index
    safe = jnp.where(valid, t, 0)
    tt = safe if x.ndim > 1 else safe.reshape(())
    w = w[tt] if w is not None else jnp.ones(tt.shape, x.dtype)
    w = jnp.where(valid, w, 0).astype(opmath(x.dtype))
    val = jnp.take_along_axis(x, tt[..., None], axis=-1)[..., 0] if x.ndim > 1 else x[tt]
    return val.astype(opmath(x.dtype)), w, tt, valid


def _forward_body(x, t, w, reduction, ignore_index):
    val, w, _, _ = _picked(x, t, w, ignore_index)
    dt = x.dtype
    losses = -val * w
    total = jnp.sum(w)
    if reduction == NONE and x.ndim > 1:
        return losses.astype(dt), jnp.zeros((), dt)
    if reduction in (SUM, NONE):
        return jnp.sum(losses).astype(dt), total.astype(dt)
    return (jnp.sum(losses) / total).astype(dt), total.astype(dt)


def _backward_body(g, x, t, w, total_weight, reduction, ignore_index):
    _, w, tt, valid = _picked(x, t, w, ignore_index)
    g = g.astype(w.dtype)
    if reduction == MEAN:
        g = g / total_weight.astype(w.dtype)
    coeff = jnp.where(valid, -w * g, 0)  # CPU skips ignored targets (no 0 * inf when all are ignored)
    xl = _classes_last(x)
    if xl.ndim == 1:
        grad = jnp.zeros(xl.shape, w.dtype).at[tt].set(coeff)
    else:
        onehot = jnp.arange(xl.shape[-1]) == tt[..., None]
        grad = jnp.where(onehot, coeff[..., None], 0)
    grad = grad if x.ndim == 1 else jnp.moveaxis(grad, -1, 1)
    return grad.astype(x.dtype)


def _kept_out_of_range(t, classes: int, ignore_index: int):
    """Traceable: where a target (read as int64, as CPU reads it) is kept and outside [0, classes)."""
    t = t.astype(jnp.int64)
    return (t != ignore_index) & ((t < 0) | (t >= classes))


def _targets_bad(t, classes, ignore_index):
    return jnp.any(_kept_out_of_range(t, classes, ignore_index))


def _check_targets(target, classes: int, ignore_index: int):
    """The flag "a kept target is outside [0, classes)", computed by a program of its own that reads the
    targets alone, so that reading it waits for them and not for the loss's input (the forward pass
    that made it); `raise_if` reads it after the loss's program is on its way."""
    return compiled(_targets_bad, classes, int(ignore_index))(J(target))


def _raise_if(bad, target, classes: int, ignore_index: int) -> None:
    """CPU's IndexError naming the first kept target (in memory order) out of range: read eagerly, or
    recorded as a deferred check under torch.compile (tracing.check_values)."""

    def error():
        t = J(target).reshape(-1)
        first = jnp.argmax(_kept_out_of_range(t, classes, ignore_index))
        return IndexError(f"Target {int(t[first].astype(jnp.int64))} is out of bounds.")

    tracing.check_values(bad, error)


def _classes(self) -> int:
    return self.shape[0] if self.dim() == 1 else self.shape[1]


def _forward(self, target, weight, reduction, ignore_index):
    w = J(weight) if weight is not None else None
    bad = _check_targets(target, _classes(self), ignore_index)
    loss, total = compiled(_forward_body, int(reduction), int(ignore_index))(J(self), J(target), w)
    _raise_if(bad, target, _classes(self), ignore_index)
    return loss, total


def _backward(grad_output, self, target, weight, reduction, ignore_index, total_weight):
    w = J(weight) if weight is not None else None
    bad = _check_targets(target, _classes(self), ignore_index)
    body = compiled(_backward_body, int(reduction), int(ignore_index))
    grad = body(J(grad_output), J(self), J(target), w, J(total_weight))
    _raise_if(bad, target, _classes(self), ignore_index)
    return grad


_NLL_FLOATS = (torch.float32, torch.float64, torch.float16, torch.bfloat16)


def _check_nll_dtypes(self, target, weight, frame: str, spatial: bool) -> None:
    """CPU's dtype checks of its nll_loss kernels, in their order: the target's dtype, the input's (the
    kernel's dispatch), the weight's, and (images) a uint8 target read as int64."""
    if target.dtype not in (torch.int64, torch.uint8):
        raise RuntimeError(f"expected target dtype to be Long or Byte, but got {dtypes.scalar_name(target.dtype)}")
    if self.dtype not in _NLL_FLOATS:
        raise NotImplementedError(f"\"{frame}\" not implemented for '{dtypes.scalar_name(self.dtype)}'")
    if weight is not None and weight.dtype != self.dtype:
        raise RuntimeError(
            f"expected scalar type {dtypes.scalar_name(self.dtype)} but found {dtypes.scalar_name(weight.dtype)}"
        )
    if spatial and target.dtype == torch.uint8:
        raise RuntimeError("expected scalar type Long but found Byte")


@register_functional(aten.nll_loss_forward.default)
def nll_loss_forward(self, target, weight, reduction, ignore_index):
    if self.dim() not in (1, 2):
        raise ValueError(
            f"Expected 2 or fewer dimensions (got {self.dim()})"
            if self.dim() > 2
            else "input tensor should be 1D or 2D"
        )
    if target.dim() > 1:
        raise RuntimeError("0D or 1D target tensor expected, multi-target not supported")
    if self.dim() == 2 and self.shape[0] != target.shape[0]:
        raise RuntimeError(f"size mismatch (got input: {list(self.shape)}, target: {list(target.shape)})")
    n = self.shape[-1]
    if weight is not None and (weight.dim() != 1 or weight.numel() != n):
        raise RuntimeError(
            f"weight tensor should be defined either for all {n} classes or no classes but got weight "
            f"tensor of shape: {list(weight.shape)}"
        )
    _check_nll_dtypes(self, target, weight, "nll_loss_out_frame", spatial=False)
    return _forward(self, target, weight, reduction, ignore_index)


def _check_nll_backward(self, target, weight, frame: str) -> None:
    if weight is not None and weight.numel() != _classes(self):
        raise RuntimeError("weight tensor should be defined either for all or no classes")
    if target.dtype not in (torch.int64, torch.uint8):
        raise RuntimeError(f"expected scalar type Long but found {dtypes.scalar_name(target.dtype)}")
    if self.dtype not in _NLL_FLOATS:
        raise NotImplementedError(f"\"{frame}\" not implemented for '{dtypes.scalar_name(self.dtype)}'")


@register_functional(aten.nll_loss_backward.default)
def nll_loss_backward(grad_output, self, target, weight, reduction, ignore_index, total_weight):
    _check_nll_backward(self, target, weight, "nll_loss_backward_out_frame")
    return _backward(grad_output, self, target, weight, reduction, ignore_index, total_weight)


@register_functional(aten.nll_loss2d_forward.default)
def nll_loss2d_forward(self, target, weight, reduction, ignore_index):
    if target.dim() != 3:
        raise RuntimeError(
            f"only batches of spatial targets supported (3D tensors) but got targets of dimension: {target.dim()}"
        )
    if self.dim() != 4:
        raise RuntimeError(
            f"only batches of spatial inputs supported (4D tensors), but got input of dimension: {self.dim()}"
        )
    if weight is not None and weight.numel() != self.shape[1]:
        raise RuntimeError("weight tensor should be defined either for all or no classes")
    if (self.shape[0], *self.shape[2:]) != tuple(target.shape):
        raise RuntimeError(f"size mismatch (got input: {list(self.shape)} , target: {list(target.shape)}")
    _check_nll_dtypes(self, target, weight, "nll_loss2d_forward_out_frame", spatial=True)
    return _forward(self, target, weight.reshape(-1) if weight is not None else None, reduction, ignore_index)


@register_functional(aten.nll_loss2d_backward.default)
def nll_loss2d_backward(grad_output, self, target, weight, reduction, ignore_index, total_weight):
    _check_nll_backward(self, target, weight, "nll_loss2d_backward_out_frame")
    weight = weight.reshape(-1) if weight is not None else None
    return _backward(grad_output, self, target, weight, reduction, ignore_index, total_weight)
