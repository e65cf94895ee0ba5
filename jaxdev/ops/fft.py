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

from jaxdev import dtypes, tensor
from jaxdev.ops.kit import J, cast, jitted, wrap_dim
from jaxdev.ops.registry import aten, register, register_functional, store_into


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


@register_functional(aten._fft_r2c.default, out=False)
def fft_r2c(self, dim, normalization, onesided):
    return _r2c(_axes(self, dim), normalization, bool(onesided))(J(self))


@jitted
def _c2r(axes, normalization, last_dim_size):
    def run(x):
        sizes = [x.shape[a] for a in axes[:-1]] + [last_dim_size]
        y = jnp.fft.irfftn(x, s=sizes, axes=axes, norm="forward")
        return _scaled(y.astype(x.real.dtype), math.prod(sizes), normalization)

    return run


@register_functional(aten._fft_c2r.default, out=False)
def fft_c2r(self, dim, normalization, last_dim_size):
    return _c2r(_axes(self, dim), normalization, int(last_dim_size))(J(self))


@jitted
def _c2c(axes, normalization, forward):
    def run(x):
        n = math.prod(x.shape[a] for a in axes)
        y = jnp.fft.fftn(x, axes=axes) if forward else jnp.fft.ifftn(x, axes=axes, norm="forward")
        return _scaled(y.astype(x.dtype), n, normalization)

    return run


@register_functional(aten._fft_c2c.default, out=False)
def fft_c2c(self, dim, normalization, forward):
    return _c2c(_axes(self, dim), normalization, bool(forward))(J(self))


# CPU's out= kernels compute the result, resize out to it and copy_ it in: any out dtype takes it, as a
# cast (a complex result into a real out keeps the real part, with copy_'s warning).
def _out_kernel(fn):
    def kernel(self, *args, out):
        tensor.check_no_partial_overlap(out, (self,))
        value = fn(self, *args)
        return store_into(out, cast(value, out.dtype), resize=out is not self)

    return kernel


@register(aten._fft_r2c.out)
def fft_r2c_out(self, dim, normalization, onesided, *, out):
    """Two-sided into a real out: CPU copies the one-sided half in, then mirrors it, which only complex
    dtypes can (nothing to mirror where the last dim has at most 2 elements)."""
    if not onesided and not out.dtype.is_complex:
        last = _axes(self, dim)[-1]
        if self.numel() and self.shape[last] > 2:
            if tuple(out.shape) != tuple(self.shape):
                out.resize_(self.shape)
            raise NotImplementedError(
                f"\"_fft_fill_with_conjugate_symmetry\" not implemented for '{dtypes.scalar_name(out.dtype)}'"
            )
    return _out_kernel(fft_r2c)(self, dim, normalization, onesided, out=out)


register(aten._fft_c2r.out)(_out_kernel(fft_c2r))
register(aten._fft_c2c.out)(_out_kernel(fft_c2c))
