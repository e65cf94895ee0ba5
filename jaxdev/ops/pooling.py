"""Pooling over the last 2 or 3 dims, one code for both ranks: max pooling with indices, average
pooling, adaptive average and max pooling, each with its backward, and max unpooling.

Windows are gathered with strided slices of the padded input, which keeps PyTorch's output sizes
(ceil_mode included), its first-maximum tie-breaking and its NaN propagation. Indices are flat over
the input's spatial dims. Max pooling's gradients go back through the saved indices (scatter-add),
as PyTorch routes them; the averaging ops' backward kernels are derived by the registry as the VJP
of their forward. Half precision accumulates in float32.
"""

from __future__ import annotations

import functools
import itertools

import jax
import jax.numpy as jnp
import numpy as np
import torch

from jaxdev import dtypes, tracing
from jaxdev.ops.cpu_numerics import round_to
from jaxdev.ops.registry import aten, register_backward, register_functional
from jaxdev.ops.toolkit import J, jitted, opmath


def _ntuple(v, nd, default=None):
    if v is None or len(v) == 0:
        return default
    return (v[0],) * nd if len(v) == 1 else tuple(v)


def out_size(size, k, pad, stride, dilation, ceil):
    o = (size + 2 * pad - dilation * (k - 1) - 1 + (stride - 1 if ceil else 0)) // stride + 1
    if ceil and (o - 1) * stride >= size + pad:
        o -= 1
    return o


def _lowest(dtype):
    return -jnp.inf if jnp.issubdtype(dtype, jnp.floating) else jnp.iinfo(dtype).min


def _along(v, k, nd):
    """A 1-D array shaped to broadcast along spatial dim k of nd."""
    return v.reshape((1,) * k + (-1,) + (1,) * (nd - 1 - k))


def _args(self, kernel_size, stride, padding, dilation, nd):
    k = _ntuple(kernel_size, nd)
    s = _ntuple(stride, nd, k)
    p = _ntuple(padding, nd, (0,) * nd)
    d = _ntuple(dilation, nd, (1,) * nd)
    if nd == 3 and self.dim() not in (4, 5):
        raise RuntimeError("non-empty 4D or 5D (batch mode) tensor expected for input")
    if 0 in s:  # pooling_output_shape, before the shape checks (a zero kernel is the default stride)
        raise RuntimeError("stride should not be zero")
    names = ("T", "H", "W")[-nd:]
    for values, what, prefix in ((k, "kernel size", "k"), (s, "stride", "d"), (d, "dilation", "dilation")):
        if min(values) <= 0:  # pool2d_shape_check / pool3d_shape_check
            got = " ".join(f"{prefix}{n}: {v}" for n, v in zip(names, values))
            raise RuntimeError(f"{what} should be greater than zero, but got {got}")
    for pp, kk in zip(p, k):
        if pp > kk // 2:
            if nd == 2:
                raise RuntimeError(
                    f"pad should be at most half of effective kernel size, but got pad={pp}, kernel_size={kk} and dilation={d[0]}"
                )
            raise RuntimeError(
                f"pad should be smaller than or equal to half of kernel size, but got kT={k[0]} kW={k[2]} kH={k[1]} padT={p[0]} padW={p[2]} padH={p[1]}"
            )
    return k, s, p, d


def _windows(x, k, s, p, d, ceil, fill):
    """(..., *outs, prod(k)) windows of the last len(k) dims, and the output sizes."""
    nd = len(k)
    sizes = x.shape[-nd:]
    outs = tuple(out_size(n, kk, pp, ss, dd, ceil) for n, kk, pp, ss, dd in zip(sizes, k, p, s, d))
    if min(outs) <= 0:
        raise RuntimeError(
            f"Given input size: ({'x'.join(map(str, x.shape[-(nd + 1) :]))}). Calculated output size: "
            f"({x.shape[-(nd + 1)] if x.ndim > nd else 1}x{'x'.join(map(str, outs))}). Output size is too small"
        )
    his = [max(0, (o - 1) * ss + dd * (kk - 1) + 1 - n - pp) for o, ss, dd, kk, n, pp in zip(outs, s, d, k, sizes, p)]
    xp = jnp.pad(x, [(0, 0)] * (x.ndim - nd) + [(pp, hi) for pp, hi in zip(p, his)], constant_values=fill)
    parts = []
    for offs in itertools.product(*(range(kk) for kk in k)):
        idx = tuple(slice(o * dd, o * dd + (n - 1) * ss + 1, ss) for o, dd, n, ss in zip(offs, d, outs, s))
        parts.append(xp[(Ellipsis, *idx)])
    return jnp.stack(parts, axis=-1), outs


