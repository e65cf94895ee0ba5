"""J0, J1, Y0, Y1: Cephes' rational approximations below 5 (25 for Y) and the asymptotic forms above."""

from __future__ import annotations

import jax.numpy as jnp

from jaxdev.ops.kit import transcendentals as tm
from jaxdev.ops.kit.cpu_numerics import (
    const,
    divide,
    horner,
    log_wide,
    sqrt_divisor,
)

# Every division below is division.divide's: the platform's where it is IEEE's (CPU: the same program),
# corrected where it is not (a TPU's is 2 ulps off, and next to a zero of J or Y those ulps become many
# of the result's: J1 was 1,010 ulps from CPU's at x = 32.19 under tests/tpu_emulation.py, Y1 18,138).

# --- J0, J1, Y0, Y1 ---------------------------------------------------------------------------------

# Asymptotic P and Q of order 0 (J0 and Y0 share them) and order 1, in (5/x)^2.
_PP0 = (
    7.96936729297347051624e-04,
    8.28352392107440799803e-02,
    1.23953371646414299388e00,
    5.44725003058768775090e00,
    8.74716500199817011941e00,
    5.30324038235394892183e00,
    9.99999999999999997821e-01,
)
_PQ0 = (
    9.24408810558863637013e-04,
    8.56288474354474431428e-02,
    1.25352743901058953537e00,
    5.47097740330417105182e00,
    8.76190883237069594232e00,
    5.30605288235394617618e00,
    1.00000000000000000218e00,
)
_QP0 = (
    -1.13663838898469149931e-02,
    -1.28252718670509318512e00,
    -1.95539544257735972385e01,
    -9.32060152123768231369e01,
    -1.77681167980488050595e02,
    -1.47077505154951170175e02,
    -5.14105326766599330220e01,
    -6.05014350600728481186e00,
)
_QQ0 = (
    6.43178256118178023184e01,
    8.56430025976980587198e02,
    3.88240183605401609683e03,
    7.24046774195652478189e03,
    5.93072701187316984827e03,
    2.06209331660327847417e03,
    2.42005740240291393179e02,
)
_PP1 = (
    7.62125616208173112003e-04,
    7.31397056940917570436e-02,
    1.12719608129684925192e00,
    5.11207951146807644818e00,
    8.42404590141772420927e00,
    5.21451598682361504063e00,
    1.00000000000000000254e00,
)
_PQ1 = (
    5.71323128072548699714e-04,
    6.88455908754495404082e-02,
    1.10514232634061696926e00,
    5.07386386128601488557e00,
    8.39985554327604159757e00,
    5.20982848682361821619e00,
    9.99999999999999997461e-01,
)
_QP1 = (
    5.10862594750176621635e-02,
    4.98213872951233449420e00,
    7.58238284132545283818e01,
    3.66779609360150777800e02,
    7.10856304998926107277e02,
    5.97489612400613639965e02,
    2.11688757100572135698e02,
    2.52070205858023719784e01,
)
_QQ1 = (
    7.42373277035675149943e01,
    1.05644886038262816351e03,
    4.98641058337653607651e03,
    9.56231892404756170795e03,
    7.99704160447350683650e03,
    2.82619278517639096600e03,
    3.36093607810698293419e02,
)
# Rational approximations on [0, 5].
_RP0 = (-4.79443220978201773821e09, 1.95617491946556577543e12, -2.49248344360967716204e14, 9.70862251047306323952e15)
_RQ0 = (
    4.99563147152651017219e02,
    1.73785401676374683123e05,
    4.84409658339962045305e07,
    1.11855537045356834862e10,
    2.11277520115489217587e12,
    3.10518229857422583814e14,
    3.18121955943204943306e16,
    1.71086294081043136091e18,
)
_RP1 = (-8.99971225705559398224e08, 4.52228297998194034323e11, -7.27494245221818276015e13, 3.68295732863852883286e15)
_RQ1 = (
    6.20836478118054335476e02,
    2.56987256757748830383e05,
    8.35146791431949253037e07,
    2.21511595479792499675e10,
    4.74914122079991414898e12,
    7.84369607876235854894e14,
    8.95222336184627338078e16,
    5.32278620332680085395e18,
)
_YP0 = (
    1.55924367855235737965e04,
    -1.46639295903971606143e07,
    5.43526477051876500413e09,
    -9.82136065717911466409e11,
    8.75906394395366999549e13,
    -3.46628303384729719441e15,
    4.42733268572569800351e16,
    -1.84950800436986690637e16,
)
_YQ0 = (
    1.04128353664259848412e03,
    6.26107330137134956842e05,
    2.68919633393814121987e08,
    8.64002487103935000337e10,
    2.02979612750105546709e13,
    3.17157752842975028269e15,
    2.50596256172653059228e17,
)
_YP1 = (
    1.26320474790178026440e09,
    -6.47355876379160291031e11,
    1.14509511541823727583e14,
    -8.12770255501325109621e15,
    2.02439475713594898196e17,
    -7.78877196265950026825e17,
)
_YQ1 = (
    5.94301592346128195359e02,
    2.35564092943068577943e05,
    7.34811944459721705660e07,
    1.87601316108706159478e10,
    3.88231277496238566008e12,
    6.20557727146953693363e14,
    6.87141087355300489866e16,
    3.97270608116560655612e18,
)
_PIO4 = 0.785398163397448309615660845819875721
_3PIO4 = 2.356194490192344928846982537459627163
_SQ2OPI = 0.797884560802865355879892119868763737
_TWOOPI = 0.636619772367581343075535053490057448


