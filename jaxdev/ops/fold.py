"""im2col / col2im (F.unfold / F.fold): sliding blocks of a padded image as columns, and back.

Column rows are ordered (channel, kernel row, kernel col), columns (block row, block col), as in
PyTorch. col2im is the transpose of im2col (overlapping blocks add up), so it is computed as its
vjp; each is the other's backward.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import torch

from jaxdev.ops.kit import J, jitted, opmath, wrap_dim
from jaxdev.ops.registry import aten, broadcast_shapes, register_functional


def _blocks(size, k, d, p, s):
    return (size + 2 * p - (d * (k - 1) + 1)) // s + 1


def _im2col(x, k, d, p, s):
    """x: (N, C, H, W) -> (N, C*kh*kw, L)."""
    N, C, H, W = x.shape
    oh, ow = _blocks(H, k[0], d[0], p[0], s[0]), _blocks(W, k[1], d[1], p[1], s[1])
    xp = jnp.pad(x, ((0, 0), (0, 0), (p[0], p[0]), (p[1], p[1])))
    parts = []
    for i in range(k[0]):
        for j in range(k[1]):
            h0, w0 = i * d[0], j * d[1]
            parts.append(xp[:, :, h0 : h0 + (oh - 1) * s[0] + 1 : s[0], w0 : w0 + (ow - 1) * s[1] + 1 : s[1]])
    cols = jnp.stack(parts, axis=2)  # (N, C, kh*kw, oh, ow)
    return cols.reshape((N, C * k[0] * k[1], oh * ow))


@jitted
def _unfold(k, d, p, s):
    return lambda x: _im2col(x, k, d, p, s)


@jitted
def _fold(image, k, d, p, s):
    def run(cols):
        c = opmath(cols.dtype)
        N, CK, _ = cols.shape
        x = jnp.zeros((N, CK // (k[0] * k[1])) + image, c)
        _, vjp = jax.vjp(lambda v: _im2col(v, k, d, p, s), x)
        return vjp(cols.astype(c))[0].astype(cols.dtype)

    return run


def _params(kernel_size, dilation, padding, stride):
    k, d, p, s = (tuple(v) for v in (kernel_size, dilation, padding, stride))
    if min(k) <= 0:
        raise RuntimeError(
            f"kernel size should be greater than zero, but got kernel_height: {k[0]} kernel_width: {k[1]}"
        )
    if min(d) <= 0:
        raise RuntimeError(
            f"dilation should be greater than zero, but got dilation_height: {d[0]} dilation_width: {d[1]}"
        )
    if min(s) <= 0:
        raise RuntimeError(f"stride should be greater than zero, but got stride_height: {s[0]} stride_width: {s[1]}")
    if min(p) < 0:
        raise RuntimeError(f"padding should be non-negative, but got pad_height: {p[0]} pad_width: {p[1]}")
    return k, d, p, s


@register_functional(aten.im2col.default)
def im2col(self, kernel_size, dilation, padding, stride):
    k, d, p, s = _params(kernel_size, dilation, padding, stride)
    if self.dim() not in (3, 4) or any(n == 0 for n in self.shape[-3:]):
        raise RuntimeError(
            f"Expected 3D or 4D (batch mode) tensor with possibly 0 batch size and other non-zero dimensions for input, but got: {list(self.shape)}"
        )
    H, W = self.shape[-2:]
    oh, ow = _blocks(H, k[0], d[0], p[0], s[0]), _blocks(W, k[1], d[1], p[1], s[1])
    if oh < 1 or ow < 1:
        raise RuntimeError(
            f"Given input with spatial size ({H}, {W}), kernel_size=({k[0]}, {k[1]}), dilation=({d[0]}, {d[1]}), "
            f"padding=({p[0]}, {p[1]}), calculated shape of the array of sliding blocks as ({oh}, {ow}), "
            "but its components must be at least one."
        )
    x = J(self)
    batched = x.ndim == 4
    r = _unfold(k, d, p, s)(x if batched else x[None])
    return r if batched else r[0]


@register_functional(aten.col2im.default)
def col2im(self, output_size, kernel_size, dilation, padding, stride):
    k, d, p, s = _params(kernel_size, dilation, padding, stride)
    if self.dim() not in (2, 3) or any(n == 0 for n in self.shape[-2:]):
        raise RuntimeError(
            f"Expected 2D or 3D (batch mode) tensor for input with possibly 0 batch size and non-zero dimensions for input, but got: {list(self.shape)}"
        )
    H, W = output_size
    blocks = _blocks(H, k[0], d[0], p[0], s[0]) * _blocks(W, k[1], d[1], p[1], s[1])
    if self.shape[-2] % (k[0] * k[1]):
        raise RuntimeError(
            f"Expected size of input's dimension 1 to be divisible by the product of kernel_size, but got "
            f"input.size(1)={self.shape[-2]} and kernel_size=({k[0]}, {k[1]})"
        )
    if self.shape[-1] != blocks:
        raise RuntimeError(
            f"Given output_size=({H}, {W}), kernel_size=({k[0]}, {k[1]}), dilation=({d[0]}, {d[1]}), padding=({p[0]}, {p[1]}), "
            f"stride=({s[0]}, {s[1]}), expected size of input's dimension 2 to match the calculated number of sliding "
            f"blocks {_blocks(H, k[0], d[0], p[0], s[0])} * {_blocks(W, k[1], d[1], p[1], s[1])} = {blocks}, but got input.size(2)={self.shape[-1]}."
        )
    x = J(self)
    batched = x.ndim == 3
    r = _fold((H, W), k, d, p, s)(x if batched else x[None])
    return r if batched else r[0]


# --- unfold_backward: Tensor.unfold's windows added back into the unfolded dimension -----------------


@jitted
def _unfold_back(input_sizes: tuple, dim: int, size: int, step: int, jdt):
    def body(g):
        acc = jnp.int32 if jdt == jnp.bool_ else jdt
        n = g.shape[dim]
        g = jnp.moveaxis(jnp.moveaxis(g, dim, 0), -1, 1).astype(acc)  # (windows, size, *rest)
        idx = (jnp.arange(n)[:, None] * step + jnp.arange(size)[None, :]).reshape(-1)
        rest = g.shape[2:]
        out = jnp.zeros((input_sizes[dim], *rest), acc).at[idx].add(g.reshape((n * size, *rest)))
        out = jnp.moveaxis(out, 0, dim)
        return (out != 0) if jdt == jnp.bool_ else out

    return body


@register_functional(aten.unfold_backward.default)
def unfold_backward(grad_in, input_sizes, dim, size, step):
    """Each window element w * step + k of `dim` receives grad_in[..., w, ..., k]; overlapping
    windows add (bool: any), positions no window covers get zero.

    grad_in should have the shape of input.unfold(dim, size, step) (its checks and errors are
    CPU's). Where windows do not overlap (step >= size) CPU copies grad_in
    into that unfolded view, so a grad_in that broadcasts to it is taken, as CPU does; where they do,
    CPU's kernel reads grad_in with the unfolded strides whatever its shape (outside it, for a smaller
    one), so any other shape is refused here."""
    if step <= 0:
        raise ValueError(f"step is {step} but must be > 0")
    sizes = tuple(int(s) for s in input_sizes)
    # unfold's checks as CPU makes them (a meta tensor raises other error types), on a CPU tensor of no memory
    unfolded = tuple(torch.empty_strided(sizes, [0] * len(sizes)).unfold(dim, size, step).shape)
    d = wrap_dim(dim, len(sizes))
    g = J(grad_in)
    if tuple(g.shape) != unfolded:
        if step < size:
            raise RuntimeError(
                f"unfold_backward: grad_in has shape {list(g.shape)}, but unfolding a tensor of shape "
                f"{list(sizes)} along dim {dim} (size {size}, step {step}) gives {list(unfolded)}"
            )
        wide = broadcast_shapes(unfolded, tuple(g.shape))
        if wide != unfolded:
            raise RuntimeError(f"output with shape {list(unfolded)} doesn't match the broadcast shape {list(wide)}")
        g = jnp.broadcast_to(g, unfolded)
    if not sizes:  # a 0-dim tensor unfolds into one window of one element
        return g.reshape(())
    return _unfold_back(sizes, d, int(size), int(step), g.dtype)(g)
