"""Upsampling (F.interpolate): nearest, nearest-exact, (bi/tri)linear and bicubic, 1d/2d/3d, with
backward.

Interpolation is separable: along each spatial dim every output position reads a few source
positions with weights. Those taps are computed on the host with PyTorch's own formulas
(`area_pixel_compute_source_index`, `nearest_idx`, cubic convolution with A = -0.75) in the same
float width as CPU (float32 for float32/half inputs, float64 for double), so indices agree exactly
at the boundaries. The backward kernels are the vjp of the forward (a scatter-add).
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import torch

from jaxdev import dtypes
from jaxdev.ops.kit import J, jitted, opmath, zeros
from jaxdev.ops.registry import aten, register_backward, register_functional


def _scale(in_size, out_size, align_corners, scale, ft):
    if align_corners:
        return ft(in_size - 1) / ft(out_size - 1) if out_size > 1 else ft(0)
    return ft(1.0 / scale) if scale is not None and scale > 0 else ft(in_size) / ft(out_size)


# PyTorch's cubic convolution (A = -0.75 without antialiasing): the weight of a tap at distance x
_CUBIC_A = -0.75


def _cubic_near(x, A):  # |x| <= 1
    return ((A + 2) * x - (A + 3)) * x * x + 1


def _cubic_far(x, A):  # 1 < |x| < 2
    return ((A * x - 5 * A) * x + 8 * A) * x - 4 * A


def _taps(mode, in_size, out_size, align_corners, scale, ft):
    """(indices, weights), each (out_size, taps): output j = sum_k weights[j, k] * input[indices[j, k]]."""
    dst = np.arange(out_size, dtype=ft)
    if mode in ("nearest", "nearest-exact"):
        if mode == "nearest" and out_size == in_size:
            idx = np.arange(out_size)
        elif mode == "nearest" and out_size == 2 * in_size:
            idx = np.arange(out_size) >> 1
        else:
            s = _scale(in_size, out_size, False, scale, np.float32)
            d = dst.astype(np.float32) + (np.float32(0.5) if mode == "nearest-exact" else np.float32(0))
            idx = np.minimum(np.floor(d * s).astype(np.int64), in_size - 1)
        return idx[:, None], np.ones((out_size, 1), ft)
    s = _scale(in_size, out_size, align_corners, scale, ft)
    if mode == "linear":
        src = s * dst if align_corners else np.maximum(s * (dst + ft(0.5)) - ft(0.5), ft(0))
        i0 = np.minimum(np.floor(src).astype(np.int64), in_size - 1)
        i1 = i0 + (i0 < in_size - 1)
        l1 = np.clip(src - i0.astype(ft), 0, 1).astype(ft)
        return np.stack([i0, i1], 1), np.stack([ft(1) - l1, l1], 1)
    # cubic
    src = s * dst if align_corners else s * (dst + ft(0.5)) - ft(0.5)
    i = np.floor(src).astype(np.int64)
    t = (src - i).astype(ft)
    A = ft(_CUBIC_A)
    w = np.stack([_cubic_far(t + 1, A), _cubic_near(t, A), _cubic_near(1 - t, A), _cubic_far(2 - t, A)], 1)
    w = w.astype(ft)
    idx = np.clip(np.stack([i - 1, i, i + 1, i + 2], 1), 0, in_size - 1)
    return idx, w


def _apply(x, taps):
    """Interpolate the last len(taps) dims of x."""
    n = len(taps)
    for k, (idx, w) in enumerate(taps):
        axis = x.ndim - n + k
        g = jnp.take(x, jnp.asarray(idx.reshape(-1)), axis=axis)
        g = g.reshape(g.shape[:axis] + idx.shape + g.shape[axis + 1 :])
        wshape = (1,) * axis + w.shape + (1,) * (x.ndim - axis - 1)
        x = jnp.sum(g * jnp.asarray(w, x.dtype).reshape(wshape), axis=axis + 1)
    return x


def _half_weights(mode, taps, half):
    """CPU stores a half input's interpolation weights in the input dtype (compute_indices_weights_*
    write scalar_t): linear keeps lambda1 rounded and lambda0 = 1 - lambda1 in half arithmetic;
    cubic rounds each of its four weights. The sums still run in float32."""

    def rounded(w):
        return np.asarray(jnp.asarray(w, half).astype(jnp.float32))

    out = []
    for idx, w in taps:
        if mode == "linear":
            l1 = rounded(w[:, 1])
            w = np.stack([rounded(np.float32(1) - l1), l1], 1)
        elif mode == "cubic":
            w = rounded(w)
        out.append((idx, w))
    return out


@jitted
def _interp(mode, in_sizes, out_sizes, align_corners, scales, compute, result):
    ft = np.float64 if compute == jnp.float64 else np.float32
    taps = [_taps(mode, i, o, align_corners, s, ft) for i, o, s in zip(in_sizes, out_sizes, scales)]
    if result in (jnp.bfloat16, jnp.float16) and not (mode == "linear" and len(taps) == 2):
        # (bilinear 2d has its own kernel, with float32 weights); CPU's backward kernels weigh the
        # gradient with float32 weights, so the VJP keeps them
        rounded = _half_weights(mode, taps, result)

        @jax.custom_vjp
        def run(x):
            return _apply(x, rounded)

        def run_fwd(x):
            return run(x), jnp.zeros_like(x)

        def run_bwd(zero, g):
            return jax.vjp(lambda v: _apply(v, taps), zero)[1](g)

        run.defvjp(run_fwd, run_bwd)
        return lambda x: run(x.astype(compute)).astype(result)
    return lambda x: _apply(x.astype(compute), taps).astype(result)


def _check_sizes(in_sizes, out_sizes):
    """CPU's upsample_{1,2,3}d_common_check, with its messages ("(W: 4) and output (W: 0)" in 1-d,
    "(H: 4, W: 4) output (H: 0, W: 0)" in 2-d and 3-d)."""
    if any(o <= 0 for o in out_sizes) or any(i <= 0 for i in in_sizes):
        names = "DHW"[-len(in_sizes) :]

        def sizes(values):
            return ", ".join(f"{n}: {v}" for n, v in zip(names, values))

        joint = " and output" if len(in_sizes) == 1 else " output"
        raise RuntimeError(
            f"Input and output sizes should be greater than 0, but got input ({sizes(in_sizes)}){joint} ({sizes(out_sizes)})"
        )


def _check_not_empty(self) -> None:
    """The upsample meta functions allow an empty batch and no other empty dimension."""
    if self.numel() == 0 and math.prod(self.shape[1:]) == 0:
        raise RuntimeError(
            f"Non-empty {self.dim()}D data tensor expected but got a tensor with sizes {list(self.shape)}"
        )


def _kernels(mode, dtype, in_sizes, out_sizes, align_corners, scales):
    jdt = dtypes.to_jax_dtype(dtype)
    scales = tuple(None if s is None else float(s) for s in scales)
    return _interp(mode, tuple(in_sizes), tuple(out_sizes), bool(align_corners), scales, opmath(jdt), jdt)


def _register(nd, mode, forward, backward, has_align):
    def parse(rest):
        align = rest[0] if has_align else False
        scales = tuple(rest[1:] if has_align else rest)
        return align, scales + (None,) * (nd - len(scales))

    @register_functional(forward)
    def upsample(self, output_size, *rest):
        if self.dim() != nd + 2:
            raise RuntimeError(f"Expected {nd + 2}D tensor for input, but got {list(self.shape)}")
        align, scales = parse(rest)
        in_sizes, out_sizes = tuple(self.shape[2:]), tuple(int(v) for v in output_size)
        _check_sizes(in_sizes, out_sizes)
        _check_not_empty(self)
        if not self.dtype.is_floating_point:
            if self.dtype == torch.uint8 and mode in ("linear", "cubic") and nd == 2:
                # CPU's uint8 bilinear/bicubic resample in fixed point (int16 weights, their own
                # rounding and saturation): the antialiased kernel's integer sums over plain taps
                scales = tuple(None if s is None else float(s) for s in scales)
                return _aa_interp_uint8(in_sizes, out_sizes, bool(align), scales, mode, False)(J(self))
            if self.dtype != torch.uint8 or mode not in ("nearest", "nearest-exact"):
                name = {"nearest": "nearest", "nearest-exact": "nearest", "linear": "linear", "cubic": "cubic"}[mode]
                kernel = f"upsample_{'bilinear' if mode == 'linear' else 'nearest'}2d_channels_last"
                if nd != 2 or mode == "cubic":
                    kernel = f"compute_indices_weights_{name}"
                raise NotImplementedError(f"\"{kernel}\" not implemented for '{dtypes.scalar_name(self.dtype)}'")
        return _kernels(mode, self.dtype, in_sizes, out_sizes, align, scales)(J(self))

    register_backward(backward, forward, prepare=_at_zeros)


def _at_zeros(args, grad_output):
    """Interpolation is linear: its VJP is the same at every point, zeros of the input's size."""
    return {**args, "self": zeros(tuple(args["input_size"]), J(grad_output).dtype)}


