"""Losses, forward and backward: nll_loss (1-D/2-D input) and nll_loss2d (images) with PyTorch's
weights, ignore_index and reductions (mean divides by the total weight of the kept targets); mse,
smooth L1, Huber and binary cross-entropy (log clamped at -100, as PyTorch does)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import torch

from jaxdev import dtypes, tensor, tracing
from jaxdev.ops.registry import aten, register, register_functional, store_into
from jaxdev.ops.toolkit import J, compiled, opmath

_NONE, _MEAN, _SUM = 0, 1, 2


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
    if reduction == _NONE and x.ndim > 1:
        return losses.astype(dt), jnp.zeros((), dt)
    if reduction in (_SUM, _NONE):
        return jnp.sum(losses).astype(dt), total.astype(dt)
    return (jnp.sum(losses) / total).astype(dt), total.astype(dt)


def _backward_body(g, x, t, w, total_weight, reduction, ignore_index):
    _, w, tt, valid = _picked(x, t, w, ignore_index)
    g = g.astype(w.dtype)
    if reduction == _MEAN:
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


def _pointwise_loss(body, self, target, *static, extra=(), kernel=None):
    dtype = torch.result_type(self, target)
    if kernel is not None and not dtype.is_floating_point:  # CPU's kernel dispatches floating types only
        raise NotImplementedError(f"\"{kernel}\" not implemented for '{dtypes.scalar_name(dtype)}'")
    jdt = dtypes.to_jax_dtype(dtype)
    c = opmath(jdt)
    arrays = [J(self).astype(c), J(target).astype(c), *extra]
    return compiled(body, *static)(*arrays).astype(jdt)


@register_functional(aten.mse_loss.default)
def mse_loss(self, target, reduction=_MEAN):
    return _pointwise_loss(_mse, self, target, reduction, kernel="mse_cpu")


@register_functional(aten.mse_loss_backward.default)
def mse_loss_backward(grad_output, self, target, reduction):
    return _loss_grad(_mse_grad, grad_output, self, target, reduction)


@register_functional(aten.smooth_l1_loss.default)
def smooth_l1_loss(self, target, reduction=_MEAN, beta=1.0):
    if beta < 0:
        raise RuntimeError("smooth_l1_loss does not support negative values for beta.")
    return _pointwise_loss(_smooth_l1, self, target, reduction, beta, kernel="smooth_l1_cpu")


@register_functional(aten.smooth_l1_loss_backward.default)
def smooth_l1_loss_backward(grad_output, self, target, reduction, beta):
    return _loss_grad(_smooth_l1_grad, grad_output, self, target, reduction, beta)


@register_functional(aten.huber_loss.default)
def huber_loss(self, target, reduction=_MEAN, delta=1.0):
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
def binary_cross_entropy(self, target, weight=None, reduction=_MEAN):
    _bce_same_dtype(self.dtype, self, target)
    w = _bce_checks(self, target, weight)
    return _pointwise_loss(_bce, self, target, reduction, extra=(w,))


@register_functional(aten.binary_cross_entropy_backward.default, out=False)
def binary_cross_entropy_backward(grad_output, self, target, weight=None, reduction=_MEAN):
    _bce_same_dtype(self.dtype, grad_output, self, target)
    c = opmath(dtypes.to_jax_dtype(self.dtype))
    w = None if weight is None else jnp.broadcast_to(J(weight).astype(c), tuple(self.shape))
    return _loss_grad(_bce_grad, grad_output, self, target, reduction, extra=(w,))


# Their out= kernels check out's dtype with the inputs' (no cast). CPU's do not resize out either: they
# write through out.squeeze() whatever its shape (reading past a smaller one); a mis-shaped out is
# resized here, as every other out= is.
@register(aten.binary_cross_entropy.out)
def binary_cross_entropy_out(self, target, weight=None, reduction=_MEAN, *, out):
    _bce_same_dtype(out.dtype, self, target)
    tensor.check_no_partial_overlap(out, (self, target))
    return store_into(out, binary_cross_entropy(self, target, weight, reduction), resize=True)


@register(aten.binary_cross_entropy_backward.grad_input)
def binary_cross_entropy_backward_out(grad_output, self, target, weight=None, reduction=_MEAN, *, grad_input):
    _bce_same_dtype(grad_input.dtype, grad_output, self, target)
    tensor.check_no_partial_overlap(grad_input, (grad_output, self, target))
    value = binary_cross_entropy_backward(grad_output, self, target, weight, reduction)
    return store_into(grad_input, value, resize=True)


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
    return (total / n if reduction == _MEAN else total).astype(x.dtype)


def _multi_margin_grad_body(g, x, t, w, p, margin, reduction, per_row):
    n, d = x.shape
    z, hit, wt, tt = _multi_margin_terms(x, t, w, p, margin)
    scale = jnp.asarray(1.0 / (n * d) if reduction == _MEAN else 1.0 / d, x.dtype)
    h = jnp.broadcast_to(scale, z.shape) if p == 1 else 2 * scale * z
    if wt is not None:
        h = h * wt
    h = jnp.where(hit, h, 0)
    onehot = jnp.arange(d) == tt[:, None]
    grad = jnp.where(onehot, -jnp.sum(h, axis=1, keepdims=True), h)
    return grad * (g.reshape(n, 1) if per_row else g.reshape(()))


@register_functional(aten.multi_margin_loss.default)
def multi_margin_loss(self, target, p=1, margin=1, weight=None, reduction=_MEAN):
    n, d, t = _multi_margin_checks(self, target, p, weight, "multi_margin_loss_cpu_kernel")
    per_row = reduction == _NONE and target.dim() > 0
    w = None if weight is None else J(weight).reshape(d)
    x = J(self).reshape(n, d)
    return compiled(_multi_margin_body, int(p), margin, reduction, per_row)(x, t, w)


@register_functional(aten.multi_margin_loss_backward.default)
def multi_margin_loss_backward(grad_output, self, target, p, margin, weight=None, reduction=_MEAN):
    n, d, t = _multi_margin_checks(self, target, p, weight, "multi_margin_loss_backward_cpu_kernel")
    per_row = reduction == _NONE and grad_output.dim() > 0
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
    if reduction == _MEAN:
        total = total / n
    return total.astype(x.dtype), is_target.astype(x.dtype)


def _multilabel_grad_body(g, x, t, is_target, reduction, per_row):
    n, d = x.shape
    _, hit, onehot, _ = _multilabel_pairs(x, t, is_target)
    scale = jnp.asarray(1.0 / (n * d) if reduction == _MEAN else 1.0 / d, x.dtype)
    up = jnp.sum(hit, axis=1).astype(x.dtype)  # per class d: pairs (k, d) that push d up
    down = jnp.einsum("nk,nkc->nc", jnp.sum(hit, axis=2).astype(x.dtype), onehot.astype(x.dtype))
    grad = (up - down) * scale
    return grad * (g.reshape(n, 1) if per_row else g.reshape(()))


@register_functional(aten.multilabel_margin_loss_forward.default)
def multilabel_margin_loss_forward(self, target, reduction):
    n, d, t = _multilabel_checks(self, target, "multilabel_margin_loss_forward_out_frame")
    per_row = reduction == _NONE and target.dim() > 1
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
    per_row = reduction == _NONE and grad_output.dim() > 0
    x = J(self).reshape(n, d)
    grad = compiled(_multilabel_grad_body, reduction, per_row)(J(grad_output).astype(x.dtype), x, t, mask)
    return grad.reshape(tuple(self.shape))


# --- CTC loss (CPU: LossCTC.cpp), the alpha / beta recursions as scans over time ------------------------------

_NEG_INF = -float("inf")
_LEGACY_TYPE = {
    torch.float32: "Float",
    torch.float64: "Double",
    torch.float16: "Half",
    torch.bfloat16: "BFloat16",
    torch.int8: "Char",
    torch.uint8: "Byte",
    torch.int16: "Short",
    torch.bool: "Bool",
}


def _ctc_where() -> str:
    return " (while checking arguments for ctc_loss_allocate_outputs)"


def _ctc_checks(log_probs, targets, input_lengths, target_lengths, blank):
    """CPU's checks; returns (batch offsets into the targets, their stride, the longest target)."""
    if log_probs.dtype not in (torch.float32, torch.float64):
        raise NotImplementedError(f"\"ctc_loss_cpu\" not implemented for '{dtypes.scalar_name(log_probs.dtype)}'")
    if log_probs.numel() == 0:
        raise RuntimeError("log_probs tensor must not be empty")
    if targets.dtype not in (torch.int64, torch.int32):
        name = _LEGACY_TYPE.get(targets.dtype, dtypes.scalar_name(targets.dtype))
        raise RuntimeError(
            f"Expected tensor for argument #2 'targets' to have scalar type Int; but got torch.{name}Tensor instead"
            + _ctc_where()
        )
    if log_probs.dim() != 3:
        raise RuntimeError(
            f"Expected 3-dimensional tensor, but got {log_probs.dim()}-dimensional tensor for argument #1 "
            "'log_probs'" + _ctc_where()
        )
    T, N, C = log_probs.shape
    if not 0 <= blank < C:
        raise RuntimeError("blank must be in label range")
    if len(input_lengths) != N:
        raise RuntimeError("input_lengths must be of size batch_size")
    if len(target_lengths) != N:
        raise RuntimeError("target_lengths must be of size batch_size")
    for n in target_lengths:
        if n < 0:
            raise RuntimeError(f"Expected target_lengths to have value at least 0, but got value {n}" + _ctc_where())
    longest = max(target_lengths, default=0)
    if targets.dim() == 1:
        offsets, pos = [], 0
        for n in target_lengths:
            offsets.append(pos)
            pos += n
        if targets.shape[0] != pos:
            raise RuntimeError(
                f"Expected tensor to have size {pos} at dimension 0, but got size {targets.shape[0]} for argument "
                "#2 'targets'" + _ctc_where()
            )
    else:
        if targets.shape[0] != N:
            raise RuntimeError(
                f"Expected tensor to have size {N} at dimension 0, but got size {targets.shape[0]} for argument "
                "#2 'targets'" + _ctc_where()
            )
        if targets.shape[1] < longest:
            raise RuntimeError(
                f"Expected tensor to have size at least {longest} at dimension 1, but got size {targets.shape[1]} "
                "for argument #2 'targets'" + _ctc_where()
            )
        offsets = [i * targets.shape[1] for i in range(N)]
    for n in input_lengths:
        if n < 0:
            raise RuntimeError(f"Expected input_lengths to have value at least 0, but got value {n}" + _ctc_where())
        if n > T:
            raise RuntimeError(f"Expected input_lengths to have value at most {T}, but got value {n}" + _ctc_where())
    return offsets, longest


