"""Gamma and Dirichlet sampling and their reparameterized gradients: aten::_standard_gamma,
aten::_sample_dirichlet, aten::_standard_gamma_grad and aten::_dirichlet_grad (torch.distributions'
Gamma, Beta, Dirichlet, Chi2, StudentT sample and rsample through them).

Draws come from the jax device's RNG stream (torch.manual_seed, or a generator) through JAX's gamma
sampler: not CPU's numbers, but the same distribution, and the same numbers again for the same seed.
As on CPU, a draw is at least the dtype's smallest normal number (so an alpha of 0, a negative one or NaN
gives that), and a Dirichlet draw is made and normalized in float64, then rounded.

The gradients are CPU's approximations (ATen's Distributions.h, standard_gamma_grad_one and
dirichlet_grad_one: Taylor series for small x, Rice saddle-point expansions for large parameters,
fitted rational functions between), evaluated for every element in float64 and selected by the same
conditions, with float32's literals where CPU compares against them. float32 and float64 only, as CPU.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import torch
from jax.scipy.special import digamma

from jaxdev import dtypes, rng
from jaxdev.ops.kit import J, beta_grads, jitted
from jaxdev.ops.kit import transcendentals as tm
from jaxdev.ops.registry import aten, register_functional


def _f(v: float) -> float:
    """A float literal (0.8f) as C++ compares a double against it."""
    return float(np.float32(v))


def _check(t, name):
    if t.dtype not in (torch.float32, torch.float64):
        raise NotImplementedError(f"\"{name}\" not implemented for '{dtypes.scalar_name(t.dtype)}'")


# --- sampling ----------------------------------------------------------------------------------------


@jitted
def _gamma_program(jdt):
    tiny = jnp.finfo(jdt).tiny

    def run(key, alpha):
        draw = jax.random.gamma(key, alpha.astype(jdt), dtype=jdt)
        return jnp.where(draw >= tiny, draw, tiny)  # NaN and 0 as CPU's max(min, draw): the minimum

    return run


@register_functional(aten._standard_gamma.default, inplace=False)
def standard_gamma(self, generator=None):
    _check(self, "gamma_cpu")
    return _gamma_program(dtypes.to_jax_dtype(self.dtype))(rng.next_key(generator), J(self))


@jitted
def _dirichlet_program(jdt):
    def run(key, alpha):
        draws = _gamma_program(jnp.dtype(jnp.float64))(key, alpha.astype(jnp.float64))
        if draws.ndim == 0:
            return (draws / draws).astype(jdt)
        return (draws / jnp.sum(draws, axis=-1, keepdims=True)).astype(jdt)

    return run


@register_functional(aten._sample_dirichlet.default, inplace=False)
def sample_dirichlet(self, generator=None):
    _check(self, "dirichlet")
    return _dirichlet_program(dtypes.to_jax_dtype(self.dtype))(rng.next_key(generator), J(self))


# --- reparameterized gradients ------------------------------------------------------------------------

_RATIONAL_UV = np.array(
    [
        [0.16009398, -0.094634809, 0.025146376, -0.0030648343, 1, 0.32668115, 0.10406089, 0.0014179084],
        [0.53487893, 0.1298071, 0.065735949, -0.0015649758, 0.16639465, 0.020070113, -0.0035938915, -0.00058392623],
        [0.040121004, -0.0065914022, -0.0026286047, -0.0013441777, 0.017050642, -0.0021309326, 0.00085092367,
         -1.5247877e-07],
    ]
)  # fmt: skip


def gamma_grad(alpha, x):
    """-(d/dalpha cdf(x; alpha)) / pdf(x; alpha) for a standard Gamma(alpha) draw x (float64 arrays)."""
    # a Taylor series for small x
    numer, denom = jnp.ones_like(x), alpha
    series1, series2 = numer / denom, numer / (denom * denom)
    for i in range(1, 6):
        numer = numer * (-x / i)
        denom = denom + 1
        series1 = series1 + numer / denom
        series2 = series2 + numer / (denom * denom)
    pow_x_alpha = x**alpha
    pdf = x ** (alpha - 1) * tm.exp(-x)
    cdf = pow_x_alpha * series1
    cdf_alpha = (tm.log(x) - digamma(alpha)) * cdf - pow_x_alpha * series2
    small = -cdf_alpha / pdf
    small = jnp.where(jnp.isnan(small), 0.0, small)
    # a Rice saddle-point expansion for large alpha, with its own form near x = alpha
    near = (
        (1 + 24 * alpha * (1 + 12 * alpha))
        * (1440 * alpha * alpha + 6 * x * (53 - 120 * x) - 65 * x * x / alpha + alpha * (107 + 3600 * x))
        / (1244160 * alpha**4)
    )
    root = jnp.sqrt(8 * alpha)
    term2 = root / (alpha - x)
    term3 = (x - alpha - alpha * tm.log(x / alpha)) ** -1.5
    term23 = jnp.where(x < alpha, term2 - term3, term2 + term3)
    term1 = tm.log(x / alpha) * term23 - jnp.sqrt(2 / alpha) * (alpha + x) / ((alpha - x) * (alpha - x))
    stirling = 1 + 1 / (12 * alpha) * (1 + 1 / (24 * alpha))
    far = -stirling * x * term1 / root
    large = jnp.where((_f(0.9) * alpha <= x) & (x <= _f(1.1) * alpha), near, far)
    # a bivariate rational approximation in between
    u, v = tm.log(x / alpha), tm.log(alpha)
    c = [_RATIONAL_UV[0, i] + u * (_RATIONAL_UV[1, i] + u * _RATIONAL_UV[2, i]) for i in range(8)]
    p = c[0] + v * (c[1] + v * (c[2] + v * c[3]))
    q = c[4] + v * (c[5] + v * (c[6] + v * c[7]))
    middle = tm.exp(p / q)
    return jnp.where(x < _f(0.8), small, jnp.where(alpha > _f(8.0), large, middle))


@jitted
def _gamma_grad_program(jdt):
    def run(alpha, x):
        alpha, x = jnp.broadcast_arrays(alpha.astype(jnp.float64), x.astype(jnp.float64))
        return gamma_grad(alpha, x).astype(jdt)

    return run


@register_functional(aten._standard_gamma_grad.default, inplace=False)
def standard_gamma_grad(self, output):
    _check(self, "_standard_gamma_grad_cpu")
    return _gamma_grad_program(dtypes.to_jax_dtype(self.dtype))(J(self), J(output))


@jitted
def _dirichlet_grad_program(jdt):
    def run(x, alpha, total):
        alpha, total = (jnp.broadcast_to(t, x.shape) for t in (alpha, total))
        return beta_grads.dirichlet_grad(*(t.astype(jnp.float64) for t in (x, alpha, total))).astype(jdt)

    return run


@register_functional(aten._dirichlet_grad.default, inplace=False)
def dirichlet_grad(x, alpha, total):
    _check(x, "_dirichlet_grad_cpu")
    return _dirichlet_grad_program(dtypes.to_jax_dtype(x.dtype))(J(x), J(alpha), J(total))
