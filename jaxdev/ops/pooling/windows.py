"""The geometry every pool shares: PyTorch's argument rules and output sizes (ceil_mode included),
windows gathered with strided slices of the padded input, adaptive bins."""

from __future__ import annotations

import itertools

import jax.numpy as jnp
import numpy as np


def ntuple(v, nd, default=None):
    if v is None or len(v) == 0:
        return default
    return (v[0],) * nd if len(v) == 1 else tuple(v)


def out_size(size, k, pad, stride, dilation, ceil):
    o = (size + 2 * pad - dilation * (k - 1) - 1 + (stride - 1 if ceil else 0)) // stride + 1
    if ceil and (o - 1) * stride >= size + pad:
        o -= 1
    return o


def lowest(dtype):
    return -jnp.inf if jnp.issubdtype(dtype, jnp.floating) else jnp.iinfo(dtype).min


def along(v, k, nd):
    """A 1-D array shaped to broadcast along spatial dim k of nd."""
    return v.reshape((1,) * k + (-1,) + (1,) * (nd - 1 - k))


def pool_args(self, kernel_size, stride, padding, dilation, nd):
    k = ntuple(kernel_size, nd)
    s = ntuple(stride, nd, k)
    p = ntuple(padding, nd, (0,) * nd)
    d = ntuple(dilation, nd, (1,) * nd)
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


def windows(x, k, s, p, d, ceil, fill):
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


def bins(size, out):
    """PyTorch's adaptive bins as an (out, size) averaging matrix."""
    m = np.zeros((out, size), np.float64)
    for i in range(out):
        start, end = (i * size) // out, -((-(i + 1) * size) // out)
        m[i, start:end] = 1.0 / (end - start)
    return m


def output_size_of(spatial: int):
    """For an adaptive pool's backward, which carries the output size only as grad_output's shape."""
    return lambda args, grad_output: {**args, "output_size": tuple(grad_output.shape[-spatial:])}


def check_not_empty(self, name, first):
    """CPU's adaptive pools refuse an empty dim past the batch (adaptive_avg_pool2d: past the
    channels too)."""
    for i in range(first, self.dim()):
        if self.shape[i] == 0:
            raise RuntimeError(
                f"{name}(): Expected input to have non-zero size for non-batch dimensions, but input has sizes "
                f"{list(self.shape)} with dimension {i} being empty"
            )