for _nd, _mode, _name, _align in [
    (1, "nearest", "upsample_nearest1d", False),
    (2, "nearest", "upsample_nearest2d", False),
    (3, "nearest", "upsample_nearest3d", False),
    (1, "nearest-exact", "_upsample_nearest_exact1d", False),
    (2, "nearest-exact", "_upsample_nearest_exact2d", False),
    (3, "nearest-exact", "_upsample_nearest_exact3d", False),
    (1, "linear", "upsample_linear1d", True),
    (2, "linear", "upsample_bilinear2d", True),
    (3, "linear", "upsample_trilinear3d", True),
    (2, "cubic", "upsample_bicubic2d", True),
]:
    _register(_nd, _mode, getattr(aten, _name).default, getattr(aten, _name + "_backward").default, _align)


# --- antialiased bilinear (CPU: UpSampleKernel.cpp, separable_upsample_generic_Nd_kernel_impl) ---------------


def _aa_taps(in_size, out_size, align_corners, scale, ft):
    """CPU's _compute_weights_aa for the triangle filter, step for step in its float widths: each
    output i averages input xmin .. xmin + xsize - 1 with weights filter((j + xmin - center + 0.5) *
    invscale) / total, center = scale * (i + 0.5), support = scale when downsampling (else 1)."""
    f64 = np.float64
    s = _scale(in_size, out_size, align_corners, scale, ft)
    support = ft(1.0 * f64(s)) if s >= 1.0 else ft(1.0)
    k = int(np.ceil(f64(support))) * 2 + 1
    invscale = ft(1.0 / f64(s)) if s >= 1.0 else ft(1.0)
    idx = np.zeros((out_size, k), np.int64)
    wts = np.zeros((out_size, k), ft)
    for i in range(out_size):
        center = ft(f64(s) * (i + 0.5))
        xmin = max(int(f64(ft(center - support)) + 0.5), 0)
        xsize = min(int(f64(ft(center + support)) + 0.5), in_size) - xmin
        xsize = min(max(xsize, 0), k)
        total = ft(0)
        w = []
        for j in range(xsize):
            x = ft((f64(ft(ft(j + xmin) - center)) + 0.5) * f64(invscale))
            v = ft(1.0 - f64(abs(x))) if abs(x) < 1.0 else ft(0)
            w.append(v)
            total = ft(total + v)
        for j in range(xsize):
            idx[i, j] = xmin + j
            wts[i, j] = ft(w[j] / total) if total != 0 else w[j]
        idx[i, xsize:] = xmin
    return idx, wts