def _ctc_lengths(v) -> list[int]:
    return [int(n) for n in (v.tolist() if isinstance(v, torch.Tensor) else v)]


def _ctc_labels(flat_targets, offsets, target_lengths, longest, blank):
    """The extended label sequence l' (blank, l1, blank, l2, ..., blank) per batch item, padded with blank."""
    s = jnp.arange(2 * longest + 1)
    k = (s - 1) // 2
    idx = offsets[:, None] + jnp.clip(k, 0, None)[None, :]
    idx = jnp.clip(idx, 0, max(flat_targets.shape[0] - 1, 0))
    labels = flat_targets[idx] if flat_targets.shape[0] else jnp.zeros(idx.shape, jnp.int64)
    odd = (s % 2 == 1)[None, :] & (k[None, :] < target_lengths[:, None])
    return jnp.where(odd, labels, blank).astype(jnp.int64)


def _exp(x):
    """exp as CPU's libm gives it for float32 (correctly rounded): in double, rounded once."""
    return jnp.exp(x.astype(jnp.float64)).astype(x.dtype)


def _log(x):
    return jnp.log(x.astype(jnp.float64)).astype(x.dtype)


def _log3(a, b, c):
    """CPU's log(exp(a - m) + exp(b - m) + exp(c - m)) + m, m the largest (0 when all are -inf)."""
    m = jnp.maximum(jnp.maximum(a, b), c)
    m = jnp.where(m == _NEG_INF, 0, m)
    return _log(_exp(a - m) + _exp(b - m) + _exp(c - m)) + m


