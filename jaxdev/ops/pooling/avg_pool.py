"""Average and adaptive average pooling; their backward kernels are derived by the registry as the VJP
of the forward. Half precision accumulates in float32."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import torch

from jaxdev import dtypes
from jaxdev.ops.kit import J, jitted, opmath
from jaxdev.ops.kit.cpu_numerics import round_to
from jaxdev.ops.pooling.windows import along, bins, check_not_empty, ntuple, output_size_of, pool_args, windows
from jaxdev.ops.registry import aten, register_backward, register_functional


def _avg_divisor(sizes, k, s, p, outs, count_include_pad, divisor_override):
    if divisor_override:
        return np.full(outs, divisor_override, np.float64)
    div = np.ones(outs, np.float64)
    for j, (n, kk, ss, pp, o) in enumerate(zip(sizes, k, s, p, outs)):
        start = np.arange(o) * ss - pp
        end = np.minimum(start + kk, n + pp)
        extent = (end - start) if count_include_pad else (np.minimum(end, n) - np.maximum(start, 0))
        div = div * along(extent, j, len(outs))
    return div


@jitted
def _avg_pool(k, s, p, ceil, count_include_pad, divisor_override, compute, result):
    def run(x):
        win, outs = windows(x.astype(compute), k, s, p, (1,) * len(k), ceil, 0)
        div = _avg_divisor(x.shape[-len(k) :], k, s, p, outs, count_include_pad, divisor_override)
        return (jnp.sum(win, axis=-1) / jnp.asarray(div, compute)).astype(result)

    return run


@jitted
def _adaptive_avg(sizes, outs, compute, result):
    mats = [np.asarray(bins(n, o), compute) for n, o in zip(sizes, outs)]
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


def _register(nd: int) -> None:
    def op(name):
        return getattr(aten, name.format(nd=nd)).default

    @register_functional(op("avg_pool{nd}d"))
    def avg_pool(
        self, kernel_size, stride=(), padding=(0,), ceil_mode=False, count_include_pad=True, divisor_override=None
    ):
        if divisor_override is not None and divisor_override == 0:  # CPU checks it before the geometry
            raise RuntimeError("divisor must be not zero")
        k, s, p, _ = pool_args(self, kernel_size, stride, padding, (1,), nd)
        jdt = dtypes.to_jax_dtype(self.dtype)
        body = _avg_pool(k, s, p, bool(ceil_mode), bool(count_include_pad), divisor_override, opmath(jdt), jdt)
        return body(J(self))

    @register_functional(op("_adaptive_avg_pool{nd}d"))
    def adaptive_avg_pool(self, output_size):
        if nd == 3:
            if len(output_size) != 3:
                raise RuntimeError("adaptive_avg_pool3d: output_size must be 3")
            if self.dim() not in (4, 5):
                raise RuntimeError(f"adaptive_avg_pool3d(): Expected 4D or 5D tensor, but got {list(self.shape)}")
        check_not_empty(self, f"adaptive_avg_pool{nd}d", max(self.dim() - 2, 0) if nd == 2 else 1)
        jdt = dtypes.to_jax_dtype(self.dtype)
        outs = ntuple(output_size, nd)
        if nd == 3 and self.dtype in (torch.bfloat16, torch.float16) and min(outs) > 0:
            return _adaptive_avg_half_3d(tuple(self.shape[-3:]), tuple(int(o) for o in outs), jdt)(J(self))
        return _adaptive_avg(tuple(self.shape[-nd:]), outs, opmath(jdt), jdt)(J(self))

    register_backward(op("avg_pool{nd}d_backward"), op("avg_pool{nd}d"))
    register_backward(op("_adaptive_avg_pool{nd}d_backward"), op("_adaptive_avg_pool{nd}d"), prepare=output_size_of(nd))


_register(2)
_register(3)