@jitted
def _aa_interp(in_sizes, out_sizes, align_corners, scales, ct, jdt):
    """Width first, then height (CPU's order), each pass skipped when that size is unchanged; a
    pass sums its taps in order in the compute dtype."""
    ft = np.dtype(ct).type
    passes = []
    for axis in (1, 0):  # W, then H
        if in_sizes[axis] != out_sizes[axis]:
            idx, wts = _aa_taps(in_sizes[axis], out_sizes[axis], align_corners, scales[axis], ft)
            passes.append((axis - 2, jnp.asarray(idx), jnp.asarray(wts)))

    def run(x):
        x = x.astype(ct)
        for ax, idx, wts in passes:
            shape = [1] * x.ndim
            shape[ax] = wts.shape[0]
            acc = None
            for j in range(wts.shape[1]):
                term = jnp.take(x, idx[:, j], axis=ax) * wts[:, j].reshape(shape)
                acc = term if acc is None else acc + term
            x = acc
        return x.astype(jdt)

    return run


def _plain_taps_f64(mode, in_size, out_size, align_corners, scale):
    """CPU's double taps of a uint8 resample without antialiasing (_compute_indices_min_size_weights):
    the float path's source index and lambda, the filter (triangle, or cubic with A = -0.75) at the
    interp_size fixed offsets, and the weights of out-of-range taps summed into the first or last
    in-range one, so that each output reads index_min .. index_min + index_size - 1."""
    size = 2 if mode == "linear" else 4

    def filt(x):
        x = abs(x)
        if mode == "linear":
            return 1.0 - x if x < 1.0 else 0.0
        if x < 1.0:
            return _cubic_near(x, _CUBIC_A)
        return _cubic_far(x, _CUBIC_A) if x < 2.0 else 0.0

    s = _scale(in_size, out_size, align_corners, scale, np.float64)
    support = size // 2
    idx = np.zeros((out_size, size), np.int64)
    wts = np.zeros((out_size, size), np.float64)
    for i in range(out_size):
        if align_corners:
            real = s * i
        else:
            real = s * (i + 0.5) - 0.5
            if mode == "linear" and real < 0:
                real = 0.0
        # guard_index_and_lambda floors through float32 (floorf), then clamps lambda to [0, 1]
        index = min(int(np.floor(np.float32(real))), in_size - 1)
        lam = min(max(real - index, 0.0), 1.0)
        lo = index - support + 1
        xmin = max(lo, 0)
        xsize = min(max(min(index + support + 1, in_size) - xmin, 0), size)
        at = 0
        for j in range(size):
            if lo + j <= 0:
                at = 0
            elif lo + j >= in_size - 1:
                at = xsize - 1
            wts[i, at] += filt(float(j + 1 - support) - lam)
            at += 1
        idx[i, :] = xmin
        idx[i, :xsize] = xmin + np.arange(xsize)
    return idx, wts


