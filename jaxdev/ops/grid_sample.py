"""grid_sampler_2d / grid_sampler_3d (F.grid_sample on 4-D / 5-D inputs) and their backward.

PyTorch's CPU formulas: grid coordinates in [-1, 1] are unnormalized (align_corners or not), then
padded (zeros: out-of-range taps read 0; border: clipped; reflection: reflected, then clipped);
bilinear reads the 4 neighbours, nearest rounds half to even, bicubic reads 4x4 taps with A = -0.75
and pads each tap's index (2-D only, as in PyTorch). The backward is the vjp of the same function (grid gradients through the
unnormalize/clip/reflect steps, as CPU's chain rule), in float32 for half inputs.
"""

from __future__ import annotations

import jax.numpy as jnp

from jaxdev.ops.registry import aten, register_backward, register_functional
from jaxdev.ops.toolkit import J, jitted, opmath

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
    extra = jnp.fmod(x, span)
    flips = jnp.floor(x / span)
    return jnp.where(jnp.fmod(flips, 2) == 0, extra + lo, span - extra + lo)


def _pad_coord(x, size, padding_mode, align_corners):
    if padding_mode == BORDER:
        return jnp.clip(x, 0, size - 1)
    if padding_mode == REFLECTION:
        x = _reflect(x, 0, 2 * (size - 1)) if align_corners else _reflect(x, -1, 2 * size - 1)
        return jnp.clip(x, 0, size - 1)
    return x


def _read(img, iy, ix):
    """img (N, C, H, W); iy, ix int (N, Ho, Wo) -> (N, C, Ho, Wo), zero where out of range."""
    N, C, H, W = img.shape
    inside = (iy >= 0) & (iy < H) & (ix >= 0) & (ix < W)
    flat = (jnp.clip(iy, 0, H - 1) * W + jnp.clip(ix, 0, W - 1)).reshape((N, 1, -1))
    v = jnp.take_along_axis(img.reshape((N, C, H * W)), flat, axis=2).reshape((N, C) + iy.shape[1:])
    return jnp.where(inside[:, None], v, jnp.zeros((), img.dtype))


def _cubic(t):
    A = -0.75

    def near(x):
        return ((A + 2) * x - (A + 3)) * x * x + 1

    def far(x):
        return ((A * x - 5 * A) * x + 8 * A) * x - 4 * A

    return [far(t + 1), near(t), near(1 - t), far(2 - t)]


def _sample(img, grid, mode, padding_mode, align_corners):
    H, W = img.shape[-2:]
    gx, gy = grid[..., 0], grid[..., 1]
    if mode == BICUBIC:
        x, y = _unnormalize(gx, W, align_corners), _unnormalize(gy, H, align_corners)
        x0, y0 = jnp.floor(x), jnp.floor(y)
        wx, wy = _cubic(x - x0), _cubic(y - y0)
        out = 0
        for i in range(4):
            row = 0
            for j in range(4):
                tx = _pad_coord(x0 - 1 + j, W, padding_mode, align_corners)
                ty = _pad_coord(y0 - 1 + i, H, padding_mode, align_corners)
                v = _read(img, ty.astype(jnp.int32), tx.astype(jnp.int32))
                row = row + v * wx[j][:, None]
            out = out + row * wy[i][:, None]
        return out
    x = _pad_coord(_unnormalize(gx, W, align_corners), W, padding_mode, align_corners)
    y = _pad_coord(_unnormalize(gy, H, align_corners), H, padding_mode, align_corners)
    if mode == NEAREST:
        return _read(img, jnp.round(y).astype(jnp.int32), jnp.round(x).astype(jnp.int32))
    x0, y0 = jnp.floor(x), jnp.floor(y)
    x1, y1 = x0 + 1, y0 + 1
    ix0, iy0, ix1, iy1 = (v.astype(jnp.int32) for v in (x0, y0, x1, y1))
    nw = ((x1 - x) * (y1 - y))[:, None]
    ne = ((x - x0) * (y1 - y))[:, None]
    sw = ((x1 - x) * (y - y0))[:, None]
    se = ((x - x0) * (y - y0))[:, None]
    return _read(img, iy0, ix0) * nw + _read(img, iy0, ix1) * ne + _read(img, iy1, ix0) * sw + _read(img, iy1, ix1) * se


@jitted
def _sampler(mode, padding_mode, align_corners):
    def fwd(img, grid):
        c = opmath(img.dtype)
        return _sample(img.astype(c), grid.astype(c), mode, padding_mode, align_corners).astype(img.dtype)

    return fwd


