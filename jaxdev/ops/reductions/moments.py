"""var, std, var_mean and std_mean, with Bessel's correction as a number."""

from __future__ import annotations

import math

import jax.numpy as jnp

from jaxdev import dtypes
from jaxdev.ops.kit import J, axes, division, jitted, opmath
from jaxdev.ops.registry import aten, register_functional


def _moments(self, dim, correction, keepdim):
    result = self.dtype if (self.dtype.is_floating_point or self.dtype.is_complex) else None
    if result is None:
        raise RuntimeError("std and var only support floating point and complex dtypes")
    ddof = 1 if correction is None else correction
    ax = axes(dim, self.dim())
    return _variance_and_mean(ax, ddof, bool(keepdim), dtypes.to_jax_dtype(result))(J(self))


@jitted
def _variance_and_mean(ax, ddof, keepdim, jdt):
    """(variance, mean) in one program, computed in opmath: the variance divides by max(0, N - ddof), as
    CPU does (a correction past the count divides by 0: inf, not jnp.var's nan)."""
    real = jnp.finfo(jdt).dtype if jnp.issubdtype(jdt, jnp.complexfloating) else jdt

    def run(x):
        x = x.astype(opmath(jdt))
        count = math.prod(x.shape[a] for a in ax)
        # jnp.mean's bits (a sum over its count), the quotient IEEE's where the platform's is not
        mean = division.divide(jnp.sum(x, axis=ax, keepdims=True), jnp.asarray(count, x.dtype))
        centered = x - mean
        squares = jnp.real(centered) ** 2 + jnp.imag(centered) ** 2 if jnp.iscomplexobj(x) else centered**2
        total = jnp.sum(squares, axis=ax, keepdims=keepdim)
        var = division.divide(total, jnp.asarray(max(0, count - ddof), total.dtype))  # IEEE's, as CPU's
        mean = mean if keepdim else jnp.squeeze(mean, ax)
        return var.astype(real), mean.astype(jdt)

    return run


@register_functional(aten.var.correction)
def var(self, dim=None, *, correction=None, keepdim=False):
    return _moments(self, dim, correction, keepdim)[0]


@register_functional(aten.std.correction)
def std(self, dim=None, *, correction=None, keepdim=False):
    v = _moments(self, dim, correction, keepdim)[0]
    return division.sqrt(v.astype(opmath(v.dtype))).astype(v.dtype)  # IEEE's, as CPU's (a TPU's is not)


@register_functional(aten.var_mean.correction)
def var_mean(self, dim=None, *, correction=None, keepdim=False):
    return _moments(self, dim, correction, keepdim)


@register_functional(aten.std_mean.correction)
def std_mean(self, dim=None, *, correction=None, keepdim=False):
    v, m = _moments(self, dim, correction, keepdim)
    return division.sqrt(v.astype(opmath(v.dtype))).astype(v.dtype), m