def _ctc_forward_body(lp, flat_targets, offsets, input_lengths, target_lengths, blank, longest):
    T, N, _ = lp.shape
    S = 2 * longest + 1
    labels = _ctc_labels(flat_targets, offsets, target_lengths, longest, blank)  # (N, S)
    s = jnp.arange(S)
    valid = s[None, :] < 2 * target_lengths[:, None] + 1
    skip = (s[None, :] > 1) & (labels != jnp.roll(labels, 2, axis=1))  # l'[s-2] != l'[s]
    emit = jnp.take_along_axis(jnp.moveaxis(lp, 0, 1), jnp.broadcast_to(labels[:, None, :], (N, T, S)), axis=2)
    neg = jnp.full((N, S), _NEG_INF, lp.dtype)
    first = jnp.where((s == 0)[None, :] | ((s == 1)[None, :] & (target_lengths[:, None] > 0)), emit[:, 0], neg)
    first = jnp.where(input_lengths[:, None] > 0, first, neg)

    def step(prev, t):
        la2 = jnp.concatenate([neg[:, :1], prev[:, :-1]], axis=1)
        la3 = jnp.where(skip, jnp.concatenate([neg[:, :2], prev[:, :-2]], axis=1), _NEG_INF)
        row = _log3(prev, la2, la3) + emit[:, t]
        row = jnp.where(valid & (t < input_lengths)[:, None], row, _NEG_INF)
        return row, row

    _, rows = jax.lax.scan(step, first, jnp.arange(1, T))
    log_alpha = jnp.concatenate([first[:, None], jnp.moveaxis(rows, 0, 1)], axis=1)  # (N, T, S)
    last = jnp.take_along_axis(log_alpha, jnp.clip(input_lengths - 1, 0, None)[:, None, None], axis=1)[:, 0]
    l1 = jnp.take_along_axis(last, (2 * target_lengths)[:, None], axis=1)[:, 0]
    l2 = jnp.take_along_axis(last, jnp.clip(2 * target_lengths - 1, 0, None)[:, None], axis=1)[:, 0]
    m = jnp.maximum(l1, l2)
    m = jnp.where(m == _NEG_INF, 0, m)
    ll = jnp.where(target_lengths == 0, l1, _log(_exp(l1 - m) + _exp(l2 - m)) + m)
    ll = jnp.where(input_lengths == 0, jnp.where(target_lengths == 0, 0, _NEG_INF), ll)
    return -ll, log_alpha


