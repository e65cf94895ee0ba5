"""Elementwise regression and binary losses, forward and backward: mse, smooth L1, Huber and binary
cross-entropy (log clamped at -100, as PyTorch does)."""

from __future__ import annotations

import jax.numpy as jnp
import torch

from jaxdev import dtypes, tensor, tracing
from jaxdev.ops.kit import J, compiled, opmath
from jaxdev.ops.kit import transcendentals as tm
from jaxdev.ops.loss.common import MEAN, SUM
from jaxdev.ops.registry import aten, register, register_functional, store_into

# --- elementwise regression and binary losses ----------------------------------------------------

_BCE_LOG_FLOOR = -100.0  # PyTorch clamps log() at -100 so a 0/1 prediction gives a finite loss
_BCE_EPS = 1e-12  # and keeps the gradient's denominator above this


def _reduce(losses, reduction):
    if reduction == MEAN:
        return jnp.mean(losses)
    if reduction == SUM:
        return jnp.sum(losses)
    return losses


def _grad_norm(n, reduction):
    return 1.0 / n if reduction == MEAN else 1.0


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
    log_x = jnp.maximum(tm.log(x), _BCE_LOG_FLOOR)
    log_1mx = jnp.maximum(tm.log1p(-x), _BCE_LOG_FLOOR)
    losses = -((t * log_x) + (1 - t) * log_1mx)
    return _reduce(losses * w if w is not None else losses, reduction)


def _bce_grad(g, x, t, w, reduction):
    grad = (x - t) / jnp.maximum((1 - x) * x, _BCE_EPS) * _grad_norm(x.size, reduction) * g
    return grad * w if w is not None else grad


def _pointwise_loss(body, self, target, *static, extra=(), kernel=None):
    dtype = torch.result_type(self, target)
    if kernel is not None and not dtype.is_floating_point:  # CPU's kernel dispatches floating types only
        raise NotImplementedError(f"\"{kernel}\" not implemented for '{dtypes.scalar_name(dtype)}'")
    jdt = dtypes.to_jax_dtype(dtype)
    c = opmath(jdt)
    arrays = [J(self).astype(c), J(target).astype(c), *extra]
    return compiled(body, *static)(*arrays).astype(jdt)


@register_functional(aten.mse_loss.default)
def mse_loss(self, target, reduction=MEAN):
    return _pointwise_loss(_mse, self, target, reduction, kernel="mse_cpu")


@register_functional(aten.mse_loss_backward.default)
def mse_loss_backward(grad_output, self, target, reduction):
    return _loss_grad(_mse_grad, grad_output, self, target, reduction)


@register_functional(aten.smooth_l1_loss.default)
def smooth_l1_loss(self, target, reduction=MEAN, beta=1.0):
    if beta < 0:
        raise RuntimeError("smooth_l1_loss does not support negative values for beta.")
    return _pointwise_loss(_smooth_l1, self, target, reduction, beta, kernel="smooth_l1_cpu")


@register_functional(aten.smooth_l1_loss_backward.default)
def smooth_l1_loss_backward(grad_output, self, target, reduction, beta):
    return _loss_grad(_smooth_l1_grad, grad_output, self, target, reduction, beta)


@register_functional(aten.huber_loss.default)
def huber_loss(self, target, reduction=MEAN, delta=1.0):
    if delta <= 0:
        raise RuntimeError("huber_loss does not support non-positive values for delta.")
    return _pointwise_loss(_huber, self, target, reduction, delta, kernel="huber_cpu")


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
    x, t = J(self), J(target)
    # CPU checks element by element, the input's value and then the target's (NaN fails both), so the
    # first element with either out of [0, 1] names which
    bad_x, bad_t = ~((x >= 0) & (x <= 1)), ~((t >= 0) & (t <= 1))

    def error():
        first = int(jnp.argmax((bad_x | bad_t).reshape(-1)))
        which = "input" if bool(bad_x.reshape(-1)[first]) else "target"
        return RuntimeError(f"all elements of {which} should be between 0 and 1")

    tracing.check_values(bad_x | bad_t, error)
    c = opmath(x.dtype)
    return None if weight is None else jnp.broadcast_to(J(weight).astype(c), x.shape)


def _bce_same_dtype(result: torch.dtype, *inputs) -> None:
    """CPU's binary cross entropy kernels run one TensorIterator that wants every operand in one dtype:
    the first input's (the result is empty_like(input), or out=)."""
    expected = inputs[0].dtype
    for found in (result, *(t.dtype for t in inputs)):
        if found != expected:
            raise RuntimeError(f"Found dtype {dtypes.scalar_name(found)} but expected {dtypes.scalar_name(expected)}")


@register_functional(aten.binary_cross_entropy.default, out=False)
def binary_cross_entropy(self, target, weight=None, reduction=MEAN):
    _bce_same_dtype(self.dtype, self, target)
    w = _bce_checks(self, target, weight)
    return _pointwise_loss(_bce, self, target, reduction, extra=(w,))


@register_functional(aten.binary_cross_entropy_backward.default, out=False)
def binary_cross_entropy_backward(grad_output, self, target, weight=None, reduction=MEAN):
    _bce_same_dtype(self.dtype, grad_output, self, target)
    c = opmath(dtypes.to_jax_dtype(self.dtype))
    w = None if weight is None else jnp.broadcast_to(J(weight).astype(c), tuple(self.shape))
    return _loss_grad(_bce_grad, grad_output, self, target, reduction, extra=(w,))


# Their out= kernels check out's dtype with the inputs' (no cast). CPU's do not resize out either: they
# write through out.squeeze() whatever its shape (reading past a smaller one); a mis-shaped out is
# resized here, as every other out= is.
@register(aten.binary_cross_entropy.out)
def binary_cross_entropy_out(self, target, weight=None, reduction=MEAN, *, out):
    _bce_same_dtype(out.dtype, self, target)
    tensor.check_no_partial_overlap(out, (self, target))
    return store_into(out, binary_cross_entropy(self, target, weight, reduction), resize=True)


@register(aten.binary_cross_entropy_backward.grad_input)
def binary_cross_entropy_backward_out(grad_output, self, target, weight=None, reduction=MEAN, *, grad_input):
    _bce_same_dtype(grad_input.dtype, grad_output, self, target)
    tensor.check_no_partial_overlap(grad_input, (grad_output, self, target))
    value = binary_cross_entropy_backward(grad_output, self, target, weight, reduction)
    return store_into(grad_input, value, resize=True)
