"""jaxdev/ops/pointwise.py: unary elementwise ops against CPU."""

from __future__ import annotations

import pytest
import torch
from jaxdev_testing import JAX, assert_same

INF, NAN = float("inf"), float("nan")


@pytest.mark.parametrize("dtype", [torch.complex64, torch.complex128])
def test_complex_abs_follows_hypot_at_infinities(dtype):
    """|inf + nan j| is inf on CPU (std::abs, C99's hypot); XLA's complex abs gave NaN (found by OpInfo's
    reference inputs). Large parts stay finite without overflow, tiny ones without underflow."""
    values = [complex(INF, NAN), complex(NAN, -INF), complex(-INF, 0), complex(NAN, 1), complex(3e38, 3e38)]
    values += [complex(1e-30, 1e-30), complex(1e38, 0), complex(-2, 0)]
    z = torch.tensor(values, dtype=dtype)
    assert_same(z.to(JAX).abs(), z.abs())
    assert_same(torch.abs(z.to(JAX), out=torch.empty(0, dtype=dtype.to_real(), device=JAX)), z.abs())


_EXTREMES = [0.0, -0.0, 0.5, -2.0, 1.0, 1e-30, -1e30, INF, -INF, NAN]
_BRANCHED = ["sqrt", "asin", "acos", "acosh", "atan", "asinh", "atanh", "log", "exp"]


def _same_with_signs(got, want):
    """Values equal (NaN where NaN), and the signs of zero and infinite parts equal (a NaN's sign is
    free, as C leaves it)."""
    close = torch.isclose(got, want, equal_nan=True)
    for part in ("real", "imag"):
        g, w = getattr(got, part), getattr(want, part)
        close &= w.isnan() | (torch.signbit(g) == torch.signbit(w))
    return close


@pytest.mark.parametrize("dtype", [torch.complex64, torch.complex128])
@pytest.mark.parametrize("name", _BRANCHED)
def test_complex_branch_cuts_and_special_values_as_cpu(name, dtype):
    """The sign of a zero part picks the side of a branch cut (sqrt(-2 - 0j) = -1.414j on CPU; jax gave
    +1.414j), and infinities and NaNs get CPU's C-library answers (jaxdev/ops/complex_c99.py)."""
    z = torch.tensor([complex(a, b) for a in _EXTREMES for b in _EXTREMES], dtype=dtype)
    want = getattr(torch, name)(z)
    got = getattr(torch, name)(z.to(JAX)).cpu()
    bad = ~_same_with_signs(got, want)
    assert not bad.any(), [(z[i].item(), want[i].item(), got[i].item()) for i in bad.nonzero().flatten()[:4]]


@pytest.mark.parametrize("name", _BRANCHED)
def test_complex_functions_of_finite_values_as_cpu(name):
    g = torch.Generator().manual_seed(0)
    scale = torch.exp(torch.empty(4000, dtype=torch.float64).uniform_(-6, 6, generator=g))
    z = (
        torch.complex(
            torch.randn(4000, dtype=torch.float64, generator=g), torch.randn(4000, dtype=torch.float64, generator=g)
        )
        * scale
    )
    for dtype, rtol in ((torch.complex64, 2e-6), (torch.complex128, 1e-12)):
        x = z.to(dtype)
        # atol: below the smallest normal number XLA's CPU backend flushes to zero where CPU keeps
        # subnormals (exp of large negative parts); a known difference, not a wrong value
        atol = torch.finfo(dtype.to_real()).tiny
        got, want = getattr(torch, name)(x.to(JAX)).cpu(), getattr(torch, name)(x)
        # part by part: a complex difference of equal infinite parts is NaN
        torch.testing.assert_close(torch.view_as_real(got), torch.view_as_real(want), rtol=rtol, atol=atol)
