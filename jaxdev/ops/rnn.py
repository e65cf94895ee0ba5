"""The fused LSTM and GRU cells PyTorch's RNN modules use on accelerator devices (as on CUDA),
with backward kernels. The workspace layout is jaxdev's own: the forward saves exactly what its
backward reads.

LSTM workspace: activated gates [i, f, g, o] (B, 4H).
GRU workspace:  [r, z, n, h_n, hx] (B, 5H), h_n the hidden part of the new gate before r scales it.
"""

from __future__ import annotations

import jax.numpy as jnp

from jaxdev.ops.kit import J, opmath
from jaxdev.ops.kit import transcendentals as tm
from jaxdev.ops.registry import aten, register_functional


def _opt(t):
    return None if t is None else J(t)


@register_functional(aten._thnn_fused_lstm_cell.default)
def lstm_cell(input_gates, hidden_gates, cx, input_bias=None, hidden_bias=None):
    gi, gh, c = J(input_gates), J(hidden_gates), J(cx)
    dt = gi.dtype
    k = opmath(dt)
    gates = gi.astype(k) + gh.astype(k)
    if input_bias is not None:
        gates = gates + J(input_bias).astype(k) + J(hidden_bias).astype(k)
    i, f, g, o = jnp.split(gates, 4, axis=1)
    i, f, g, o = tm.sigmoid(i), tm.sigmoid(f), tm.tanh(g), tm.sigmoid(o)
    cy = f * c.astype(k) + i * g
    hy = o * tm.tanh(cy)
    return hy.astype(dt), cy.astype(dt), jnp.concatenate([i, f, g, o], axis=1).astype(dt)


@register_functional(aten._thnn_fused_lstm_cell_backward_impl.default)
def lstm_cell_backward(grad_hy, grad_cy, cx, cy, workspace, has_bias):
    ws = J(workspace)
    dt = ws.dtype
    k = opmath(dt)
    i, f, g, o = jnp.split(ws.astype(k), 4, axis=1)
    c, cyv = J(cx).astype(k), J(cy).astype(k)
    ghy = J(grad_hy).astype(k) if grad_hy is not None else jnp.zeros_like(cyv)
    gcy = J(grad_cy).astype(k) if grad_cy is not None else jnp.zeros_like(cyv)
    tcy = tm.tanh(cyv)
    d_o = ghy * tcy
    dc = gcy + ghy * o * (1 - tcy * tcy)
    d_i, d_f, d_g, d_cx = dc * g, dc * c, dc * i, dc * f
    grad_gates = jnp.concatenate([d_i * i * (1 - i), d_f * f * (1 - f), d_g * (1 - g * g), d_o * o * (1 - o)], axis=1)
    grad_bias = jnp.sum(grad_gates, axis=0).astype(dt) if has_bias else None
    return grad_gates.astype(dt), d_cx.astype(dt), grad_bias


@register_functional(aten._thnn_fused_gru_cell.default)
def gru_cell(input_gates, hidden_gates, hx, input_bias=None, hidden_bias=None):
    gi, gh, h = J(input_gates), J(hidden_gates), J(hx)
    dt = gi.dtype
    k = opmath(dt)
    gi, gh, h = gi.astype(k), gh.astype(k), h.astype(k)
    if input_bias is not None:
        gi = gi + J(input_bias).astype(k)
        gh = gh + J(hidden_bias).astype(k)
    ir, iz, in_ = jnp.split(gi, 3, axis=1)
    hr, hz, hn = jnp.split(gh, 3, axis=1)
    r = tm.sigmoid(ir + hr)
    z = tm.sigmoid(iz + hz)
    n = tm.tanh(in_ + r * hn)
    hy = n + z * (h - n)
    return hy.astype(dt), jnp.concatenate([r, z, n, hn, h], axis=1).astype(dt)


@register_functional(aten._thnn_fused_gru_cell_backward.default)
def gru_cell_backward(grad_hy, workspace, has_bias):
    ws = J(workspace)
    dt = ws.dtype
    k = opmath(dt)
    r, z, n, hn, h = jnp.split(ws.astype(k), 5, axis=1)
    g = J(grad_hy).astype(k)
    d_z = g * (h - n)
    d_n = g * (1 - z)
    d_hx = g * z
    d_npre = d_n * (1 - n * n)
    d_r = d_npre * hn
    d_rpre = d_r * r * (1 - r)
    d_zpre = d_z * z * (1 - z)
    grad_input = jnp.concatenate([d_rpre, d_zpre, d_npre], axis=1)
    grad_hidden = jnp.concatenate([d_rpre, d_zpre, d_npre * r], axis=1)
    bias = (
        (jnp.sum(grad_input, axis=0).astype(dt), jnp.sum(grad_hidden, axis=0).astype(dt)) if has_bias else (None, None)
    )
    return (grad_input.astype(dt), grad_hidden.astype(dt), d_hx.astype(dt)) + bias
