"""Volumetric pooling: max_pool3d_with_indices, avg_pool3d, _adaptive_avg_pool3d, adaptive max pooling
(2d and 3d), each with its backward; max_unpool2d/3d.

Same method as pooling.py, over three spatial dims: windows are gathered with strided slices of the
padded input (PyTorch's output sizes, first-maximum ties, NaN propagation); indices are flat over
the input's D*H*W; backward kernels are the transposes of the forwards (scatter-add through the
saved indices for max pooling, a vjp for the averaging ones), accumulated in float32 for half.
"""

from __future__ import annotations

import functools
import itertools

import jax
import jax.numpy as jnp
import numpy as np
import torch

from jaxdev import dtypes, tracing
from jaxdev.ops.pooling import _bins, _lowest, out_size, output_size_of
from jaxdev.ops.registry import aten, register_backward, register_functional
from jaxdev.ops.toolkit import J, jitted, opmath


def _triple(v, default=None):
    if v is None or len(v) == 0:
        return default
    return (v[0],) * 3 if len(v) == 1 else tuple(v)


def _args(self, kernel_size, stride, padding, dilation=(1,)):
    k = _triple(kernel_size)
    s = _triple(stride, k)
    p = _triple(padding, (0, 0, 0))
    d = _triple(dilation, (1, 1, 1))
    if self.dim() not in (4, 5):
        raise RuntimeError("non-empty 4D or 5D (batch mode) tensor expected for input")
    for pp, kk in zip(p, k):
        if pp > kk // 2:
            raise RuntimeError(
                f"pad should be smaller than or equal to half of kernel size, but got kT={k[0]} kW={k[2]} kH={k[1]} padT={p[0]} padW={p[2]} padH={p[1]}"
            )
    return k, s, p, d


def _windows(x, k, s, p, d, ceil, fill):
    """(..., od, oh, ow, kd*kh*kw) windows of the last three dims, and the output sizes."""
    sizes = x.shape[-3:]
    outs = tuple(out_size(n, kk, pp, ss, dd, ceil) for n, kk, pp, ss, dd in zip(sizes, k, p, s, d))
    if min(outs) <= 0:
        raise RuntimeError(
            f"Given input size: ({'x'.join(map(str, x.shape[-4:]))}). Calculated output size: "
            f"({x.shape[-4] if x.ndim >= 4 else 1}x{'x'.join(map(str, outs))}). Output size is too small"
        )
    his = [max(0, (o - 1) * ss + dd * (kk - 1) + 1 - n - pp) for o, ss, dd, kk, n, pp in zip(outs, s, d, k, sizes, p)]
    xp = jnp.pad(x, [(0, 0)] * (x.ndim - 3) + [(pp, hi) for pp, hi in zip(p, his)], constant_values=fill)
    parts = []
    for offs in itertools.product(*(range(kk) for kk in k)):
        idx = tuple(slice(o * dd, o * dd + (n - 1) * ss + 1, ss) for o, dd, n, ss in zip(offs, d, outs, s))
        parts.append(xp[(Ellipsis,) + idx])
    return jnp.stack(parts, axis=-1), outs


@jitted
def _max_pool(k, s, p, d, ceil):
    def run(x):
        win, (od, oh, ow) = _windows(x, k, s, p, d, ceil, _lowest(x.dtype))
        arg = jnp.argmax(win, axis=-1)  # the first maximum; a NaN counts as the maximum
        vals = jnp.take_along_axis(win, arg[..., None], axis=-1)[..., 0]
        kd, rest = arg // (k[1] * k[2]), arg % (k[1] * k[2])
        kh, kw = rest // k[2], rest % k[2]
        H, W = x.shape[-2:]
        di = jnp.arange(od)[:, None, None] * s[0] - p[0] + kd * d[0]
        hi = jnp.arange(oh)[None, :, None] * s[1] - p[1] + kh * d[1]
        wi = jnp.arange(ow)[None, None, :] * s[2] - p[2] + kw * d[2]
        return vals, ((di * H + hi) * W + wi).astype(jnp.int64)

    return run


@register_functional(aten.max_pool3d_with_indices.default)
def max_pool3d_with_indices(self, kernel_size, stride=(), padding=(0,), dilation=(1,), ceil_mode=False):
    k, s, p, d = _args(self, kernel_size, stride, padding, dilation)
    return _max_pool(k, s, p, d, bool(ceil_mode))(J(self))