def _aa_taps_int16(in_size, out_size, align_corners, scale, mode="linear", antialias=True):
    """CPU's uint8 taps (_compute_index_ranges_int16_weights): the weights in double, scaled by
    2**precision (the largest that keeps the biggest weight under 2**15) and rounded half away from 0."""
    if antialias:
        idx, wts = _aa_taps(in_size, out_size, align_corners, scale, np.float64)
    else:
        idx, wts = _plain_taps_f64(mode, in_size, out_size, align_corners, scale)
    wt_max = float(wts.max()) if wts.size else 0.0
    precision = 0
    while precision < 22 and int(0.5 + wt_max * (1 << (precision + 1))) < (1 << 15):
        precision += 1
    v = wts * float(1 << precision)
    w16 = np.where(v < 0, np.trunc(-0.5 + v), np.trunc(0.5 + v)).astype(np.int32)
    return idx, w16, precision


@jitted
def _aa_interp_uint8(in_sizes, out_sizes, align_corners, scales, mode="linear", antialias=True):
    """uint8 as CPU resamples it, with or without antialiasing (separable_upsample_generic_Nd_kernel_impl
    and its AVX2 twin, which compute the same integer sums): integer sums of pixel * int16 weight from
    2**(precision - 1), shifted right by the precision and clamped to 0..255, width pass then height
    pass (a uint8 image between)."""
    passes = []
    for axis in (1, 0):
        if in_sizes[axis] != out_sizes[axis]:
            idx, w16, precision = _aa_taps_int16(
                in_sizes[axis], out_sizes[axis], align_corners, scales[axis], mode, antialias
            )
            passes.append((axis - 2, jnp.asarray(idx), jnp.asarray(w16), precision))

    def run(x):
        for ax, idx, w16, precision in passes:
            shape = [1] * x.ndim
            shape[ax] = w16.shape[0]
            acc = jnp.int32(1 << (precision - 1))
            for j in range(w16.shape[1]):
                acc = acc + jnp.take(x, idx[:, j], axis=ax).astype(jnp.int32) * w16[:, j].reshape(shape)
            x = jnp.clip(acc >> precision, 0, 255).astype(jnp.uint8)
        return x

    return run


@register_functional(aten._upsample_bilinear2d_aa.default)
def upsample_bilinear2d_aa(self, output_size, align_corners, scales_h=None, scales_w=None):
    if len(output_size) != 2:
        raise RuntimeError(f"It is expected output_size equals to 2, but got size {len(output_size)}")
    if self.dim() != 4:
        raise RuntimeError(f"It is expected input_size equals to 4, but got size {self.dim()}")
    H, W = self.shape[2:]
    oh, ow = (int(v) for v in output_size)
    _check_sizes((H, W), (oh, ow))
    _check_not_empty(self)
    if self.dtype == torch.uint8:
        scales = tuple(None if s is None else float(s) for s in (scales_h, scales_w))
        return _aa_interp_uint8((H, W), (oh, ow), bool(align_corners), scales)(J(self))
    if self.dtype not in (torch.float32, torch.float64):
        raise NotImplementedError(
            f"\"compute_index_ranges_weights\" not implemented for '{dtypes.scalar_name(self.dtype)}'"
        )
    scales = tuple(None if s is None else float(s) for s in (scales_h, scales_w))
    jdt = dtypes.to_jax_dtype(self.dtype)
    return _aa_interp((H, W), (oh, ow), bool(align_corners), scales, opmath(jdt), jdt)(J(self))


register_backward(
    aten._upsample_bilinear2d_aa_backward.default, aten._upsample_bilinear2d_aa.default, prepare=_at_zeros
)
