"""grid_sampler_2d / grid_sampler_3d (F.grid_sample on 4-D / 5-D inputs), one sampler for both,
and their backward (derived by the registry as the VJP of the forward).

PyTorch's CPU formulas: grid coordinates in [-1, 1] are unnormalized (align_corners or not), then
padded (zeros: out-of-range taps read 0; border: clipped; reflection: reflected, then clipped);
(bi/tri)linear reads the 2^n neighbours and weighs them in CPU's order (x * y * z), nearest rounds
half to even, bicubic (2-D only, as in PyTorch) reads 4x4 taps with A = -0.75 and pads each tap's
index, rounding step by step as CPU's vectorized kernel does (_bicubic). Other half inputs compute in
float32.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import torch

from jaxdev import dtypes
from jaxdev.ops.kit import J, jitted, opmath
from jaxdev.ops.kit.cpu_numerics import divide, fmod, narrowed, round_to
from jaxdev.ops.registry import aten, register_backward, register_functional

BILINEAR, NEAREST, BICUBIC = 0, 1, 2
ZEROS, BORDER, REFLECTION = 0, 1, 2


def _unnormalize(coord, size, align_corners):
    if align_corners:
        return (coord + 1) / 2 * (size - 1)
    return ((coord + 1) * size - 1) / 2


def _reflect(x, twice_low, twice_high):
    if twice_low == twice_high:
        return jnp.zeros_like(x)
    lo = twice_low / 2
    span = (twice_high - twice_low) / 2
    x = jnp.abs(x - lo)
    extra = fmod(x, span)  # C's fmod and an IEEE quotient where the platform's are not (a TPU)
    flips = jnp.floor(divide(x, span))
    return jnp.where(fmod(flips, 2) == 0, extra + lo, span - extra + lo)


def _pad_coord(x, size, padding_mode, align_corners):
    if padding_mode == BORDER:
        return jnp.clip(x, 0, size - 1)
    if padding_mode == REFLECTION:
        x = _reflect(x, 0, 2 * (size - 1)) if align_corners else _reflect(x, -1, 2 * size - 1)
        return jnp.clip(x, 0, size - 1)
    return x


def _read(img, index):
    """img (N, C, *sizes); index: one int array (N, *out) per spatial dim -> (N, C, *out), zero
    where any index is out of range."""
    N, C, *sizes = img.shape
    inside = _all([(i >= 0) & (i < n) for i, n in zip(index, sizes)])
    flat = 0
    for i, n in zip(index, sizes):
        flat = flat * n + jnp.clip(i, 0, n - 1)
    v = jnp.take_along_axis(img.reshape((N, C, -1)), flat.reshape((N, 1, -1)), axis=2)
    return jnp.where(inside[:, None], v.reshape((N, C) + index[0].shape[1:]), jnp.zeros((), img.dtype))


def _all(masks):
    out = masks[0]
    for m in masks[1:]:
        out = out & m
    return out


def _rounding(dtype):
    """(the dtype to compute in, the rounding after each step) for CPU's step-by-step rounding. XLA fuses
    float32 a * b + c into one FMA where it likes (and drops a float64 -> float32 -> float64 round
    trip), so float32 and the halves (whose Vectorized ops each round back to the half dtype) compute
    in float64, each step rounded by reduce_precision, subnormals kept; float64 is left to XLA."""
    if dtype == jnp.float64:
        return dtype, lambda v: v
    return jnp.float64, round_to(dtype)  # from float64: one rounding, subnormals kept


def _bicubic(img, grid, padding_mode, align_corners):
    """CPU's vectorized bicubic (GridSamplerKernel.cpp, ApplyGridSample<..., Bicubic, ...>::forward) with
    the multiply-adds GCC fuses in it (found bit for bit against torch's AVX2 and AVX512 kernels, which
    agree; its no-FMA DEFAULT kernel differs by up to 1.8e-2 on OpInfo's 0..255 images): unnormalize
    (g + 1) * (size / 2) - 0.5 as one FMA (align_corners: (g + 1) * ((size - 1) / 2)); the coefficients
    ((A x - 5A) x + 8A) x - 4A step by step and ((A + 2) x - (A + 3)) x x + 1 with its first and last
    steps fused; along x c0 v0 + c1 v1 fused, then + c2 v2 and + c3 v3 rounded; along y every term
    fused but the first. Taps are padded as compute_coordinates pads them. Half and bfloat16 (CPU's
    Vectorized<Half> converts to float and back around each operation) round every step, fuse none."""
    H, W = img.shape[2:]
    wide, r = _rounding(img.dtype)
    A = -0.75

    def mul(a, b):
        return r(a * b)

    def add(a, b):
        return r(a + b)

    def fma(a, b, c):  # float32: one rounding (a * b is exact in float64); a half op rounds twice
        return r(a * b + c) if img.dtype == jnp.float32 else r(r(a * b) + c)

    def unnormalize(g, size):
        g = add(g.astype(wide), 1.0)
        return mul(g, (size - 1) / 2) if align_corners else fma(g, size / 2, -0.5)

    def far(x):
        return add(mul(add(mul(add(mul(A, x), -5 * A), x), 8 * A), x), -4 * A)

    def near(x):
        return fma(mul(fma(A + 2, x, -(A + 3)), x), x, 1.0)

    def coefficients(t):
        return [far(add(t, 1.0)), near(t), near(add(1.0, -t)), far(add(2.0, -t))]

    def tap(v, size):
        if padding_mode == ZEROS:  # a NaN coordinate converts to INT_MIN on CPU: outside, reads 0
            return jnp.where(jnp.isnan(v), -1.0, v)
        if padding_mode == REFLECTION:
            if size <= 1 and align_corners:
                return jnp.zeros_like(v)
            low, twice = (0.0, 2.0 * (size - 1)) if align_corners else (-0.5, 2.0 * size)
            folded = jnp.abs(add(v, -low))
            extra = fma(-jnp.trunc(r(folded / twice)), twice, folded)
            v = add(jnp.minimum(extra, add(twice, -extra)), low)
        return jnp.clip(v, 0, size - 1)

    x, y = unnormalize(grid[..., 0], W), unnormalize(grid[..., 1], H)
    x0, y0 = jnp.floor(x), jnp.floor(y)
    cx, cy = coefficients(add(x, -x0)), coefficients(add(y, -y0))
    rows = []
    for i in range(4):
        ty = tap(add(y0, i - 1.0), H)
        v = [
            _read(img, (ty.astype(jnp.int32), tap(add(x0, j - 1.0), W).astype(jnp.int32))).astype(wide)
            for j in range(4)
        ]
        c = [k[:, None] for k in cx]
        rows.append(add(add(fma(c[0], v[0], mul(c[1], v[1])), mul(c[2], v[2])), mul(c[3], v[3])))
    c = [k[:, None] for k in cy]
    return narrowed(fma(c[3], rows[3], fma(c[2], rows[2], fma(c[1], rows[1], mul(c[0], rows[0])))), img.dtype)


def _sample(img, grid, mode, padding_mode, align_corners):
    sizes = img.shape[2:]  # (D,) H, W <- the grid's last axis holds (x, y[, z])
    nd = len(sizes)
    if mode == BICUBIC:
        return _bicubic(img, grid, padding_mode, align_corners)
    raw = [_unnormalize(grid[..., nd - 1 - k], sizes[k], align_corners) for k in range(nd)]
    coords = [_pad_coord(c, n, padding_mode, align_corners) for c, n in zip(raw, sizes)]
    if mode == NEAREST:
        return _read(img, [jnp.round(c).astype(jnp.int32) for c in coords])
    lows = [jnp.floor(c) for c in coords]
    out = 0
    for corner in range(2**nd):
        picks = [(corner >> (nd - 1 - k)) & 1 for k in range(nd)]
        w = [(c - lo) if hi else (lo + 1 - c) for c, lo, hi in zip(coords, lows, picks)]
        weight = w[nd - 1]
        for k in range(nd - 2, -1, -1):  # CPU's order: x * y * z
            weight = weight * w[k]
        out = out + _read(img, [(lo + hi).astype(jnp.int32) for lo, hi in zip(lows, picks)]) * weight[:, None]
    return out


def _sample_half_2d(img, grid, mode, padding_mode, align_corners):
    """CPU's vectorized 2-D kernel (GridSamplerKernel.cpp) on Vectorized<half>: every arithmetic
    step rounds to the half dtype, in its order: unnormalize (in + 1) * s (- 0.5), padding, then
    for bilinear w = x - floor(x), e = 1 - w, nw = s * e, ... and ((nw_val * nw + ne_val * ne) +
    sw_val * sw) + se_val * se; nearest reads at nearbyint(x)."""
    half, f32 = img.dtype, jnp.float32

    r = round_to(half)
    img, grid = img.astype(f32), grid.astype(f32)
    H, W = img.shape[2:]

    def coordinate(v, size):
        if align_corners:
            v = r(r(v + 1) * r(jnp.float32((size - 1) / 2)))
        else:
            v = r(r(r(v + 1) * r(jnp.float32(size / 2))) - 0.5)
        if padding_mode == ZEROS:
            return v
        if padding_mode == REFLECTION:
            if align_corners:
                if size <= 1:
                    return jnp.zeros_like(v)
                low, twice = 0.0, r(jnp.float32((size - 1) * 2))
                a = jnp.abs(v)
            else:
                low, twice = -0.5, r(jnp.float32(size * 2))
                a = jnp.abs(r(v - low))
            extra = r(a - r(jnp.trunc(r(a / twice)) * twice))
            v = jnp.minimum(extra, r(twice - extra))
            if not align_corners:
                v = r(v + low)
        return jnp.minimum(jnp.float32(size - 1), jnp.where(jnp.isnan(v), 0.0, jnp.maximum(0.0, v)))

    x, y = coordinate(grid[..., 0], W), coordinate(grid[..., 1], H)
    if mode == NEAREST:
        return _read(img, [jnp.round(y).astype(jnp.int32), jnp.round(x).astype(jnp.int32)])
    x_w, y_n = jnp.floor(x), jnp.floor(y)
    w, n = r(x - x_w), r(y - y_n)
    e, s = r(1 - w), r(1 - n)
    iy, ix = y_n.astype(jnp.int32), x_w.astype(jnp.int32)
    out = None
    for dy, dx, weight in ((0, 0, r(s * e)), (0, 1, r(s * w)), (1, 0, r(n * e)), (1, 1, r(n * w))):
        term = r(_read(img, (iy + dy, ix + dx)) * weight[:, None])
        out = term if out is None else r(out + term)
    return out


def _sample_half_3d(img, grid, mode, padding_mode, align_corners):
    """CPU's scalar 3-D kernel (GridSampler.cpp) in c10::Half/BFloat16 arithmetic, one rounding per
    operation: unnormalize ((c + 1) * size - 1) / 2 (align: (c + 1) / 2 * (size - 1)), border clip,
    trilinear weights (x1 - x) * (y1 - y) * (z1 - z), and out += value * weight corner by corner
    (tnw, tne, tsw, tse, bnw, bne, bsw, bse); nearest reads at nearbyint."""
    half, f32 = img.dtype, jnp.float32

    r = round_to(half)
    img, grid = img.astype(f32), grid.astype(f32)
    D, H, W = img.shape[2:]

    def coordinate(v, size):
        v = r(r(r(v + 1) / 2) * (size - 1)) if align_corners else r(r(r(r(v + 1) * size) - 1) / 2)
        if padding_mode == BORDER:  # std::min(size - 1, std::max(v, 0)): NaN lands on size - 1
            v = jnp.where(jnp.isnan(v), jnp.float32(size - 1), jnp.clip(v, 0.0, size - 1))
        return v

    def index(v):  # a NaN coordinate casts to INT64_MIN on CPU: out of bounds, never read
        return jnp.where(jnp.isnan(v), -2.0, v)

    x, y, z = coordinate(grid[..., 0], W), coordinate(grid[..., 1], H), coordinate(grid[..., 2], D)
    if mode == NEAREST:
        return _read(img, [index(jnp.round(c)).astype(jnp.int32) for c in (z, y, x)])
    x0, y0, z0 = index(jnp.floor(x)), index(jnp.floor(y)), index(jnp.floor(z))
    out = None
    for dz in (0, 1):
        for dy in (0, 1):
            for dx in (0, 1):
                wx = r(x - x0) if dx else r(x0 + 1 - x)
                wy = r(y - y0) if dy else r(y0 + 1 - y)
                wz = r(z - z0) if dz else r(z0 + 1 - z)
                weight = r(r(wx * wy) * wz)
                idx = [(c0 + dd).astype(jnp.int32) for c0, dd in ((z0, dz), (y0, dy), (x0, dx))]
                inside = _all([(i >= 0) & (i < n) for i, n in zip(idx, (D, H, W))])[:, None]
                term = jnp.where(inside, r(_read(img, idx) * weight[:, None]), 0.0)  # CPU skips the corner
                out = term if out is None else r(out + term)
    return out


@jitted
def _sampler(mode, padding_mode, align_corners):
    def float_path(img, grid):
        if mode == BICUBIC:
            return _bicubic(img, grid, padding_mode, align_corners)
        c = opmath(img.dtype)
        return _sample(img.astype(c), grid.astype(c), mode, padding_mode, align_corners).astype(img.dtype)

    @jax.custom_vjp
    def half_2d(img, grid):  # forward as CPU's Vectorized<half> kernel, gradient as before
        return _sample_half_2d(img, grid, mode, padding_mode, align_corners).astype(img.dtype)

    half_2d.defvjp(
        lambda img, grid: (half_2d(img, grid), (img, grid)), lambda saved, g: jax.vjp(float_path, *saved)[1](g)
    )

    @jax.custom_vjp
    def half_3d(img, grid):
        return _sample_half_3d(img, grid, mode, padding_mode, align_corners).astype(img.dtype)

    half_3d.defvjp(
        lambda img, grid: (half_3d(img, grid), (img, grid)), lambda saved, g: jax.vjp(float_path, *saved)[1](g)
    )

    def fwd(img, grid):
        if img.dtype in (jnp.bfloat16, jnp.float16) and mode in (BILINEAR, NEAREST):
            if img.ndim == 4:
                return half_2d(img, grid)
            if padding_mode != REFLECTION:  # (3-D reflection in half arithmetic is not reproduced)
                return half_3d(img, grid)
        return float_path(img, grid)

    return fwd


def _check(input, grid, mode, padding_mode, nd):
    """CPU's checks in CPU's order: check_grid_sampler_common, check_grid_sampler_{2,3}d, then its kernel's
    (bicubic in 3-D, the grid's dtype). An unknown mode or padding, which CPU runs unchecked, is refused."""
    _check_shapes(input, grid, nd)
    if nd == 3 and mode == BICUBIC:
        raise RuntimeError("grid_sampler(): bicubic interpolation only supports 4D input")
    if input.dtype != grid.dtype:
        raise RuntimeError(
            f"expected scalar type {dtypes.scalar_name(input.dtype)} but found {dtypes.scalar_name(grid.dtype)}"
        )
    _check_modes(mode, padding_mode)


def _check_modes(mode, padding_mode):
    if mode not in (BILINEAR, NEAREST, BICUBIC) or padding_mode not in (ZEROS, BORDER, REFLECTION):
        raise RuntimeError(f"grid_sampler(): unknown interpolation mode {mode} or padding mode {padding_mode}")


def _check_shapes(input, grid, nd):
    sizes = f"input with sizes {list(input.shape)} and grid with sizes {list(grid.shape)}"
    if input.size(0) != grid.size(0):  # on a 0-d tensor: torch's own IndexError, as on CPU
        raise RuntimeError(f"grid_sampler(): expected grid and input to have same batch size, but got {sizes}")
    if grid.size(-1) != input.dim() - 2:
        raise RuntimeError(
            f"grid_sampler(): expected grid to have size {input.dim() - 2} in last dimension, but got grid with "
            f"sizes {list(grid.shape)}"
        )
    for i in range(2, input.dim()):
        if input.size(i) <= 0:
            raise RuntimeError(
                "grid_sampler(): expected input to have non-empty spatial dimensions, but input has sizes "
                f"{list(input.shape)} with dimension {i} being empty"
            )
    if input.dim() != nd + 2 or grid.dim() != input.dim():
        raise RuntimeError(
            f"grid_sampler(): expected {nd + 2}D input and grid with same number of dimensions, but got {sizes}"
        )


def _register(nd: int) -> None:
    forward = getattr(aten, f"grid_sampler_{nd}d").default

    @register_functional(forward)
    def grid_sampler(input, grid, interpolation_mode, padding_mode, align_corners):
        _check(input, grid, interpolation_mode, padding_mode, nd)
        return _sampler(interpolation_mode, padding_mode, bool(align_corners))(J(input), J(grid))

    register_backward(getattr(aten, f"grid_sampler_{nd}d_backward").default, forward)


_register(2)
_register(3)


# _grid_sampler_2d_cpu_fallback: CPU's scalar float32 loop for grid_sampler_2d (CompositeExplicitAutograd,
# reading data_ptr<float>: on jax it segfaulted). The same values as grid_sampler_2d; its checks are the
# shape checks, then data_ptr<float>'s on input and grid (float32 only, whatever the other's dtype).
_FALLBACK = aten._grid_sampler_2d_cpu_fallback.default


@register_functional(_FALLBACK)
def grid_sampler_2d_cpu_fallback(input, grid, interpolation_mode, padding_mode, align_corners):
    _check_shapes(input, grid, 2)
    for t in (input, grid):
        if t.dtype != torch.float32:
            raise RuntimeError(f"expected scalar type Float but found {dtypes.scalar_name(t.dtype)}")
    _check_modes(interpolation_mode, padding_mode)
    return _sampler(interpolation_mode, padding_mode, bool(align_corners))(J(input), J(grid))


# A backend kernel from torch 2.12 on; before (2.11) it is CompositeImplicitAutograd and decomposes.
if not torch._C._dispatch_has_kernel_for_dispatch_key(
    aten._grid_sampler_2d_cpu_fallback_backward.default.name(), "CompositeImplicitAutograd"
):
    register_backward(aten._grid_sampler_2d_cpu_fallback_backward.default, _FALLBACK)
