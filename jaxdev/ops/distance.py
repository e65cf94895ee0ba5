"""Pairwise distances: _cdist_forward / _cdist_backward and _pdist_forward / _pdist_backward.

p-norms of row differences, with PyTorch's special cases: p=0 counts differing coordinates, p=inf
takes the largest, and for p=2 on larger inputs (or compute_mode 1) CPU switches to the matmul form
|x|^2 - 2x.y + |y|^2 (clamped at 0): done here too, so both agree to rounding. Gradients are CPU's
closed forms, zero where a distance is zero.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np

from jaxdev.ops.kit import J, division, jitted, opmath
from jaxdev.ops.registry import aten, register_functional

HIGHEST = jax.lax.Precision.HIGHEST


def _norm(diff, p):
    a = jnp.abs(diff)
    if p == 0:
        return jnp.sum((a != 0).astype(a.dtype), -1)
    if p == math.inf:
        return jnp.max(a, -1)
    if p == 1:
        return jnp.sum(a, -1)
    if p == 2:
        return division.sqrt(jnp.sum(a * a, -1))  # IEEE's, as CPU's (a TPU's is not)
    return jnp.sum(a**p, -1) ** (1.0 / p)


def _norm_grad(diff, dist, g, p):
    """d(dist)/d(x1) * g for each pair; diff = x1 - x2 (..., M), dist and g (...)."""
    dist, g = dist[..., None], g[..., None]
    zero = jnp.zeros((), diff.dtype)
    if p == 0:
        return jnp.zeros_like(diff)
    if p == 1:
        return jnp.sign(diff) * g
    if p == math.inf:
        return jnp.where(jnp.abs(diff) == dist, jnp.sign(diff) * g, zero)
    safe = jnp.where(dist == 0, 1, dist)
    if p == 2:
        return jnp.where(dist == 0, zero, diff * g / safe)
    if p < 2:
        r = jnp.sign(diff) * jnp.abs(diff) ** (p - 1) * g / safe ** (p - 1)
        return jnp.where((dist == 0) | ((diff == 0) & (p < 1)), zero, r)
    return jnp.where(dist == 0, zero, diff * jnp.abs(diff) ** (p - 2) * g / safe ** (p - 1))


def _euclidean(x1, x2):
    n1 = jnp.sum(x1 * x1, -1, keepdims=True)
    n2 = jnp.sum(x2 * x2, -1, keepdims=True)
    a = jnp.concatenate([-2 * x1, n1, jnp.ones_like(n1)], -1)
    b = jnp.concatenate([x2, jnp.ones_like(n2), n2], -1)
    r = jnp.matmul(a, jnp.swapaxes(b, -1, -2), precision=HIGHEST)
    return division.sqrt(jnp.maximum(r, 0))


@jitted
def _cdist(p, use_mm):
    def run(x1, x2):
        c = opmath(x1.dtype)
        a, b = x1.astype(c), x2.astype(c)
        if use_mm:
            return _euclidean(a, b).astype(x1.dtype)
        return _norm(a[..., :, None, :] - b[..., None, :, :], p).astype(x1.dtype)

    return run


def _check_p(p, name):
    if p < 0:
        raise RuntimeError(f"{name} only supports non-negative p values")


@register_functional(aten._cdist_forward.default)
def cdist_forward(x1, x2, p, compute_mode):
    _check_p(p, "cdist")
    if x1.shape[-1] != x2.shape[-1]:
        raise RuntimeError(f"X1 and X2 must have the same number of columns. X1: {x1.shape[-1]} X2: {x2.shape[-1]}")
    r1, r2 = x1.shape[-2], x2.shape[-2]
    use_mm = p == 2 and (compute_mode == 1 or (compute_mode in (None, 0) and (r1 > 25 or r2 > 25)))
    a, b = J(x1), J(x2)
    lead = jnp.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    a = jnp.broadcast_to(a, lead + a.shape[-2:])
    b = jnp.broadcast_to(b, lead + b.shape[-2:])
    return _cdist(float(p), use_mm)(a, b)


@jitted
def _cdist_grad(p):
    def run(g, x1, x2, dist):
        c = opmath(x1.dtype)
        diff = x1.astype(c)[..., :, None, :] - x2.astype(c)[..., None, :, :]
        r = _norm_grad(diff, dist.astype(c), g.astype(c), p)
        return jnp.sum(r, -2).astype(x1.dtype)

    return run


@register_functional(aten._cdist_backward.default)
def cdist_backward(grad, x1, x2, p, cdist):
    a, b = J(x1), J(x2)
    lead = tuple(cdist.shape[:-2])
    a = jnp.broadcast_to(a, lead + a.shape[-2:])
    b = jnp.broadcast_to(b, lead + b.shape[-2:])
    r = _cdist_grad(float(p))(J(grad), a, b, J(cdist))
    return _sum_to(r, tuple(x1.shape))


def _sum_to(r, shape):
    """Undo broadcasting: sum r over the dims it gained against `shape`."""
    r = jnp.sum(r, axis=tuple(range(r.ndim - len(shape))))
    return jnp.sum(r, axis=tuple(k for k, n in enumerate(shape) if n == 1 and r.shape[k] != 1), keepdims=True)


def _pairs(n):
    # numpy, not jnp: a cached factory first built inside a compiled program's trace would
    # otherwise keep that trace's tracers
    return np.triu_indices(n, 1)


@jitted
def _pdist(p, n):
    i, j = _pairs(n)

    def fwd(x):
        c = opmath(x.dtype)
        xc = x.astype(c)
        return _norm(xc[i] - xc[j], p).astype(x.dtype)

    def grad(g, x, dist):
        c = opmath(x.dtype)
        xc = x.astype(c)
        r = _norm_grad(xc[i] - xc[j], dist.astype(c), g.astype(c), p)
        return (jnp.zeros(x.shape, c).at[i].add(r).at[j].add(-r)).astype(x.dtype)

    return fwd, grad


def _check_pdist(self, p):
    _check_p(p, "pdist")
    if self.dim() != 2:
        raise RuntimeError(f"pdist only supports 2D tensors, got: {self.dim()}D")
    if not self.dtype.is_floating_point:
        raise RuntimeError("pdist only supports floating-point dtypes")


@register_functional(aten._pdist_forward.default)
def pdist_forward(self, p=2):
    _check_pdist(self, p)
    return _pdist(float(p), self.shape[0])[0](J(self))


@register_functional(aten._pdist_backward.default)
def pdist_backward(grad, self, p, pdist):
    return _pdist(float(p), self.shape[0])[1](J(grad), J(self), J(pdist))