def _ctc_backward_body(
    g, lp, flat_targets, offsets, input_lengths, target_lengths, nll, log_alpha, blank, longest, zero_infinity
):
    T, N, C = lp.shape
    S = 2 * longest + 1
    labels = _ctc_labels(flat_targets, offsets, target_lengths, longest, blank)
    s = jnp.arange(S)
    end = 2 * target_lengths[:, None]
    skip = (s[None, :] < end - 1) & (labels != jnp.roll(labels, -2, axis=1))  # l'[s+2] != l'[s]
    emit = jnp.take_along_axis(jnp.moveaxis(lp, 0, 1), jnp.broadcast_to(labels[:, None, :], (N, T, S)), axis=2)
    neg = jnp.full((N, S), _NEG_INF, lp.dtype)

    def step(nxt, t):
        lb2 = jnp.where(s[None, :] < end, jnp.concatenate([nxt[:, 1:], neg[:, :1]], axis=1), _NEG_INF)
        lb3 = jnp.where(skip, jnp.concatenate([nxt[:, 2:], neg[:, :2]], axis=1), _NEG_INF)
        rec = _log3(nxt, lb2, lb3) + emit[:, t]
        start = jnp.where((s[None, :] == end) | ((s[None, :] == end - 1) & (end > 0)), emit[:, t], _NEG_INF)
        il = input_lengths[:, None]
        row = jnp.where(t == il - 1, start, jnp.where(t < il - 1, rec, _NEG_INF))
        row = jnp.where(s[None, :] <= end, row, _NEG_INF)
        return row, row

    _, rows = jax.lax.scan(step, neg, jnp.arange(T - 1, -1, -1))
    log_beta = jnp.moveaxis(rows[::-1], 0, 1)  # (N, T, S)
    ab = log_alpha + log_beta
    ab = jnp.where((s[None, None, :] <= end[:, :, None]) & (log_beta > _NEG_INF), ab, _NEG_INF)
    # CPU assigns (not log-adds) the last row's two entries, the non-blank one second: when that
    # label is the blank itself (a target holding the blank), it overwrites the blank's entry
    last_label = jnp.take_along_axis(labels, jnp.clip(end - 1, 0, None), axis=1)  # (N, 1)
    overwritten = (end > 0) & (last_label == blank)
    last_row = jnp.arange(T)[None, :, None] == (input_lengths[:, None, None] - 1)
    ab = jnp.where(last_row & overwritten[:, :, None] & (s[None, None, :] == end[:, :, None]), _NEG_INF, ab)
    classes = jnp.arange(C)

    def log_add(lcab, k):  # CPU's order: s from 2 * target_length down to 0, "log+=" into lcab[t, l'[s]]
        v = ab[:, :, k][..., None]  # (N, T, 1)
        hit = (labels[:, k][:, None, None] == classes[None, None, :]) & (v > _NEG_INF)
        m = jnp.maximum(lcab, v)
        merged = jnp.where(lcab == _NEG_INF, v, _log(_exp(lcab - m) + _exp(v - m)) + m)
        return jnp.where(hit, merged, lcab), None

    lcab, _ = jax.lax.scan(log_add, jnp.full((N, T, C), _NEG_INF, lp.dtype), jnp.arange(S - 1, -1, -1))
    lpn = jnp.moveaxis(lp, 0, 1)
    res = (_exp(lpn) - _exp(lcab + nll[:, None, None] - lpn)) * g[:, None, None]
    keep = jnp.arange(T)[None, :, None] < input_lengths[:, None, None]
    if zero_infinity:
        keep = keep & (nll != jnp.inf)[:, None, None]
    return jnp.moveaxis(jnp.where(keep, res, 0), 0, 1)


