"""The reparameterized gradient of a Dirichlet draw, in terms of its Beta marginals: CPU's
dirichlet_grad_one (ATen's Distributions.h) evaluated on whole float64 arrays, each approximation where
CPU's conditions choose it (ops/gamma.py registers aten::_dirichlet_grad with it).

    -(d/dalpha cdf(x; alpha, beta)) / pdf(x; alpha, beta) / (1 - x),   beta = total - alpha
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
from jax.scipy.special import digamma

from jaxdev.ops.kit import transcendentals as tm

# CPU's fitted coefficients of the rational correction: [numerator, denominator][u power][a power][b power]
_RATIONAL = np.array(
    [
        [
            [[1.003668233, -0.01061107488, -0.0657888334, 0.01201642863],
             [0.6336835991, -0.3557432599, 0.05486251648, -0.001465281033],
             [-0.03276231906, 0.004474107445, 0.002429354597, -0.0001557569013]],
            [[0.221950385, -0.3187676331, 0.01799915743, 0.01074823814],
             [-0.2951249643, 0.06219954479, 0.01535556598, 0.001550077057],
             [0.02155310298, 0.004170831599, 0.001292462449, 6.976601077e-05]],
            [[-0.05980841433, 0.008441916499, 0.01085618172, 0.002319392565],
             [0.02911413504, 0.01400243777, -0.002721828457, 0.000751041181],
             [0.005900514878, -0.001936558688, -9.495446725e-06, 5.385558597e-05]],
        ],
        [
            [[1, -0.02924021934, -0.04438342661, 0.007285809825],
             [0.6357567472, -0.3473456711, 0.05454656494, -0.002407477521],
             [-0.03301322327, 0.004845219414, 0.00231480583, -0.0002307248149]],
            [[0.5925320577, -0.1757678135, 0.01505928619, 0.000564515273],
             [0.1014815858, -0.06589186703, 0.01272886114, -0.0007316646956],
             [-0.007258481865, 0.001096195486, 0.0003934994223, -4.12701925e-05]],
            [[0.06469649321, -0.0236701437, 0.002902096474, -5.896963079e-05],
             [0.001925008108, -0.002869809258, 0.0008000589141, -6.063713228e-05],
             [-0.0003477407336, 6.959756487e-05, 1.097287507e-05, -1.650964693e-06]],
        ],
    ]
)  # fmt: skip


def _zero_nan(v):
    return jnp.where(jnp.isnan(v), 0.0, v)


def alpha_small(x, alpha, beta):
    """d/dalpha for x near 0: a Taylor series."""
    factor = digamma(alpha) - digamma(alpha + beta) - tm.log(x)
    numer = jnp.ones_like(x)
    series = numer / alpha * (factor + 1 / alpha)
    for i in range(1, 11):
        numer = numer * ((i - beta) * x / i)
        denom = alpha + i
        series = series + numer / denom * (factor + 1 / denom)
    return _zero_nan(x * (1 - x) ** (-beta) * series)


def beta_small(x, alpha, beta):
    """d/dbeta for x near 0: a Taylor series."""
    factor = digamma(alpha + beta) - digamma(beta)
    numer, betas, dbetas, series = jnp.ones_like(x), jnp.ones_like(x), jnp.zeros_like(x), factor / alpha
    for i in range(1, 9):
        numer = numer * (-x / i)
        dbetas = dbetas * (beta - i) + betas
        betas = betas * (beta - i)
        series = series + numer / (alpha + i) * (dbetas + factor * betas)
    return _zero_nan(-((1 - x) ** (1 - beta)) * series)


def alpha_mid(x, alpha, beta):
    """d/dalpha for large alpha and beta: a Rice saddle-point expansion, with its own form near the mean."""
    total = alpha + beta
    mean = alpha / total
    std = jnp.sqrt(alpha * beta / (total + 1)) / total
    b2 = beta * beta
    poly = 47 * x * b2 * b2 + alpha * (
        (43 + 20 * (16 + 27 * beta) * x) * b2 * beta
        + alpha
        * (
            3 * (59 + 180 * beta - 90 * x) * b2
            + alpha * ((453 + 1620 * beta * (1 - x) - 455 * x) * beta + alpha * (8 * (1 - x) * (135 * beta - 11)))
        )
    )
    prefactor_num = (1 + 12 * alpha) * (1 + 12 * beta) / (total * total)
    prefactor_den = 12960 * alpha * alpha * alpha * beta * beta * (1 + 12 * total)
    near = prefactor_num / (1 - x) * poly / prefactor_den
    prefactor = -x / jnp.sqrt(2 * alpha * beta / total)
    stirling = (
        (1 + 1 / (12 * alpha) + 1 / (288 * alpha * alpha))
        * (1 + 1 / (12 * beta) + 1 / (288 * beta * beta))
        / (1 + 1 / (12 * total) + 1 / (288 * total * total))
    )
    axbx = alpha * (x - 1) + beta * x
    term1 = (2 * alpha * alpha * (x - 1) + alpha * beta * (x - 1) - x * b2) / (
        jnp.sqrt(2 * alpha / beta) * total**1.5 * axbx * axbx
    )
    term2 = 0.5 * tm.log(alpha / (total * x))
    term3 = jnp.sqrt(8 * alpha * beta / total) / axbx
    term4 = (beta * tm.log(beta / (total * (1 - x))) + alpha * tm.log(alpha / (total * x))) ** -1.5
    far = stirling * prefactor * (term1 + term2 * (term3 + jnp.where(x < mean, term4, -term4)))
    return jnp.where((mean - 0.1 * std <= x) & (x <= mean + 0.1 * std), near, far)


def rational(x, alpha, total):
    """A rational correction to an analytic approximation, between the asymptotic regions."""
    u = tm.log(x)
    a = tm.log(alpha) - u
    b = tm.log(total) - a
    sums = []
    for c in _RATIONAL:
        s = 0.0
        for i in range(3):
            for j in range(3):
                k = c[i, j]
                s = s + u**i * a**j * (k[0] + b * (k[1] + b * (k[2] + b * k[3])))
        sums.append(s)
    return sums[0] / sums[1] * (x * (digamma(total) - digamma(alpha)) / (total - alpha))


def dirichlet_grad(x, alpha, total):
    beta = total - alpha
    boundary = total * x * (1 - x)
    return jnp.where(
        (x <= 0.5) & (boundary < 2.5),
        alpha_small(x, alpha, beta),
        jnp.where(
            (x >= 0.5) & (boundary < 0.75),
            -beta_small(1 - x, beta, alpha),
            jnp.where((alpha > 6) & (beta > 6), alpha_mid(x, alpha, beta), rational(x, alpha, total)),
        ),
    )