@jitted
def _index_scatter(spatial):
    """Gradient through flat spatial indices: (..., out positions) -> (..., *spatial)."""
    size = int(np.prod(spatial))

    def run(g, idx):
        lead = g.shape[: g.ndim - len(spatial)]
        c = opmath(g.dtype)
        fg = g.reshape((-1, int(np.prod(g.shape[len(lead) :]))))
        fi = idx.reshape(fg.shape)
        out = jnp.zeros((fg.shape[0], size), c).at[jnp.arange(fg.shape[0])[:, None], fi].add(fg.astype(c))
        return out.reshape(lead + spatial).astype(g.dtype)

    return run


@register_functional(aten.max_pool3d_with_indices_backward.default)
def max_pool3d_with_indices_backward(grad_output, self, kernel_size, stride, padding, dilation, ceil_mode, indices):
    return _index_scatter(tuple(self.shape[-3:]))(J(grad_output), J(indices))


def _avg_divisor(sizes, k, s, p, outs, count_include_pad, divisor_override):
    if divisor_override:
        return np.full(outs, divisor_override, np.float64)
    per_dim = []
    for n, kk, ss, pp, o in zip(sizes, k, s, p, outs):
        start = np.arange(o) * ss - pp
        end = np.minimum(start + kk, n + pp)
        per_dim.append((end - start) if count_include_pad else (np.minimum(end, n) - np.maximum(start, 0)))
    return per_dim[0][:, None, None] * per_dim[1][None, :, None] * per_dim[2][None, None, :]


def _avg(x, k, s, p, ceil, count_include_pad, divisor_override):
    win, outs = _windows(x, k, s, p, (1, 1, 1), ceil, 0)
    div = _avg_divisor(x.shape[-3:], k, s, p, outs, count_include_pad, divisor_override)
    return jnp.sum(win, axis=-1) / jnp.asarray(div, x.dtype)


@jitted
def _avg_pool(k, s, p, ceil, count_include_pad, divisor_override, compute, result):
    return lambda x: _avg(x.astype(compute), k, s, p, ceil, count_include_pad, divisor_override).astype(result)


def _avg_kernels(self, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override):
    k, s, p, _ = _args(self, kernel_size, stride, padding)
    if divisor_override is not None and divisor_override == 0:
        raise RuntimeError("divisor must be not zero")
    jdt = dtypes.to_jax_dtype(self.dtype)
    return _avg_pool(k, s, p, bool(ceil_mode), bool(count_include_pad), divisor_override, opmath(jdt), jdt)


@register_functional(aten.avg_pool3d.default)
def avg_pool3d(
    self, kernel_size, stride=(), padding=(0,), ceil_mode=False, count_include_pad=True, divisor_override=None
):
    return _avg_kernels(self, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override)(J(self))


register_backward(aten.avg_pool3d_backward.default, aten.avg_pool3d.default)


# --- adaptive pooling ----------------------------------------------------------------------------


@jitted
def _adaptive_avg(sizes, outs, compute, result):
    mats = [np.asarray(_bins(n, o), compute) for n, o in zip(sizes, outs)]

    def fwd(x):
        y = jnp.einsum("ad,be,cf,...def->...abc", *mats, x.astype(compute), precision=jax.lax.Precision.HIGHEST)
        return y.astype(result)

    return fwd


def _adaptive_kernels(self, outs):
    jdt = dtypes.to_jax_dtype(self.dtype)
    return _adaptive_avg(tuple(self.shape[-3:]), tuple(outs), opmath(jdt), jdt)


@register_functional(aten._adaptive_avg_pool3d.default)
def adaptive_avg_pool3d(self, output_size):
    if len(output_size) != 3:
        raise RuntimeError("adaptive_avg_pool3d: output_size must be 3")
    if self.dim() not in (4, 5):
        raise RuntimeError(f"adaptive_avg_pool3d(): Expected 4D or 5D tensor, but got {list(self.shape)}")
    return _adaptive_kernels(self, output_size)(J(self))


register_backward(
    aten._adaptive_avg_pool3d_backward.default, aten._adaptive_avg_pool3d.default, prepare=output_size_of(3)
)


