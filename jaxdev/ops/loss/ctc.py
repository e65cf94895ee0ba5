"""CTC loss, forward and backward (CPU: LossCTC.cpp): the alpha / beta recursions as scans over time."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import torch

from jaxdev import dtypes
from jaxdev.ops.kit import J, compiled
from jaxdev.ops.kit.cpu_numerics import exp_wide, log_wide
from jaxdev.ops.registry import aten, register_functional

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


# exp and log as CPU's libm gives them for float32 (correctly rounded): in double, rounded once.
_exp, _log = exp_wide, log_wide


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