def _ctc_arrays(targets, input_lengths, target_lengths, offsets):
    i64 = jnp.int64
    flat = J(targets).reshape(-1).astype(i64)
    return flat, jnp.asarray(offsets, i64), jnp.asarray(input_lengths, i64), jnp.asarray(target_lengths, i64)


@register_functional(aten._ctc_loss.default, aten._ctc_loss.Tensor)
def ctc_loss(log_probs, targets, input_lengths, target_lengths, blank=0, zero_infinity=False):
    """(neg_log_likelihood, log_alpha) as CPU computes them; log_alpha is -inf where CPU leaves it
    unwritten (rows past an input's length, states past its target's)."""
    il, tl = _ctc_lengths(input_lengths), _ctc_lengths(target_lengths)
    offsets, longest = _ctc_checks(log_probs, targets, il, tl, blank)
    arrays = _ctc_arrays(targets, il, tl, offsets)
    return compiled(_ctc_forward_body, int(blank), longest)(J(log_probs), *arrays)


@register_functional(aten._ctc_loss_backward.default, aten._ctc_loss_backward.Tensor)
def ctc_loss_backward(
    grad, log_probs, targets, input_lengths, target_lengths, neg_log_likelihood, log_alpha, blank, zero_infinity=False
):
    il, tl = _ctc_lengths(input_lengths), _ctc_lengths(target_lengths)
    offsets, longest = _ctc_checks(log_probs, targets, il, tl, blank)
    arrays = _ctc_arrays(targets, il, tl, offsets)
    lp = J(log_probs)
    fn = compiled(_ctc_backward_body, int(blank), longest, bool(zero_infinity))
    return fn(J(grad).astype(lp.dtype), lp, *arrays, J(neg_log_likelihood), J(log_alpha))