def _asymptotic(x, order: int, bessel_j: bool):
    """The x > 5 form: sqrt(2/(pi x)) (P cos(x - phase) - 5/x Q sin(x - phase)) for J, sin/cos
    swapped and the sign of the Q term flipped for Y."""
    five_over_x = divide(5.0, x)
    if order == 0:
        w = divide(25.0, x * x)
        pp, pq, qp, qq, phase = _PP0, _PQ0, _QP0, _QQ0, _PIO4
    else:
        w = five_over_x * five_over_x
        pp, pq, qp, qq, phase = _PP1, _PQ1, _QP1, _QQ1, _3PIO4
    p = divide(horner(pp, w, from_zero=True), horner(pq, w, from_zero=True))
    q = five_over_x * divide(horner(qp, w, from_zero=True), horner(qq, w, from_zero=True))
    shifted = x - phase
    if bessel_j:
        combined = p * tm.cos(shifted) - q * tm.sin(shifted)
    else:
        combined = p * tm.sin(shifted) + q * tm.cos(shifted)
    return divide(combined * _SQ2OPI, sqrt_divisor(x))


def _j0_nonnegative(x):
    xx = x * x
    tiny = 1.0 - xx * 0.25  # a power of two's quotient, exact: a product's
    small = divide(
        (xx - 5.78318596294678452118e00) * (xx - 3.04712623436620863991e01) * horner(_RP0, xx, from_zero=True),
        horner(_RQ0, xx, from_zero=True),
    )
    large = _asymptotic(x, 0, True)
    return jnp.where(x <= 5.0, jnp.where(x < 0.00001, tiny, small), large)


def bessel_j0(x):
    return _j0_nonnegative(jnp.abs(x))


def _j1_nonnegative(x):
    xx = x * x
    small = (
        divide(horner(_RP1, xx, from_zero=True), horner(_RQ1, xx, from_zero=True))
        * x
        * (xx - 1.46819706421238932572e01)
        * (xx - 4.92184563216946036703e01)
    )
    return jnp.where(x <= 5.0, small, _asymptotic(x, 1, True))


def bessel_j1(x):
    # CPU takes -J1(-x) for x < 0 only: -0 goes through as it is, and J1(-0) is -0.
    negative = x < 0
    r = _j1_nonnegative(jnp.where(negative, -x, x))
    return jnp.where(negative, -r, r)


def bessel_y0(x):
    xx = x * x
    small = divide(horner(_YP0, xx, from_zero=True), horner(_YQ0, xx, from_zero=True)) + _TWOOPI * log_wide(
        x
    ) * _j0_nonnegative(x)
    small = jnp.where(x < 0, const(jnp.nan, x), small)
    small = jnp.where(x == 0, const(-jnp.inf, x), small)
    return jnp.where(x <= 5.0, small, _asymptotic(x, 0, False))


def bessel_y1(x):
    xx = x * x
    small = x * divide(horner(_YP1, xx, from_zero=True), horner(_YQ1, xx, from_zero=True)) + _TWOOPI * (
        _j1_nonnegative(x) * log_wide(x) - divide(1.0, x)
    )
    small = jnp.where(x < 0, const(jnp.nan, x), small)
    small = jnp.where(x == 0, const(-jnp.inf, x), small)
    return jnp.where(x <= 5.0, small, _asymptotic(x, 1, False))
