"""jaxdev/ops/activation/: log_sigmoid, rrelu, softshrink, silu_backward, logit against CPU PyTorch."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from closeness import three_way
from jaxdev_testing import JAX, assert_same, check, like_cpu, on_both

from jaxdev.ops.kit import capabilities

pytestmark = pytest.mark.usefixtures("no_fallback")  # tests/conftest.py

aten = torch.ops.aten


# --- log_sigmoid_forward: CPU's buffer (exp(-|x|)), and CPU's formula's +0 at +inf ---------------------------------


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.float16])
def test_log_sigmoid_forward_buffer_like_cpu(dtype):
    x = torch.tensor([-3.0, -0.5, 0.0, -0.0, 0.5, 3.0, float("inf"), -float("inf"), float("nan"), 30.0, -30.0])
    x = torch.cat([x, torch.randn(50, generator=torch.Generator().manual_seed(6)) * 8]).to(dtype)
    tol = 1e-6 if dtype in (torch.float32, torch.float64) else 0.0
    like_cpu(lambda d: aten.log_sigmoid_forward(x.to(d)), rtol=tol, atol=tol)
    like_cpu(
        lambda d: aten.log_sigmoid_forward.output(
            x.to(d), output=torch.empty(0, dtype=dtype, device=d), buffer=torch.empty(3, dtype=dtype, device=d)
        ),
        rtol=tol,
        atol=tol,
    )


# --- found by PyTorch's own TestCommon on jax ---------------------------------------------------------


def test_softshrink_keeps_nan():
    x = torch.tensor([float("nan"), -0.3, 0.2, 2.0])
    check(torch.nn.functional.softshrink, x, grad=False)
    assert torch.nn.functional.softshrink(x.to(JAX)).cpu()[1].signbit()  # -0.3 shrinks to -0.0, as on CPU


# --- rrelu --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_rrelu_training_draws_slopes_in_range_and_backward_uses_them(dtype):
    x = torch.tensor([-1.0, 0.0, -0.0, 2.0, float("nan"), -float("inf"), -3.0, 5.0], dtype=dtype)
    xj = x.to(JAX).requires_grad_()
    noise = torch.empty(8, dtype=dtype, device=JAX)
    y = torch.ops.aten.rrelu_with_noise(xj, noise, 0.1, 0.3, True)
    y.sum().backward()
    n, out, g = noise.cpu(), y.detach().cpu(), xj.grad.cpu()
    neg = x <= 0
    assert bool(((n[neg] >= 0.1) & (n[neg] <= 0.3)).all()) and bool((n[~neg] == 1).all())
    assert len(set(n[neg].tolist())) > 1  # drawn per element
    torch.testing.assert_close(out, (x.float() * n.float()).to(dtype), equal_nan=True)
    assert out[1].item() == 0 and not out[1].signbit() and out[2].signbit()  # signed zeros times r
    torch.testing.assert_close(g, n)


def test_rrelu_is_reproducible_from_the_seed_and_in_place_works():
    x = torch.randn(50)
    torch.manual_seed(3)
    a = F.rrelu(x.to(JAX), training=True).cpu()
    torch.manual_seed(3)
    b = F.rrelu(x.to(JAX), training=True).cpu()
    assert torch.equal(a, b)
    z = x.to(JAX)
    torch.manual_seed(3)
    F.rrelu(z, training=True, inplace=True)
    assert torch.equal(z.cpu(), a)


def test_rrelu_eval_and_errors_like_cpu():
    x = torch.tensor([-1.0, 0.0, -0.0, 2.0, float("nan"), -float("inf")])
    check(lambda t: F.rrelu(t, 0.1, 0.3, training=False), x)
    on_both(lambda d: torch.ops.aten.rrelu_with_noise(x.to(d), torch.zeros(3, device=d), 0.1, 0.3, True), match="noise")
    on_both(lambda d: torch.ops.aten.rrelu_with_noise(x.to(d), torch.zeros(6, device=d).double(), 0.1, 0.3, True))
    on_both(lambda d: torch.ops.aten.rrelu_with_noise(x.to(d), torch.zeros(6, device=d), 0.5, 0.3, True))
    on_both(lambda d: torch.ops.aten.rrelu_with_noise(x.to(d).half(), torch.zeros(6, device=d).half(), 0.1, 0.3, True))
    on_both(lambda d: torch.ops.aten.rrelu_with_noise(x.to(d).half(), torch.zeros(6, device=d), 0.1, 0.3, False))


# --- silu_backward: CPU's kernel, not the composite ------------------------------------------------------


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32, torch.float64])
def test_silu_backward_like_cpu(dtype):
    gen = torch.Generator().manual_seed(40)
    x = torch.cat([torch.randn(200, generator=gen) * 4, torch.tensor([0.0, -0.0, 20.0, -20.0, 1e4, -1e4])]).to(dtype)
    g = torch.randn(x.shape, generator=gen).to(dtype)
    rtol = 0 if dtype in (torch.float16, torch.bfloat16) else 4 * torch.finfo(dtype).eps  # exp: not libm's
    assert_same(torch.ops.aten.silu_backward(g.to(JAX), x.to(JAX)), torch.ops.aten.silu_backward(g, x), rtol=rtol)
    if dtype in (torch.float16, torch.bfloat16):
        # the composite rounded five ops to float16: 1.4x tolerance from float64 where CPU is 0.26x
        jax_err, cpu_err = three_way(torch.nn.functional.silu, [x], dtype, backward=True)
        assert jax_err <= cpu_err


def test_silu_backward_derivative_as_cpu():
    # CPU's silu_backward has no derivative (silu's own double backward goes another way); now neither does jax's
    def direct(device):
        x = torch.randn(6, dtype=torch.float64, generator=torch.Generator().manual_seed(0)).to(device)
        g = torch.ones(6, dtype=torch.float64, device=device, requires_grad=True)
        return torch.autograd.grad(torch.ops.aten.silu_backward(g, x.requires_grad_()).sum(), g)

    on_both(direct, match="derivative for aten::silu_backward is not implemented")

    def double(device):
        x = torch.randn(6, dtype=torch.float64, generator=torch.Generator().manual_seed(0)).to(device).requires_grad_()
        (g,) = torch.autograd.grad(torch.nn.functional.silu(x).sum(), x, create_graph=True)
        return torch.autograd.grad(g.sum(), x)

    on_both(double, rtol=1e-12, atol=1e-12)


HALF = [torch.bfloat16, torch.float16]


# --- logit in half precision: 1 - x, the division and the log each round (Vectorized<half>) ---


@pytest.mark.parametrize("dtype", HALF)
@pytest.mark.parametrize("eps", [None, 0.1, 1e-6, 0.0, -0.1])
def test_logit_half_rounds_every_step(dtype, eps):
    x = torch.cat(
        [
            torch.linspace(-0.1, 1.1, 3001),
            torch.tensor([0.0, -0.0, 1.0, -0.5, 1.5, float("nan"), float("inf"), -float("inf")]),
        ]
    ).to(dtype)
    on_both(lambda d: torch.logit(x.to(d), eps))


@pytest.mark.tpu_fact("float32 division is not IEEE's on a TPU")
def test_logit_where_division_is_approximate(tpu_policy, tpu_division):
    """logit = log(x / (1 - x)): near x = 1/2 the log of ~1 turns the quotient's ulps into many of the
    result's (benchmarks/tpu_emulated_ulps.py: 32,772 ulps from CPU with the division 2 ulps off, as
    the chip's; 9,652 eps-relative here); the quotient and the gradient's are division.divide's, IEEE's."""
    x = torch.rand(20_000, generator=torch.Generator().manual_seed(7), requires_grad=True)
    xj = x.detach().to(JAX).requires_grad_()
    want, got = torch.logit(x), torch.logit(xj)
    want.sum().backward()
    got.sum().backward()
    for a, b in ((got, want), (xj.grad, x.grad)):
        a, b = a.detach().cpu(), b.detach()
        ulps = ((a.double() - b.double()).abs() / torch.finfo(torch.float32).eps / b.abs().double()).max()
        assert ulps <= 2, ulps


@pytest.mark.tpu_fact("float32 division is not IEEE's on a TPU")
@pytest.mark.parametrize("fn", [F.hardswish, F.hardsigmoid])
def test_hard_activations_where_division_is_approximate(fn, tpu_policy, tpu_division):
    """hardsigmoid's / 6 and hardswish's gradient x / 3 + 1/2 (which cancels near x = -3/2): with the
    division 2 ulps off, as the chip's, hardswish's gradient was 4,093 ulps from CPU's
    (benchmarks/tpu_emulated_ulps.py) and hardsigmoid 4; through division.divide, IEEE's quotients."""
    x = torch.rand(20_000, generator=torch.Generator().manual_seed(8)) * 10 - 5
    x = torch.cat([x, torch.linspace(-1.5 - 1e-3, -1.5 + 1e-3, 2001)]).requires_grad_()  # and near -3/2
    xj = x.detach().to(JAX).requires_grad_()
    want, got = fn(x), fn(xj)
    want.sum().backward()
    got.sum().backward()
    ulps = []
    for a, b in ((got, want), (xj.grad, x.grad)):
        a, b = a.detach().cpu().double(), b.detach().double()
        ulps.append(float(((a - b).abs() / (torch.finfo(torch.float32).eps * b.abs()).clamp_min(1e-45)).max()))
    assert max(ulps) <= 2, ulps  # (forward, gradient) in eps-relative units


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.float16])
def test_hardswish_and_hardsigmoid_are_cpus_bits(dtype):
    """CPU's orders: x * min(max(x + 3, 0), 6) / 6 as a true division (XLA made x * hardsigmoid(x) and
    multiplied by 1/6: 29,838 of 100k float32 values an ulp off, and 3e38 where CPU overflows to inf),
    the gradient's x / 3 likewise, hardsigmoid's gradient g * (1.0f / 6.0f) in every dtype."""
    if dtype == torch.float64 and capabilities.fact("float64_emulated"):
        pytest.skip("float64 is float32 pairs on this platform (a TPU): its divisions are not IEEE float64's")
    g = torch.Generator().manual_seed(0)
    x = (torch.rand(20000, generator=g, dtype=torch.float64) * 8 - 4).to(dtype)
    x = torch.cat([x, torch.tensor([3e38, -3e38, -3.0, 3.0, -0.0], dtype=torch.float64).to(dtype)])
    grad = torch.randn(len(x), generator=g, dtype=torch.float64).to(dtype)
    F = torch.nn.functional
    same = dict(rtol=0, atol=0, equal_nan=True)  # bit for bit (hardswish(-inf) is NaN on both)
    for fn in (F.hardswish, F.hardsigmoid):
        torch.testing.assert_close(fn(x.to(JAX)).cpu(), fn(x), **same)
    for op in (torch.ops.aten.hardswish_backward, torch.ops.aten.hardsigmoid_backward):
        torch.testing.assert_close(op(grad.to(JAX), x.to(JAX)).cpu(), op(grad, x), **same)
