"""Discrete Fourier transforms: the three primitives torch.fft decomposes into, `_fft_r2c`,
`_fft_c2r` and `_fft_c2c` (their backward formulas are built from the same three).

Each is an unnormalized transform over `dim`, then scaled by `normalization`: 0 none, 1 by
1/sqrt(n), 2 by 1/n, with n the product of the signal sizes (the real side's, for r2c and c2r).
JAX's "forward" norm applied to an inverse transform leaves it unscaled, which is what ATen's
backward transforms are.
"""

from __future__ import annotations

import math

import jax.numpy as jnp

from jaxdev.ops.registry import aten, register_functional
from jaxdev.ops.toolkit import J, jitted, wrap_dim


def _scaled(y, n, normalization):
    if normalization == 1:
        return y / jnp.sqrt(jnp.asarray(n, y.real.dtype)).astype(y.dtype)
    if normalization == 2:
        return y / jnp.asarray(n, y.real.dtype).astype(y.dtype)
    return y


def _axes(self, dim):
    return tuple(wrap_dim(d, self.dim()) for d in dim)


_COMPLEX = {jnp.dtype(jnp.float32): jnp.complex64, jnp.dtype(jnp.float64): jnp.complex128}


@jitted
def _r2c(axes, normalization, onesided):
    def run(x):
        n = math.prod(x.shape[a] for a in axes)
        y = jnp.fft.rfftn(x, axes=axes) if onesided else jnp.fft.fftn(x.astype(_COMPLEX[x.dtype]), axes=axes)
        return _scaled(y.astype(_COMPLEX[x.dtype]), n, normalization)

    return run


@register_functional(aten._fft_r2c.default)
def fft_r2c(self, dim, normalization, onesided):
    return _r2c(_axes(self, dim), normalization, bool(onesided))(J(self))


@jitted
def _c2r(axes, normalization, last_dim_size):
    def run(x):
        sizes = [x.shape[a] for a in axes[:-1]] + [last_dim_size]
        y = jnp.fft.irfftn(x, s=sizes, axes=axes, norm="forward")
        return _scaled(y.astype(x.real.dtype), math.prod(sizes), normalization)

    return run


@register_functional(aten._fft_c2r.default)
def fft_c2r(self, dim, normalization, last_dim_size):
    return _c2r(_axes(self, dim), normalization, int(last_dim_size))(J(self))


@jitted
def _c2c(axes, normalization, forward):
    def run(x):
        n = math.prod(x.shape[a] for a in axes)
        y = jnp.fft.fftn(x, axes=axes) if forward else jnp.fft.ifftn(x, axes=axes, norm="forward")
        return _scaled(y.astype(x.dtype), n, normalization)

    return run


@register_functional(aten._fft_c2c.default)
def fft_c2c(self, dim, normalization, forward):
    return _c2c(_axes(self, dim), normalization, bool(forward))(J(self))
