"""Fractional max pooling (CPU: FractionalMaxPool2d.cpp / 3d, FractionalMaxPooling.h)."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import torch

from jaxdev import dtypes
from jaxdev.ops.kit import J, jitted
from jaxdev.ops.registry import aten, register_functional


def _fractional_starts(sample, n_in, n_out, k):
    """CPU's generate_intervals, in the input's dtype (one rounding per operation, as scalar_t):
    start i = int((i + u) * alpha) - int(u * alpha), alpha = (in - k) / (out - 1); the last window
    ends at the input's end."""
    dt = sample.dtype
    last = jnp.full(sample.shape + (1,), n_in - k, jnp.int64)
    if n_out <= 1:
        return last[..., :n_out]
    alpha = jnp.asarray(n_in - k, dt) / jnp.asarray(n_out - 1, dt)
    i = jnp.arange(n_out - 1).astype(dt)
    starts = ((i + sample[..., None]) * alpha).astype(jnp.int64) - (sample * alpha).astype(jnp.int64)[..., None]
    return jnp.concatenate([starts, last], axis=-1)


@jitted
def _fractional_max(spatial: tuple, kernel: tuple, outs: tuple):
    nd = len(spatial)

    def plane(x, u):  # x: spatial, u: (nd,) samples, in CPU's order (2-D: W then H; 3-D: T, H, W)
        order = (1, 0) if nd == 2 else (0, 1, 2)
        axes = []
        for d in range(nd):
            start = _fractional_starts(u[order[d]], spatial[d], outs[d], kernel[d])
            axes.append(start[:, None] + jnp.arange(kernel[d])[None, :])  # (out_d, k_d)
        # position grids (*outs, *kernel) of each window element, in CPU's scan order
        grids = []
        for d in range(nd):
            shape = [1] * (2 * nd)
            shape[d], shape[nd + d] = outs[d], kernel[d]
            grids.append(axes[d].reshape(shape))
        flat = functools.reduce(lambda acc, d: acc * spatial[d] + grids[d], range(1, nd), grids[0])
        flat = jnp.broadcast_to(flat, outs + kernel).reshape(outs + (-1,))
        win = x.reshape(-1)[flat]
        nan = jnp.isnan(win)
        k = win.shape[-1]
        last_nan = k - 1 - jnp.argmax(nan[..., ::-1], axis=-1)  # CPU: `val > max || isnan(val)`
        pick = jnp.where(jnp.any(nan, axis=-1), last_nan, jnp.argmax(win, axis=-1))  # first maximum
        value = jnp.take_along_axis(win, pick[..., None], axis=-1)[..., 0]
        index = jnp.take_along_axis(flat, pick[..., None], axis=-1)[..., 0]
        return value, index

    def run(x, samples):
        lead = x.shape[:-nd]
        xs = x.reshape((-1,) + spatial)
        us = samples.reshape((-1, nd))
        v, i = jax.vmap(plane)(xs, us)
        return v.reshape(lead + outs), i.reshape(lead + outs)

    return run


@jitted
def _fractional_scatter(spatial):
    """The gradient through the saved indices, added in the gradient's own dtype in output order, as
    CPU's `grad_input[index] += grad_output[o]` (half precision rounds each addition)."""
    size = int(np.prod(spatial))

    def run(g, idx):
        lead = g.shape[: g.ndim - len(spatial)]
        fg = g.reshape((-1, int(np.prod(g.shape[len(lead) :]))))
        fi = idx.reshape(fg.shape)
        out = jnp.zeros((fg.shape[0], size), g.dtype).at[jnp.arange(fg.shape[0])[:, None], fi].add(fg)
        return out.reshape(lead + spatial)

    return run


def _fractional_checks(self, kernel_size, output_size, samples, nd):
    name = "fractional_max_pool2d()" if nd == 2 else "fractional_max_pool3d_out()"
    if self.dim() not in (nd + 1, nd + 2):
        raise RuntimeError(f"{name}: Expected {nd + 1}D or {nd + 2}D tensor, but got: {list(self.shape)}")
    for d in range(self.dim() - nd - 1, self.dim()):
        if self.shape[d] == 0:
            raise RuntimeError(
                f"{name}: Expected input to have non-zero size for non-batch dimensions, but got"
                f"{list(self.shape)} with dimension {d} being empty."
            )
    spatial = tuple(self.shape[-nd:])
    kernel, outs = tuple(kernel_size), tuple(output_size)
    names = ("height", "width") if nd == 2 else ("time", "height", "width")
    for d in range(nd):
        if outs[d] + kernel[d] - 1 > spatial[d]:
            raise RuntimeError(
                f"{name}: pool {names[d]} {kernel[d]} too large relative to input {names[d]} {spatial[d]}"
            )
    if samples.dtype != self.dtype:
        raise RuntimeError("Expect _random_samples to have the same dtype as input")
    if samples.dim() != 3:
        raise RuntimeError(f"Expect _random_samples to have 3 dimensions, got {samples.dim()}")
    batch, channels = (1, self.shape[0]) if self.dim() == nd + 1 else (self.shape[0], self.shape[1])
    if samples.shape[0] < batch:
        raise RuntimeError("Expect _random_samples.size(0) no less then input batch size.")
    if samples.shape[1] != channels:
        raise RuntimeError("Expect _random_samples.size(1) equals to input channel size.")
    if samples.shape[2] != nd:
        raise RuntimeError(f"Expect _random_samples.size(2) equals to {nd}; got {samples.shape[2]}.")
    if self.dtype not in (torch.float32, torch.float64, torch.float16, torch.bfloat16):
        frame = "fractional_max_pool2d_out_frame" if nd == 2 else "fractional_max_pool3d_out_frame"
        raise NotImplementedError(f"\"{frame}\" not implemented for '{dtypes.scalar_name(self.dtype)}'")
    return spatial, kernel, outs, batch, channels


def _register_fractional(nd: int) -> None:
    def op(name):
        return getattr(aten, name.format(nd=nd)).default

    @register_functional(op("fractional_max_pool{nd}d"))
    def fractional_max_pool(self, kernel_size, output_size, random_samples):
        """CPU's windows from `random_samples` (the caller draws them: F.fractional_max_pool*d uses
        torch.rand on the input's device, so the jax RNG); NaN wins (the last one), ties keep the first."""
        spatial, kernel, outs, batch, _ = _fractional_checks(self, kernel_size, output_size, random_samples, nd)
        x = J(self)
        if x.size == 0:
            shape = tuple(self.shape[:-nd]) + outs
            return jnp.zeros(shape, x.dtype), jnp.zeros(shape, jnp.int64)
        samples = J(random_samples)[:batch]
        return _fractional_max(spatial, kernel, outs)(x, samples)

    @register_functional(op("fractional_max_pool{nd}d_backward"))
    def fractional_max_pool_backward(grad_output, self, kernel_size, output_size, indices):
        return _fractional_scatter(tuple(self.shape[-nd:]))(J(grad_output), J(indices))


_register_fractional(2)


_register_fractional(3)
