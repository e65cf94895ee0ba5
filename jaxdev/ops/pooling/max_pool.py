"""Max pooling with indices (flat over the input's spatial dims, the first maximum on ties, NaN
propagated), adaptive max pooling, and max unpooling; gradients go back through the saved indices
(scatter-add), as PyTorch routes them."""

from __future__ import annotations

import functools

import jax.numpy as jnp
import numpy as np
import torch

from jaxdev import dtypes, tracing
from jaxdev.ops.kit import J, jitted, opmath
from jaxdev.ops.kit.index_checks import alert_not_deterministic
from jaxdev.ops.pooling.windows import along, check_not_empty, lowest, pool_args, windows
from jaxdev.ops.registry import aten, register_functional


@jitted
def _max_pool(k, s, p, d, ceil):
    nd = len(k)

    def run(x):
        win, outs = windows(x, k, s, p, d, ceil, lowest(x.dtype))
        arg = jnp.argmax(win, axis=-1)  # the first maximum; a NaN counts as the maximum
        vals = jnp.take_along_axis(win, arg[..., None], axis=-1)[..., 0]
        flat, rest = 0, arg
        sizes = x.shape[-nd:]
        for j in range(nd):
            inner = int(np.prod(k[j + 1 :]))
            kj, rest = rest // inner, rest % inner
            position = along(jnp.arange(outs[j]), j, nd) * s[j] - p[j] + kj * d[j]
            flat = flat * sizes[j] + position
        return vals, flat.astype(jnp.int64)

    return run


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

    def spread(a, k):
        """(bins, taps) of dim k -> broadcastable over (*bins of every dim, *taps of every dim)."""
        return a.reshape((1,) * k + (a.shape[0],) + (1,) * (nd - 1) + (a.shape[1],) + (1,) * (nd - 1 - k))

    valid = functools.reduce(np.logical_and, [spread(t[1], k) for k, t in enumerate(taps)])
    flat_index = sum(spread(t[2], k) * st for k, (t, st) in enumerate(zip(taps, strides)))
    index = flat_index.reshape(tuple(outs) + (-1,))

    def run(x):
        lead = x.ndim - nd
        for k, (idx, _, _) in enumerate(taps):
            axis = lead + 2 * k
            g = jnp.take(x, jnp.asarray(idx.reshape(-1)), axis=axis)
            x = g.reshape(g.shape[:axis] + idx.shape + g.shape[axis + 1 :])
        perm = tuple(range(lead)) + tuple(lead + 2 * k for k in range(nd)) + tuple(lead + 2 * k + 1 for k in range(nd))
        x = jnp.transpose(x, perm)
        win = jnp.where(valid, x, lowest(x.dtype)).reshape(x.shape[: lead + nd] + (-1,))
        arg = jnp.argmax(win, axis=-1)
        vals = jnp.take_along_axis(win, arg[..., None], axis=-1)[..., 0]
        flat = jnp.take_along_axis(jnp.broadcast_to(index, arg.shape + index.shape[-1:]), arg[..., None], axis=-1)
        return vals, flat[..., 0].astype(jnp.int64)

    return run


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
    alert_not_deterministic(f"max_unpooling{nd}d_forward_out")  # duplicate indices write in any order
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


def _register(nd: int) -> None:
    def op(name):
        return getattr(aten, name.format(nd=nd)).default

    @register_functional(op("max_pool{nd}d_with_indices"))
    def max_pool_with_indices(self, kernel_size, stride=(), padding=(0,), dilation=(1,), ceil_mode=False):
        k, s, p, d = pool_args(self, kernel_size, stride, padding, dilation, nd)
        return _max_pool(k, s, p, d, bool(ceil_mode))(J(self))

    @register_functional(op("max_pool{nd}d_with_indices_backward"))
    def max_pool_backward(grad_output, self, kernel_size, stride, padding, dilation, ceil_mode, indices):
        return _index_scatter(tuple(self.shape[-nd:]))(J(grad_output), J(indices))

    @register_functional(op("adaptive_max_pool{nd}d"))
    def adaptive_max_pool(self, output_size):
        check_not_empty(self, f"adaptive_max_pool{nd}d", 1)
        outs = tuple(output_size)
        if self.numel() == 0 or 0 in outs:  # an empty batch, or no bins: nothing to reduce
            shape = tuple(self.shape[:-nd]) + outs
            return jnp.zeros(shape, dtypes.to_jax_dtype(self.dtype)), jnp.zeros(shape, jnp.int64)
        return _adaptive_max(tuple(self.shape[-nd:]), outs)(J(self))

    @register_functional(op("adaptive_max_pool{nd}d_backward"))
    def adaptive_max_pool_backward(grad_output, self, indices):
        return _index_scatter(tuple(self.shape[-nd:]))(J(grad_output), J(indices))

    @register_functional(op("max_unpool{nd}d"))
    def max_unpool(self, indices, output_size, *geometry):  # 3-D also takes stride and padding
        return _max_unpool(self, indices, output_size, nd)


_register(2)
_register(3)