def _check(input, grid, mode, padding_mode):
    if input.dim() != 4 or grid.dim() != 4 or grid.shape[-1] != 2 or grid.shape[0] != input.shape[0]:
        raise RuntimeError(
            "grid_sampler(): expected 4D input and grid with same batch size and grid of shape "
            f"[N, H, W, 2], but got input with sizes {list(input.shape)} and grid with sizes {list(grid.shape)}"
        )
    _check_modes(input, grid, mode, padding_mode)


def _check_modes(input, grid, mode, padding_mode):
    if input.dtype != grid.dtype:
        raise RuntimeError(
            f"grid_sampler(): expected input and grid to have same dtype, but input has {input.dtype} and grid has {grid.dtype}"
        )
    if mode not in (BILINEAR, NEAREST, BICUBIC) or padding_mode not in (ZEROS, BORDER, REFLECTION):
        raise RuntimeError(f"grid_sampler(): unknown interpolation mode {mode} or padding mode {padding_mode}")


@register_functional(aten.grid_sampler_2d.default)
def grid_sampler_2d(input, grid, interpolation_mode, padding_mode, align_corners):
    _check(input, grid, interpolation_mode, padding_mode)
    return _sampler(interpolation_mode, padding_mode, bool(align_corners))(J(input), J(grid))


register_backward(aten.grid_sampler_2d_backward.default, aten.grid_sampler_2d.default)


# --- 3-D: (bi)linear over 8 corners, or nearest -----------------------------------------------------


def _read3(img, iz, iy, ix):
    N, C, D, H, W = img.shape
    inside = (iz >= 0) & (iz < D) & (iy >= 0) & (iy < H) & (ix >= 0) & (ix < W)
    flat = ((jnp.clip(iz, 0, D - 1) * H + jnp.clip(iy, 0, H - 1)) * W + jnp.clip(ix, 0, W - 1)).reshape((N, 1, -1))
    v = jnp.take_along_axis(img.reshape((N, C, D * H * W)), flat, axis=2).reshape((N, C) + iz.shape[1:])
    return jnp.where(inside[:, None], v, jnp.zeros((), img.dtype))


def _sample3d(img, grid, mode, padding_mode, align_corners):
    sizes = img.shape[-3:]  # D, H, W <- grid's (z, y, x)
    coords = [
        _pad_coord(_unnormalize(grid[..., 2 - k], sizes[k], align_corners), sizes[k], padding_mode, align_corners)
        for k in range(3)
    ]
    if mode == NEAREST:
        return _read3(img, *(jnp.round(c).astype(jnp.int32) for c in coords))
    lows = [jnp.floor(c) for c in coords]
    out = 0
    for corner in range(8):
        picks = [(corner >> (2 - k)) & 1 for k in range(3)]
        w = [(c - lo) if hi else (lo + 1 - c) for c, lo, hi in zip(coords, lows, picks)]
        index = [(lo + hi).astype(jnp.int32) for lo, hi in zip(lows, picks)]
        out = out + _read3(img, *index) * (w[2] * w[1] * w[0])[:, None]  # CPU's order: x * y * z
    return out


@jitted
def _sampler3d(mode, padding_mode, align_corners):
    def fwd(img, grid):
        c = opmath(img.dtype)
        return _sample3d(img.astype(c), grid.astype(c), mode, padding_mode, align_corners).astype(img.dtype)

    return fwd


def _check3d(input, grid, mode, padding_mode):
    if input.dim() != 5 or grid.dim() != 5 or grid.shape[-1] != 3 or grid.shape[0] != input.shape[0]:
        raise RuntimeError(
            "grid_sampler(): expected 5D input and grid with same batch size and grid of shape "
            f"[N, D, H, W, 3], but got input with sizes {list(input.shape)} and grid with sizes {list(grid.shape)}"
        )
    if mode == BICUBIC:
        raise RuntimeError("grid_sampler(): bicubic interpolation only supports 4D input")
    _check_modes(input, grid, mode, padding_mode)


@register_functional(aten.grid_sampler_3d.default)
def grid_sampler_3d(input, grid, interpolation_mode, padding_mode, align_corners):
    _check3d(input, grid, interpolation_mode, padding_mode)
    return _sampler3d(interpolation_mode, padding_mode, bool(align_corners))(J(input), J(grid))


register_backward(aten.grid_sampler_3d_backward.default, aten.grid_sampler_3d.default)