@jitted
def _adaptive_max(sizes, outs):
    """Max over PyTorch's adaptive bins; indices flat over the spatial dims (first max, NaN wins).

    Each dim gathers a fixed-width window per bin (the widest bin's width, extra taps masked)."""
    nd = len(sizes)
    taps = []
    for n, o in zip(sizes, outs):
        start = np.array([(i * n) // o for i in range(o)])
        end = np.array([-((-(i + 1) * n) // o) for i in range(o)])
        pos = start[:, None] + np.arange(int((end - start).max()))[None, :]
        taps.append((np.minimum(pos, n - 1), pos < end[:, None], pos))
    strides = [int(np.prod(sizes[j + 1 :])) for j in range(nd)]

    def run(x):
        lead = x.ndim - nd
        for k, (idx, _, _) in enumerate(taps):
            axis = lead + 2 * k
            g = jnp.take(x, jnp.asarray(idx.reshape(-1)), axis=axis)
            x = g.reshape(g.shape[:axis] + idx.shape + g.shape[axis + 1 :])
        perm = tuple(range(lead)) + tuple(lead + 2 * k for k in range(nd)) + tuple(lead + 2 * k + 1 for k in range(nd))
        x = jnp.transpose(x, perm)
        valid = functools.reduce(
            np.logical_and,
            [
                t[1].reshape(
                    (1,) * k
                    + (t[1].shape[0],)
                    + (1,) * (nd - 1 - k)
                    + (1,) * k
                    + (t[1].shape[1],)
                    + (1,) * (nd - 1 - k)
                )
                for k, t in enumerate(taps)
            ],
        )
        flat_index = sum(
            t[2].reshape(
                (1,) * k + (t[2].shape[0],) + (1,) * (nd - 1 - k) + (1,) * k + (t[2].shape[1],) + (1,) * (nd - 1 - k)
            )
            * st
            for k, (t, st) in enumerate(zip(taps, strides))
        )
        win = jnp.where(valid, x, _lowest(x.dtype)).reshape(x.shape[: lead + nd] + (-1,))
        arg = jnp.argmax(win, axis=-1)
        vals = jnp.take_along_axis(win, arg[..., None], axis=-1)[..., 0]
        index = jnp.asarray(flat_index.reshape(tuple(outs) + (-1,)))
        return vals, jnp.take_along_axis(
            jnp.broadcast_to(index, arg.shape + index.shape[-1:]), arg[..., None], axis=-1
        )[..., 0].astype(jnp.int64)

    return run


@register_functional(aten.adaptive_max_pool2d.default)
def adaptive_max_pool2d(self, output_size):
    return _adaptive_max(tuple(self.shape[-2:]), tuple(output_size))(J(self))


@register_functional(aten.adaptive_max_pool3d.default)
def adaptive_max_pool3d(self, output_size):
    return _adaptive_max(tuple(self.shape[-3:]), tuple(output_size))(J(self))


@register_functional(aten.adaptive_max_pool2d_backward.default)
def adaptive_max_pool2d_backward(grad_output, self, indices):
    return _index_scatter(tuple(self.shape[-2:]))(J(grad_output), J(indices))


@register_functional(aten.adaptive_max_pool3d_backward.default)
def adaptive_max_pool3d_backward(grad_output, self, indices):
    return _index_scatter(tuple(self.shape[-3:]))(J(grad_output), J(indices))


# --- max unpooling: values back to where their indices point, zeros elsewhere ------------------


@jitted
def _unpool(spatial):
    size = int(np.prod(spatial))

    def run(x, idx):
        lead = x.shape[: x.ndim - len(spatial)]
        fx = x.reshape((-1, int(np.prod(x.shape[len(lead) :]))))
        fi = idx.reshape(fx.shape)
        out = jnp.zeros((fx.shape[0], size), x.dtype).at[jnp.arange(fx.shape[0])[:, None], fi].set(fx)
        return out.reshape(lead + spatial)

    return run


def _max_unpool(self, indices, output_size, nd):
    if indices.dtype != torch.int64:
        raise RuntimeError(f"elements in indices should be type int64 but got: {indices.dtype}")
    if tuple(self.shape) != tuple(indices.shape):
        raise RuntimeError(
            f"Expected shape of indices to be same as that of the input tensor ({list(self.shape)}) but got indices tensor with shape: {list(indices.shape)}"
        )
    spatial = tuple(output_size)
    if len(spatial) != nd:
        raise RuntimeError(f"There should be exactly {nd} elements but got {len(spatial)}")
    i = J(indices)
    volume = int(np.prod(spatial))

    def error():
        bad = int(jnp.max(i)) if int(jnp.max(i)) >= volume else int(jnp.min(i))
        return RuntimeError(
            f"Found an invalid max index: {bad} (output volumes are of size {'x'.join(map(str, spatial))}"
        )

    if i.size:
        tracing.check_values((i < 0) | (i >= volume), error)
    return _unpool(spatial)(J(self), i)


@register_functional(aten.max_unpool2d.default)
def max_unpool2d(self, indices, output_size):
    return _max_unpool(self, indices, output_size, 2)


@register_functional(aten.max_unpool3d.default)
def max_unpool3d(self, indices, output_size, stride, padding):
    return _max_unpool(self, indices, output_size, 3)
