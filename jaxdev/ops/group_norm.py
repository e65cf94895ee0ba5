"""Group norm, forward and backward: statistics per (sample, group) over the group's channels and
spatial positions; mean and rstd are saved shaped (N, group), in the input's dtype, as on CPU.
Computed in float32 for float16/bfloat16 inputs; each body is jitted whole (`compiled`).
"""

from __future__ import annotations

import math

import jax.numpy as jnp

from jaxdev.ops.kit import J, compiled, division, opmath
from jaxdev.ops.registry import aten, register_functional


def _group_size(x, C, group) -> int:
    """Elements per (sample, group), spelled out: reshape's -1 cannot be solved for an empty batch
    (N = 0 raised JAX's ZeroDivisionError where CPU returns empty results)."""
    return C // group * math.prod(x.shape[2:])


def _group_norm(x, w, b, N, C, group, eps):
    c = opmath(x.dtype)
    xg = x.astype(c).reshape((N, group, _group_size(x, C, group)))
    count = jnp.asarray(xg.shape[-1], c)  # means as sums over counts, IEEE's quotients (a TPU's are not)
    mean = division.divide(jnp.sum(xg, axis=-1), count)
    var = division.divide(jnp.sum(jnp.square(xg - mean[..., None]), axis=-1), count)
    rstd = division.divide(jnp.ones_like(var), division.sqrt(var + eps))  # IEEE's, as CPU's (a TPU's are not)
    y = ((xg - mean[..., None]) * rstd[..., None]).reshape(x.shape)
    shape = (1, C) + (1,) * (x.ndim - 2)
    if w is not None:
        y = y * w.astype(c).reshape(shape)
    if b is not None:
        y = y + b.astype(c).reshape(shape)
    return y.astype(x.dtype), mean.astype(x.dtype), rstd.astype(x.dtype)


def _opt(t):
    return None if t is None else J(t)


@register_functional(aten.native_group_norm.default)
def native_group_norm(input, weight, bias, N, C, HxW, group, eps):
    if C % group:
        raise RuntimeError(
            "Expected number of channels in input to be divisible by num_groups, but got input of "
            f"shape {list(input.shape)} and num_groups={group}"
        )
    return compiled(_group_norm, N, C, group, float(eps))(J(input), _opt(weight), _opt(bias))


def _group_norm_grad(g, x, mean, rstd, w, N, C, HxW, group, mask):
    c = opmath(x.dtype)
    g = g.astype(c).reshape((N, C, HxW))
    m, r = mean.astype(c), rstd.astype(c)
    n = (C // group) * HxW
    xhat = ((x.astype(c).reshape((N, group, n)) - m[..., None]) * r[..., None]).reshape((N, C, HxW))
    gxhat = g * w.astype(c)[None, :, None] if w is not None else g
    gxg, xg = gxhat.reshape((N, group, n)), xhat.reshape((N, group, n))
    gx = r[..., None] / n * (n * gxg - jnp.sum(gxg, -1, keepdims=True) - xg * jnp.sum(gxg * xg, -1, keepdims=True))
    pdt = w.dtype if w is not None else x.dtype
    return (
        gx.reshape(x.shape).astype(x.dtype) if mask[0] else None,
        jnp.sum(g * xhat, axis=(0, 2)).astype(pdt) if mask[1] else None,
        jnp.sum(g, axis=(0, 2)).astype(pdt) if mask[2] else None,
    )


@register_functional(aten.native_group_norm_backward.default)
def native_group_norm_backward(grad_out, input, mean, rstd, weight, N, C, HxW, group, output_mask):
    fn = compiled(_group_norm_grad, N, C, HxW, group, tuple(bool(m) for m in output_mask))
    return fn(J(grad_out), J(input), J(mean), J(rstd), _opt(weight))
