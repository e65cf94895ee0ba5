"""Gamma and Dirichlet sampling on jax (jaxdev/ops/gamma.py, beta_grads.py): draws follow the distribution
(Kolmogorov-Smirnov against scipy with fixed seeds, tight enough that a wrong shape parameter fails),
repeat per seed, and the reparameterized gradients are CPU's, on CPU's own draws and through autograd."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from jaxdev_testing import JAX
from scipy import stats

pytestmark = pytest.mark.usefixtures("no_fallback")

N = 20000
KS_LIMIT = 1.95 / N**0.5  # the 0.1% critical value: a right sampler passes it, seeds fixed


def _ks(sample, cdf):
    return stats.kstest(np.asarray(sample, dtype=np.float64), cdf).statistic


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("alpha", [0.1, 0.7, 1.0, 2.5, 30.0])
def test_standard_gamma_follows_gamma(dtype, alpha):
    torch.manual_seed(1)
    draws = torch._standard_gamma(torch.full((N,), alpha, dtype=dtype, device=JAX))
    assert draws.dtype == dtype and draws.device == JAX
    sample = draws.cpu().numpy()
    assert _ks(sample, stats.gamma(alpha).cdf) < KS_LIMIT
    assert _ks(sample, stats.gamma(alpha * 1.1).cdf) > KS_LIMIT  # the test can tell a wrong shape
    assert abs(sample.mean() - alpha) < 5 * (alpha / N) ** 0.5


def test_draws_repeat_per_seed_and_generator():
    alpha = torch.tensor([0.5, 1.0, 4.0] * 10, device=JAX)
    torch.manual_seed(7)
    first = torch._standard_gamma(alpha).cpu()
    torch.manual_seed(7)
    assert torch.equal(torch._standard_gamma(alpha).cpu(), first)
    torch.manual_seed(8)
    assert not torch.equal(torch._standard_gamma(alpha).cpu(), first)
    g = torch.Generator(device=JAX).manual_seed(3)
    a = torch._standard_gamma(alpha, generator=g).cpu()
    g.manual_seed(3)
    assert torch.equal(torch._standard_gamma(alpha, generator=g).cpu(), a)
    torch.manual_seed(7)
    d = torch._sample_dirichlet(alpha.view(10, 3)).cpu()
    torch.manual_seed(7)
    assert torch.equal(torch._sample_dirichlet(alpha.view(10, 3)).cpu(), d)


def test_edge_parameters_and_dtypes_as_cpu():
    alpha = torch.tensor([0.0, -1.0, float("nan"), 1e-30])
    assert torch.equal(torch._standard_gamma(alpha.to(JAX)).cpu(), torch._standard_gamma(alpha))  # the minimum
    assert torch.equal(
        torch._sample_dirichlet(torch.tensor([[1e-30, 1e-30]], device=JAX)).cpu(), torch.tensor([[0.5, 0.5]])
    )
    for op, name in ((torch._standard_gamma, "gamma_cpu"), (torch._sample_dirichlet, "dirichlet")):
        for dtype in (torch.int64, torch.float16, torch.bfloat16):
            with pytest.raises(NotImplementedError, match=f'"{name}" not implemented for'):
                op(torch.ones(3, dtype=dtype, device=JAX))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_sample_dirichlet_marginals_are_betas(dtype):
    concentration = torch.tensor([0.3, 1.0, 4.0], dtype=dtype)
    torch.manual_seed(2)
    draws = torch._sample_dirichlet(concentration.to(JAX).expand(N, 3).contiguous()).cpu()
    assert draws.dtype == dtype
    torch.testing.assert_close(draws.sum(-1), torch.ones(N, dtype=dtype), rtol=0, atol=1e-6)
    total = float(concentration.sum())
    for i, a in enumerate(concentration.tolist()):
        assert _ks(draws[:, i], stats.beta(a, total - a).cdf) < KS_LIMIT
        assert _ks(draws[:, i], stats.beta(a * 1.1, total - a).cdf) > KS_LIMIT


def _gamma_cases(dtype):
    g = torch.Generator().manual_seed(0)
    alpha = torch.cat([torch.rand(1000, generator=g) * 0.5 + 1e-3, torch.rand(1000, generator=g) * 10])
    alpha = torch.cat([alpha, torch.rand(1000, generator=g) * 100 + 8]).to(dtype)
    return alpha, torch._standard_gamma(alpha, generator=g)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_standard_gamma_grad_as_cpu(dtype):
    alpha, x = _gamma_cases(dtype)  # all three of CPU's regions: small x, large alpha, the rational fit
    expected = torch._standard_gamma_grad(alpha, x)
    actual = torch._standard_gamma_grad(alpha.to(JAX), x.to(JAX)).cpu()
    torch.testing.assert_close(actual, expected, rtol=1e-6 if dtype == torch.float32 else 1e-12, atol=0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_dirichlet_grad_as_cpu(dtype):
    g = torch.Generator().manual_seed(1)
    alpha = torch.cat([torch.rand(2000, 3, generator=g) * 0.5 + 0.01, torch.rand(2000, 3, generator=g) * 20 + 0.1])
    alpha = torch.cat([alpha, torch.rand(500, 3, generator=g) * 50 + 7]).to(dtype)  # alpha and beta > 6 too
    x = torch._sample_dirichlet(alpha, generator=g)
    total = alpha.sum(-1, keepdim=True).expand_as(alpha)
    expected = torch._dirichlet_grad(x, alpha, total)
    actual = torch._dirichlet_grad(x.to(JAX), alpha.to(JAX), total.to(JAX)).cpu()
    # float32: CPU evaluates its small-x series in float, jaxdev in float64 (3 of 13,500 differ past 1e-5)
    torch.testing.assert_close(actual, expected, rtol=1e-4 if dtype == torch.float32 else 1e-10, atol=0)


def test_rsample_gradients_through_autograd():
    """Gamma, Beta and Dirichlet rsample on jax: the gradient is CPU's formula at the jax draw."""
    torch.manual_seed(4)
    concentration = torch.tensor([0.5, 2.0, 9.0], dtype=torch.float64, device=JAX, requires_grad=True)
    draw = torch.distributions.Gamma(concentration, 1.0).rsample()
    draw.sum().backward()
    expected = torch._standard_gamma_grad(concentration.detach().cpu(), draw.detach().cpu())
    torch.testing.assert_close(concentration.grad.cpu(), expected, rtol=1e-12, atol=0)
    concentration.grad = None
    weights = torch.tensor([1.0, -2.0, 3.0], dtype=torch.float64, device=JAX)
    dirichlet = torch.distributions.Dirichlet(concentration).rsample()
    (dirichlet * weights).sum().backward()
    assert concentration.grad.device == JAX and torch.isfinite(concentration.grad).all()
    c, x, w = concentration.detach().cpu(), dirichlet.detach().cpu(), weights.cpu()
    grad = torch._dirichlet_grad(x, c, c.sum(-1, keepdim=True).expand_as(c))
    expected = grad * (w - (x * w).sum(-1, keepdim=True))  # torch.distributions' _Dirichlet.backward
    torch.testing.assert_close(concentration.grad.cpu(), expected, rtol=1e-10, atol=1e-12)
