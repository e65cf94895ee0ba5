"""Fit the float32 polynomials of jaxdev/ops/kit/transcendentals.py and print them as that module holds them.

Each polynomial is fitted by weighted least squares on Chebyshev nodes against mpmath (40 digits),
its coefficients rounded to float32 one at a time from the constant term up, the rest refitted
after each rounding (so the rounding of one is absorbed by the ones above it). Prints each table
with its largest error on the interval (absolute, times the weight: the relative error the
function's result gets). Run: `.venv/bin/python scripts/fit_transcendentals.py` (about 10 s).
"""

from __future__ import annotations

import math

import mpmath as mp
import numpy as np

mp.mp.dps = 40


def _nodes(a: float, b: float, n: int = 3000) -> np.ndarray:
    k = np.arange(n)
    return (a + b) / 2 + (b - a) / 2 * np.cos(np.pi * (k + 0.5) / n)


def fit(target, a: float, b: float, degree: int, weight=None) -> tuple[list[float], float]:
    """(coefficients highest power first, as float32 values; largest weighted error)."""
    t = _nodes(a, b)
    y = np.array([float(target(mp.mpf(float(v)))) for v in t])
    w = np.ones_like(t) if weight is None else weight(t)
    fixed: list[float] = []  # from the constant term up, each rounded to float32
    for k in range(degree + 1):
        rest = y - sum(c * t**i for i, c in enumerate(fixed))
        powers = np.stack([t**i for i in range(k, degree + 1)], axis=1)
        c, *_ = np.linalg.lstsq(powers * w[:, None], rest * w, rcond=None)
        fixed.append(float(np.float32(c[0])))
    coefficients = fixed[::-1]
    error = float(np.max(np.abs((np.polyval(coefficients, t) - y) * w)))
    return coefficients, error


def _exp_q(r):  # exp(r) = 1 + r + r^2 q(r)
    return (mp.exp(r) - 1 - r) / r**2 if r != 0 else mp.mpf(0.5)


def _log_p(f):  # log(1 + f) = f - f^2/2 + f^3 p(f)
    return (mp.log1p(f) - f + f**2 / 2) / f**3 if f != 0 else mp.mpf(1) / 3


def _tanh_p(z):  # tanh(x) = x + x^3 p(x^2)
    x = mp.sqrt(z)
    return (mp.tanh(x) - x) / x**3 if z != 0 else -mp.mpf(1) / 3


def _erf_small(z):  # erf(x) = x + x p(x^2)
    x = mp.sqrt(z)
    return mp.erf(x) / x - 1 if z != 0 else 2 / mp.sqrt(mp.pi) - 1


ERF_ONE = float(np.float32(float(mp.erf(1))))  # erf(1 + s) = ERF_ONE + p(s)


def _erfc_h(t):  # erfc(x) = exp(-x^2 + h(1/x)) / x
    x = 1 / t
    return mp.log(x * mp.erfc(x)) + x**2


TABLES = {
    "_EXP_Q": (_exp_q, -math.log(2) / 2, math.log(2) / 2, 5, lambda t: t**2),
    "_LOG_P": (_log_p, math.sqrt(0.5) - 1, math.sqrt(2) - 1, 8, lambda t: t**2),
    "_TANH_P": (_tanh_p, 0.0, 0.625**2, 5, lambda t: t),
    "_ERF_SMALL": (_erf_small, 0.0, 0.84375**2, 6, None),
    "_ERF_MIDDLE": (lambda s: mp.erf(1 + s) - ERF_ONE, -0.15625, 0.25, 8, None),
    "_ERFC_NEAR": (_erfc_h, 1 / 2.857, 1 / 1.25, 8, None),
    "_ERFC_FAR": (_erfc_h, 1 / 10.1, 1 / 2.857, 8, None),
}


def main() -> None:
    print(f"_ERF_ONE = {ERF_ONE!r}")
    for name, (target, a, b, degree, weight) in TABLES.items():
        coefficients, error = fit(target, a, b, degree, weight)
        print(f"{name} = ({', '.join(repr(c) for c in coefficients)})  # error {error:.2g}")


if __name__ == "__main__":
    main()
