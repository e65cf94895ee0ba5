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
