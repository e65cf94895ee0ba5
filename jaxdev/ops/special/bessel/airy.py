"""Spherical J0 and Airy Ai (Cephes' rational approximations, and the Maclaurin series near 0).

Their divisions are division.divide's: the platform's where it is IEEE's (CPU: the same program),
corrected where it is not (a TPU's is 2 ulps off, and far more for a divisor past 2^100, as Ai's
2 x^(1/4) exp(zeta) is for x past ~22). Ai's zeta = 2 |x|^1.5 / 3 is the sine's argument for x < -2.09:
2 ulps of it had Ai 549,380 ulps from CPU's next to its zero at -6.787 under tests/tpu_emulation.py;
spherical J0 was 6."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
from jax import lax

from jaxdev.ops.kit import transcendentals as tm
from jaxdev.ops.kit.cpu_numerics import (
    const,
    divide,
    divide_by,
    exp_wide,
    horner,
    opaque,
    sqrt_divisor,
)

# --- spherical J0 -----------------------------------------------------------------------------------


def spherical_j0(x):
    # The Taylor coefficients are divisions CPU does in the input's precision.
    c = [np.asarray(n, x.dtype) / np.asarray(d, x.dtype) for n, d in ((-1, 6), (1, 120), (-1, 5040), (1, 362880))]
    c += [np.asarray(n, x.dtype) / np.asarray(d, x.dtype) for n, d in ((-1, 39916800), (1, 6227020800))]
    xx = x * x
    acc = c[5]
    for k in range(4, -1, -1):
        acc = c[k] + xx * acc
    taylor = 1.0 + xx * acc
    r = jnp.where(jnp.abs(x) < 0.5, taylor, divide(tm.sin(x), x))
    return jnp.where(jnp.isinf(x), jnp.zeros((), x.dtype), r)


# --- Airy Ai ----------------------------------------------------------------------------------------

_AI_AN = (
    3.46538101525629032477e-01,
    1.20075952739645805542e01,
    7.62796053615234516538e01,
    1.68089224934630576269e02,
    1.59756391350164413639e02,
    7.05360906840444183113e01,
    1.40264691163389668864e01,
    9.99999999999999995305e-01,
)
_AI_AD = (
    5.67594532638770212846e-01,
    1.47562562584847203173e01,
    8.45138970141474626562e01,
    1.77318088145400459522e02,
    1.64234692871529701831e02,
    7.14778400825575695274e01,
    1.40959135607834029598e01,
    1.00000000000000000470e00,
)
_AI_AFN = (
    -1.31696323418331795333e-01,
    -6.26456544431912369773e-01,
    -6.93158036036933542233e-01,
    -2.79779981545119124951e-01,
    -4.91900132609500318020e-02,
    -4.06265923594885404393e-03,
    -1.59276496239262096340e-04,
    -2.77649108155232920844e-06,
    -1.67787698489114633780e-08,
)
_AI_AFD = (
    1.33560420706553243746e01,
    3.26825032795224613948e01,
    2.67367040941499554804e01,
    9.18707402907259625840e00,
    1.47529146771666414581e00,
    1.15687173795188044134e-01,
    4.40291641615211203805e-03,
    7.54720348287414296618e-05,
    4.51850092970580378464e-07,
)
_AI_AGN = (
    1.97339932091685679179e-02,
    3.91103029615688277255e-01,
    1.06579897599595591108e00,
    9.39169229816650230044e-01,
    3.51465656105547619242e-01,
    6.33888919628925490927e-02,
    5.85804113048388458567e-03,
    2.82851600836737019778e-04,
    6.98793669997260967291e-06,
    8.11789239554389293311e-08,
    3.41551784765923618484e-10,
)
_AI_AGD = (
    9.30892908077441974853e00,
    1.98352928718312140417e01,
    1.55646628932864612953e01,
    5.47686069422975497931e00,
    9.54293611618961883998e-01,
    8.64580826352392193095e-02,
    4.12656523824222607191e-03,
    1.01259085116509135510e-04,
    1.17166733214413521882e-06,
    4.91834570062930015649e-09,
)
_SQRT_1_PI = 5.64189583547756286948e-01
_AI_C1 = 0.355028053887817239260
_AI_C2 = 0.258819403792806798405


def _airy_negative(x):
    """x < -2.09: the oscillating asymptotic form."""
    zeta = opaque(divide_by(-2.0 * x * jnp.sqrt(-x), 3.0))
    z = divide(1.0, zeta)
    zz = z * z
    afn, afd = horner(_AI_AFN, zz, from_zero=True), horner(_AI_AFD, zz, from_zero=True)
    agn, agd = horner(_AI_AGN, zz, from_zero=True), horner(_AI_AGD, zz, from_zero=True)
    t = zeta + 0.25 * np.asarray(np.pi, x.dtype)
    f = 1.0 + divide(zz * afn, afd)
    g = divide(z * agn, agd)
    return divide(_SQRT_1_PI, sqrt_divisor(jnp.sqrt(-x))) * (tm.sin(t) * f - tm.cos(t) * g)


def _airy_positive(x):
    """x >= 2.09: the decaying asymptotic form."""
    zeta = opaque(divide_by(2.0 * x * jnp.sqrt(x), 3.0))
    w = divide(1.0, zeta)
    an, ad = horner(_AI_AN, w, from_zero=True), horner(_AI_AD, w, from_zero=True)
    return divide(_SQRT_1_PI * divide(an, ad), 2.0 * jnp.sqrt(jnp.sqrt(x)) * exp_wide(zeta))


def _airy_series(x):
    """|x| < 2.09 (and NaN): Ai = c1 f(x) - c2 g(x), the two Maclaurin series summed term by term
    until |term / f| <= eps. CPU tests after each pass, so every element takes at least one; an
    element that stops keeps its sums while the others go on."""
    eps = jnp.finfo(x.dtype).eps
    one = jnp.ones_like(x)
    z = x * x * x

    def going(state):
        return jnp.any(state[-1])

    def step(state):
        f, g, k, m, n, active = state
        k2 = k + 1.0
        m2 = opaque(divide(m * z, k2))
        n2 = n * z
        k2 = k2 + 1.0
        n2 = opaque(divide(n2, k2))
        m2 = divide(m2, k2)
        f2 = f + m2
        k2 = k2 + 1.0
        n2 = divide(n2, k2)
        g2 = g + n2
        keep = lambda new, old: jnp.where(active, new, old)
        f, g, k, m, n = keep(f2, f), keep(g2, g), keep(k2, k), keep(m2, m), keep(n2, n)
        return f, g, k, m, n, active & (jnp.abs(divide(m, f)) > eps)

    init = (one, x, one, one, x, jnp.ones(x.shape, bool))
    f, g, *_ = lax.while_loop(going, step, init)
    return _AI_C1 * f - _AI_C2 * g


def airy_ai(x):
    negative = x < -2.09
    positive = x >= 2.09
    series_x = jnp.where(negative | positive, jnp.zeros_like(x), x)  # others stop after one pass
    r = jnp.where(negative, _airy_negative(x), jnp.where(positive, _airy_positive(x), _airy_series(series_x)))
    r = jnp.where(x > 103.892, jnp.zeros_like(x), r)
    return jnp.where(jnp.isinf(x), const(jnp.nan, x), r)
