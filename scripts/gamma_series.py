"""Print the Taylor series of jaxdev/ops/kit/transcendentals_gamma.py: lgamma(center + t) around 1, 2 and
float32's nearest value to Gamma's minimum (1.4616...), as that module holds them (highest power
first, float32), each with the largest truncation error on its interval relative to lgamma there.

Around 1 and 2 the coefficients are exact (DLMF 5.7.3: lgamma(1 + t) = -gamma t + sum (-1)^k zeta(k)/k
t^k; lgamma(2 + t) = lgamma(1 + t) + log1p(t)); around the minimum they are psi^(k-1)(c)/k!.
Run: `.venv/bin/python scripts/gamma_series.py` (about 1 s).
"""

from __future__ import annotations

import mpmath as mp
import numpy as np

mp.mp.dps = 40


def coefficients(center, degree: int):
    """c_1..c_degree of lgamma(center + t) - lgamma(center) (c_0 returned apart)."""
    return mp.loggamma(center), [mp.polygamma(k - 1, center) / mp.factorial(k) for k in range(1, degree + 1)]


def worst(center, c0, cs, lo: float, hi: float) -> float:
    """Largest |truncation| / |lgamma| over [lo, hi] (center + t away from lgamma's zeros: absolute there)."""
    out = 0.0
    for t in np.linspace(lo, hi, 401):
        t = mp.mpf(float(t))
        exact = mp.loggamma(center + t)
        approx = c0 + sum(c * t ** (k + 1) for k, c in enumerate(cs))
        scale = max(abs(exact), abs(t) * 0.4)
        out = max(out, float(abs(exact - approx) / scale) if scale else 0.0)
    return out


def main() -> None:
    center = mp.mpf(float(np.float32(1.4616321449683623)))
    for name, c, degree, lo, hi in [
        ("_AROUND_ONE", mp.mpf(1), 13, -0.25, 0.25),
        ("_AROUND_MIN", center, 11, -0.22, 0.29),
        ("_AROUND_TWO", mp.mpf(2), 12, -0.25, 0.5),
    ]:
        c0, cs = coefficients(c, degree)
        print(
            f"# lgamma({float(c)!r} + t) = {float(c0)!r} + t p(t), t in [{lo}, {hi}]: truncation {worst(c, c0, cs, lo, hi):.2e}"
        )
        print(f"{name} = {tuple(float(np.float32(float(v))) for v in reversed(cs))}")


if __name__ == "__main__":
    main()
