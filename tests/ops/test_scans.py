"""jaxdev/ops/scans.py: logcumsumexp and cummax/cummin against CPU PyTorch."""

from __future__ import annotations

import pytest
import torch
from closeness import three_way
from jaxdev_testing import JAX, assert_same, on_both, seeded_randn

pytestmark = pytest.mark.usefixtures("no_fallback")  # tests/conftest.py


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("op", [torch.cummax, torch.cummin])
def test_cummax_cummin_half_backward(op, dtype):
    # the gradient is zeros.scatter_add_(dim, indices, grad): jax's float16 accumulator was 7.1x
    # tolerance from the float64 gradient where CPU is 0.48x
    gen = torch.Generator().manual_seed(30)
    x = (torch.randn(5, 5, 5, generator=gen) * 3).to(dtype)
    x[:, 2:, 0] = x[:, :1, 0]  # ties, and long runs of one index
    for dim in (0, 1, 2):
        jax_err, cpu_err = three_way(lambda t, dim=dim: op(t, dim).values, [x], dtype, backward=True)
        assert jax_err <= cpu_err
        grad = torch.randn(5, 5, 5, generator=gen).to(dtype)
        _, idx = op(x, dim)
        assert_same(
            torch.zeros_like(x).to(JAX).scatter_add_(dim, idx.to(JAX), grad.to(JAX)),
            torch.zeros_like(x).scatter_add_(dim, idx, grad),
        )


# --- logcumsumexp: CPU's sequential log-add-exp in at::acc_type (double for float32, complex<double>) ---


@pytest.mark.parametrize("dtype", [torch.complex64, torch.complex128, torch.float32, torch.float64, torch.bfloat16])
@pytest.mark.parametrize("dim", [0, 1, 2])
def test_logcumsumexp(dtype, dim):
    x = seeded_randn(5, 5, 5, scale=3).to(dtype)
    if dtype.is_complex:
        x = x + 2j * seeded_randn(5, 5, 5, seed=1).to(dtype)  # the imaginary part accumulates past pi
    wide = dtype in (torch.float64, torch.complex128)  # libm vs XLA transcendentals: a few ulps
    on_both(lambda d: torch.logcumsumexp(x.to(d), dim), rtol=1e-14 if wide else 0)


def test_logcumsumexp_gradient_float32():
    x = seeded_randn(5, 5, 5, scale=3).requires_grad_()
    (cpu_grad,) = torch.autograd.grad(torch.logcumsumexp(x, 0).sum(), x)
    xj = x.detach().to("jax").requires_grad_()
    (jax_grad,) = torch.autograd.grad(torch.logcumsumexp(xj, 0).sum(), xj)
    assert_close = torch.testing.assert_close
    assert_close(jax_grad.cpu(), cpu_grad, rtol=1.3e-6, atol=1e-5)


@pytest.mark.parametrize("dtype", [torch.complex64, torch.complex128])
def test_logcumsumexp_complex_infinities_and_nan(dtype):
    inf, nan = float("inf"), float("nan")
    rows = [
        [complex(-inf, 1), complex(1, 2), complex(inf, 0.5), complex(inf, -1), complex(nan, 0), complex(1, 1)],
        [complex(inf, 0), complex(inf, 0), complex(inf, 1), complex(inf, 1), complex(-inf, 1), complex(3, 1)],
        [complex(-inf, 1), complex(-inf, 2), complex(0, 0), complex(1e-9, 1e-9), complex(-5, 3), complex(2, -3)],
    ]
    x = torch.tensor(rows, dtype=dtype)
    on_both(lambda d: torch.logcumsumexp(x.to(d), 1), rtol=1e-14 if dtype == torch.complex128 else 0)