# --- max pooling -----------------------------------------------------------------------------------


@jitted
def _max_pool(k, s, p, d, ceil):
    nd = len(k)

    def run(x):
        win, outs = _windows(x, k, s, p, d, ceil, _lowest(x.dtype))
        arg = jnp.argmax(win, axis=-1)  # the first maximum; a NaN counts as the maximum
        vals = jnp.take_along_axis(win, arg[..., None], axis=-1)[..., 0]
        flat, rest = 0, arg
        sizes = x.shape[-nd:]
        for j in range(nd):
            inner = int(np.prod(k[j + 1 :]))
            kj, rest = rest // inner, rest % inner
            position = _along(jnp.arange(outs[j]), j, nd) * s[j] - p[j] + kj * d[j]
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


# --- average pooling -------------------------------------------------------------------------------


def _avg_divisor(sizes, k, s, p, outs, count_include_pad, divisor_override):
    if divisor_override:
        return np.full(outs, divisor_override, np.float64)
    div = np.ones(outs, np.float64)
    for j, (n, kk, ss, pp, o) in enumerate(zip(sizes, k, s, p, outs)):
        start = np.arange(o) * ss - pp
        end = np.minimum(start + kk, n + pp)
        extent = (end - start) if count_include_pad else (np.minimum(end, n) - np.maximum(start, 0))
        div = div * _along(extent, j, len(outs))
    return div


@jitted
def _avg_pool(k, s, p, ceil, count_include_pad, divisor_override, compute, result):
    def run(x):
        win, outs = _windows(x.astype(compute), k, s, p, (1,) * len(k), ceil, 0)
        div = _avg_divisor(x.shape[-len(k) :], k, s, p, outs, count_include_pad, divisor_override)
        return (jnp.sum(win, axis=-1) / jnp.asarray(div, compute)).astype(result)

    return run


# --- adaptive pooling ----------------------------------------------------------------------------


def _bins(size, out):
    """PyTorch's adaptive bins as an (out, size) averaging matrix."""
    m = np.zeros((out, size), np.float64)
    for i in range(out):
        start, end = (i * size) // out, -((-(i + 1) * size) // out)
        m[i, start:end] = 1.0 / (end - start)
    return m


@jitted
def _adaptive_avg(sizes, outs, compute, result):
    mats = [np.asarray(_bins(n, o), compute) for n, o in zip(sizes, outs)]
    letters_out, letters_in = "abc"[: len(sizes)], "def"[: len(sizes)]
    spec = ",".join(o + i for o, i in zip(letters_out, letters_in)) + f",...{letters_in}->...{letters_out}"

    def run(x):
        return jnp.einsum(spec, *mats, x.astype(compute), precision=jax.lax.Precision.HIGHEST).astype(result)

    return run


