"""Pooling: max_pool2d_with_indices (+ backward through the saved indices, as PyTorch routes
gradients), avg_pool2d (+ backward), adaptive average pooling (+ backward).

Windows are gathered with k*k strided slices of the padded input, which keeps PyTorch's output
sizes (ceil_mode included), its first-maximum tie-breaking and its NaN propagation.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from jaxdev import dtypes
from jaxdev.ops.registry import aten, register_backward, register_functional
from jaxdev.ops.toolkit import J, jitted, opmath


def _pair(v, default=None):
    if v is None or len(v) == 0:
        return default
    return (v[0], v[0]) if len(v) == 1 else tuple(v)


def out_size(size, k, pad, stride, dilation, ceil):
    o = (size + 2 * pad - dilation * (k - 1) - 1 + (stride - 1 if ceil else 0)) // stride + 1
    if ceil and (o - 1) * stride >= size + pad:
        o -= 1
    return o


def _windows(x, k, s, p, d, ceil, fill):
    """(..., oh, ow, kh*kw) windows of the last two dims, and the output size."""
    H, W = x.shape[-2:]
    oh, ow = out_size(H, k[0], p[0], s[0], d[0], ceil), out_size(W, k[1], p[1], s[1], d[1], ceil)
    if oh <= 0 or ow <= 0:
        raise RuntimeError(
            f"Given input size: ({'x'.join(map(str, x.shape[-3:]))}). Calculated output size: ({x.shape[-3] if x.ndim >= 3 else 1}x{oh}x{ow}). Output size is too small"
        )
    hi_h = max(0, (oh - 1) * s[0] + d[0] * (k[0] - 1) + 1 - H - p[0])
    hi_w = max(0, (ow - 1) * s[1] + d[1] * (k[1] - 1) + 1 - W - p[1])
    pad = [(0, 0)] * (x.ndim - 2) + [(p[0], hi_h), (p[1], hi_w)]
    xp = jnp.pad(x, pad, constant_values=fill)
    parts = []
    for i in range(k[0]):
        for j in range(k[1]):
            h0, w0 = i * d[0], j * d[1]
            parts.append(xp[..., h0 : h0 + (oh - 1) * s[0] + 1 : s[0], w0 : w0 + (ow - 1) * s[1] + 1 : s[1]])
    return jnp.stack(parts, axis=-1), oh, ow


def _lowest(dtype):
    return -jnp.inf if jnp.issubdtype(dtype, jnp.floating) else jnp.iinfo(dtype).min


@jitted
def _max_pool(k, s, p, d, ceil):
    def run(x):
        win, oh, ow = _windows(x, k, s, p, d, ceil, _lowest(x.dtype))
        arg = jnp.argmax(win, axis=-1)
        vals = jnp.take_along_axis(win, arg[..., None], axis=-1)[..., 0]
        ki, kj = arg // k[1], arg % k[1]
        rows = jnp.arange(oh)[:, None] * s[0] - p[0] + ki * d[0]
        cols = jnp.arange(ow)[None, :] * s[1] - p[1] + kj * d[1]
        return vals, (rows * x.shape[-1] + cols).astype(jnp.int64)

    return run


def _pool_args(kernel_size, stride, padding, dilation=(1,)):
    k = _pair(kernel_size)
    s = _pair(stride, k)
    p = _pair(padding, (0, 0))
    d = _pair(dilation, (1, 1))
    for pp, kk in zip(p, k):
        if pp > kk // 2:
            raise RuntimeError(
                f"pad should be at most half of effective kernel size, but got pad={pp}, kernel_size={kk} and dilation={d[0]}"
            )
    return k, s, p, d


@register_functional(aten.max_pool2d_with_indices.default)
def max_pool2d_with_indices(self, kernel_size, stride=(), padding=(0,), dilation=(1,), ceil_mode=False):
    k, s, p, d = _pool_args(kernel_size, stride, padding, dilation)
    return _max_pool(k, s, p, d, bool(ceil_mode))(J(self))


@register_functional(aten.max_pool2d_with_indices_backward.default)
def max_pool2d_with_indices_backward(grad_output, self, kernel_size, stride, padding, dilation, ceil_mode, indices):
    g, idx = J(grad_output), J(indices)
    H, W = self.shape[-2:]
    lead = g.shape[:-2]
    flat_g = g.reshape((-1, g.shape[-2] * g.shape[-1]))
    flat_i = idx.reshape(flat_g.shape)
    c = opmath(g.dtype)
    out = jnp.zeros((flat_g.shape[0], H * W), c)
    out = out.at[jnp.arange(flat_g.shape[0])[:, None], flat_i].add(flat_g.astype(c))
    return out.reshape(lead + (H, W)).astype(g.dtype)


def _avg_divisor(H, W, k, s, p, oh, ow, count_include_pad, divisor_override):
    if divisor_override:
        return np.full((oh, ow), divisor_override, np.float64)
    div = np.zeros((oh, ow), np.float64)
    for a in range(oh):
        for b in range(ow):
            h0, w0 = a * s[0] - p[0], b * s[1] - p[1]
            h1, w1 = min(h0 + k[0], H + p[0]), min(w0 + k[1], W + p[1])
            size = (h1 - h0) * (w1 - w0)
            if not count_include_pad:
                size = (min(h1, H) - max(h0, 0)) * (min(w1, W) - max(w0, 0))
            div[a, b] = size
    return div


def _avg(x, k, s, p, ceil, count_include_pad, divisor_override):
    win, oh, ow = _windows(x, k, s, p, (1, 1), ceil, 0)
    div = _avg_divisor(x.shape[-2], x.shape[-1], k, s, p, oh, ow, count_include_pad, divisor_override)
    return jnp.sum(win, axis=-1) / jnp.asarray(div, x.dtype)


@jitted
def _avg_pool(k, s, p, ceil, count_include_pad, divisor_override, compute, result):
    return lambda x: _avg(x.astype(compute), k, s, p, ceil, count_include_pad, divisor_override).astype(result)


@register_functional(aten.avg_pool2d.default)
def avg_pool2d(
    self, kernel_size, stride=(), padding=(0,), ceil_mode=False, count_include_pad=True, divisor_override=None
):
    k, s, p, _ = _pool_args(kernel_size, stride, padding)
    jdt = dtypes.to_jax_dtype(self.dtype)
    return _avg_pool(k, s, p, bool(ceil_mode), bool(count_include_pad), divisor_override, opmath(jdt), jdt)(J(self))


register_backward(aten.avg_pool2d_backward.default, aten.avg_pool2d.default)


def _bins(size, out):
    """PyTorch's adaptive bins as an (out, size) averaging matrix."""
    m = np.zeros((out, size), np.float64)
    for i in range(out):
        start, end = (i * size) // out, -((-(i + 1) * size) // out)
        m[i, start:end] = 1.0 / (end - start)
    return m


@jitted
def _adaptive(H, W, oh, ow, compute, result):
    ph, pw = _bins(H, oh), _bins(W, ow)

    def run(x):
        y = jnp.einsum(
            "ah,...hw,bw->...ab",
            jnp.asarray(ph, compute),
            x.astype(compute),
            jnp.asarray(pw, compute),
            precision=jax.lax.Precision.HIGHEST,
        )
        return y.astype(result)

    return run


@register_functional(aten._adaptive_avg_pool2d.default)
def adaptive_avg_pool2d(self, output_size):
    oh, ow = _pair(output_size)
    H, W = self.shape[-2:]
    jdt = dtypes.to_jax_dtype(self.dtype)
    return _adaptive(H, W, oh, ow, opmath(jdt), jdt)(J(self))


def output_size_of(spatial: int):
    """For an adaptive pool's backward, which carries the output size only as grad_output's shape."""
    return lambda args, grad_output: {**args, "output_size": tuple(grad_output.shape[-spatial:])}


register_backward(
    aten._adaptive_avg_pool2d_backward.default, aten._adaptive_avg_pool2d.default, prepare=output_size_of(2)
)