@jitted
def _adaptive_avg_half_3d(sizes, outs, half):
    """CPU's adaptive_avg_pool3d for bfloat16/float16 sums each bin in the half dtype, one rounded
    addition per element in (d, h, w) order, then divides by the bin's size (Half / int64)."""
    f32 = jnp.float32
    taps = []
    for n, o in zip(sizes, outs):
        start = np.array([(i * n) // o for i in range(o)])
        end = np.array([-((-(i + 1) * n) // o) for i in range(o)])
        pos = start[:, None] + np.arange(int((end - start).max()))[None, :]
        taps.append((np.minimum(pos, n - 1), pos < end[:, None], end - start))

    (di, dm, dc), (hi, hm, hc), (wi, wm, wc) = taps
    kh, kw = hi.shape[1], wi.shape[1]
    count = (dc[:, None, None] * hc[None, :, None] * wc[None, None, :]).astype(np.float32)

    def run(x):
        def add(t, acc):  # window element t, in (d, h, w) order
            a, b, c = t // (kh * kw), (t // kw) % kh, t % kw
            v = x[..., jnp.asarray(di)[:, a], :, :][..., jnp.asarray(hi)[:, b], :][..., jnp.asarray(wi)[:, c]]
            mask = jnp.asarray(dm)[:, a][:, None, None] & jnp.asarray(hm)[:, b][None, :, None]
            mask = mask & jnp.asarray(wm)[:, c][None, None, :]
            return jnp.where(mask, round_to(half)(acc + v.astype(f32)), acc)

        acc = jax.lax.fori_loop(0, di.shape[1] * kh * kw, add, jnp.zeros(x.shape[:-3] + tuple(outs), f32))
        return (acc / round_to(half)(jnp.asarray(count))).astype(half)

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
        win = jnp.where(valid, x, _lowest(x.dtype)).reshape(x.shape[: lead + nd] + (-1,))
        arg = jnp.argmax(win, axis=-1)
        vals = jnp.take_along_axis(win, arg[..., None], axis=-1)[..., 0]
        flat = jnp.take_along_axis(jnp.broadcast_to(index, arg.shape + index.shape[-1:]), arg[..., None], axis=-1)
        return vals, flat[..., 0].astype(jnp.int64)

    return run


def output_size_of(spatial: int):
    """For an adaptive pool's backward, which carries the output size only as grad_output's shape."""
    return lambda args, grad_output: {**args, "output_size": tuple(grad_output.shape[-spatial:])}


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


# --- the aten ops, for 2 and 3 spatial dims ------------------------------------------------------


def _register(nd: int) -> None:
    def op(name):
        return getattr(aten, name.format(nd=nd)).default

    @register_functional(op("max_pool{nd}d_with_indices"))
    def max_pool_with_indices(self, kernel_size, stride=(), padding=(0,), dilation=(1,), ceil_mode=False):
        k, s, p, d = _args(self, kernel_size, stride, padding, dilation, nd)
        return _max_pool(k, s, p, d, bool(ceil_mode))(J(self))

    @register_functional(op("max_pool{nd}d_with_indices_backward"))
    def max_pool_backward(grad_output, self, kernel_size, stride, padding, dilation, ceil_mode, indices):
        return _index_scatter(tuple(self.shape[-nd:]))(J(grad_output), J(indices))

    @register_functional(op("avg_pool{nd}d"))
    def avg_pool(
        self, kernel_size, stride=(), padding=(0,), ceil_mode=False, count_include_pad=True, divisor_override=None
    ):
        if divisor_override is not None and divisor_override == 0:  # CPU checks it before the geometry
            raise RuntimeError("divisor must be not zero")
        k, s, p, _ = _args(self, kernel_size, stride, padding, (1,), nd)
        jdt = dtypes.to_jax_dtype(self.dtype)
        body = _avg_pool(k, s, p, bool(ceil_mode), bool(count_include_pad), divisor_override, opmath(jdt), jdt)
        return body(J(self))

    def check_not_empty(self, name, first):
        """CPU's adaptive pools refuse an empty dim past the batch (adaptive_avg_pool2d: past the
        channels too)."""
        for i in range(first, self.dim()):
            if self.shape[i] == 0:
                raise RuntimeError(
                    f"{name}(): Expected input to have non-zero size for non-batch dimensions, but input has sizes "
                    f"{list(self.shape)} with dimension {i} being empty"
                )

    @register_functional(op("_adaptive_avg_pool{nd}d"))
    def adaptive_avg_pool(self, output_size):
        if nd == 3:
            if len(output_size) != 3:
                raise RuntimeError("adaptive_avg_pool3d: output_size must be 3")
            if self.dim() not in (4, 5):
                raise RuntimeError(f"adaptive_avg_pool3d(): Expected 4D or 5D tensor, but got {list(self.shape)}")
        check_not_empty(self, f"adaptive_avg_pool{nd}d", max(self.dim() - 2, 0) if nd == 2 else 1)
        jdt = dtypes.to_jax_dtype(self.dtype)
        outs = _ntuple(output_size, nd)
        if nd == 3 and self.dtype in (torch.bfloat16, torch.float16) and min(outs) > 0:
            return _adaptive_avg_half_3d(tuple(self.shape[-3:]), tuple(int(o) for o in outs), jdt)(J(self))
        return _adaptive_avg(tuple(self.shape[-nd:]), outs, opmath(jdt), jdt)(J(self))

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

    register_backward(op("avg_pool{nd}d_backward"), op("avg_pool{nd}d"))
    register_backward(op("_adaptive_avg_pool{nd}d_backward"), op("_adaptive_avg_pool{nd}d"), prepare=output_size_of(nd))


_register(2)
_register(3)


# --- fractional max pooling (CPU: FractionalMaxPool2d.cpp / 3d, FractionalMaxPooling.h) -------------------


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
