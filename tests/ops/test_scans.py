"""jaxdev/ops/scans.py: logcumsumexp and cummax/cummin against CPU PyTorch."""

from __future__ import annotations

import jax
import numpy as np
import pytest
import torch
import tpu_functions as tracer
from closeness import three_way
from jaxdev_testing import JAX, assert_same, on_both, seeded_randn

from jaxdev.ops.kit import capabilities
from jaxdev.ops.kit import transcendentals as tm

inf, nan = float("inf"), float("nan")

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
    if dtype in (torch.float32, torch.complex64) and capabilities.fact("float64_emulated"):
        pytest.skip(_CPU_RUNNING_VALUE + " (within an ulp of CPU's, not its bits: the tpu_fact tests below)")
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
    rtol = 1e-14 if dtype == torch.complex128 else 0
    if capabilities.fact("float64_emulated"):
        rtol = 2e-6  # _CPU_RUNNING_VALUE: complex64's finite values an ulp or so from CPU's (stand-in: 0.6898 + 4.77e-4i ...)
    on_both(lambda d: torch.logcumsumexp(x.to(d), 1), rtol=rtol)


# --- logcumsumexp where jaxdev's functions are chosen (a TPU) ---------------------------------------


def _ulps(got, want):
    """|got - want| in float32 ulps of want (NaN equal to NaN, infinities equal to themselves)."""
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float32)
    same = (got == want) | (np.isnan(got) & np.isnan(want))
    with np.errstate(invalid="ignore"):
        return np.where(same, 0, np.abs(got - want) / np.spacing(np.abs(want)).astype(np.float64))


_CPU_RUNNING_VALUE = "float64 is emulated: float32 logcumsumexp's running value stays float32 on a TPU"


@pytest.mark.tpu_fact(_CPU_RUNNING_VALUE)
def test_float32_logcumsumexp_takes_jaxdevs_functions(tpu_policy, tpu_division, tpu_functions):
    """On the chip float32 logcumsumexp was 1,259 ulps from CPU's (rows of 100 in [-30, 30]):
    jax.lax.cumlogsumexp's log-add-exp is XLA's exp and log1p. With XLA's functions 1,000 ulps off it
    was 498 ulps here where |result| > 1; jaxdev's, in a scan of float pairs, keep it within an ulp but where the result
    cancels toward 0 (log(e^a + e^b) ~ 0: an ulp of exp or log1p is many of the result's)."""
    rng = np.random.default_rng(0)
    x = rng.uniform(-30, 30, (200, 100)).astype(np.float32)
    got = torch.logcumsumexp(torch.from_numpy(x).to(JAX), 1).cpu().numpy()
    want = torch.logcumsumexp(torch.from_numpy(x), 1).numpy()
    far = np.abs(want) > 1
    assert _ulps(got, want)[far].max() <= 1 and _ulps(got, want).max() <= 8
    edges = torch.tensor([[0, -inf, 1, inf, 2, nan, 3], [-inf, -inf, -inf, 1, inf, inf, -inf], [1, 2, nan, 3, 4, 5, 6]])
    got = torch.logcumsumexp(edges.to(JAX), 1).cpu().numpy()
    assert _ulps(got, torch.logcumsumexp(edges, 1).numpy()).max() <= 1


def test_logcumsumexp_takes_xlas_scan_where_its_functions_are_chosen():
    """Where XLA's functions are chosen (JAXDEV_MATH auto on its CPU backend: float32's float64 running
    value, a half's float32 one) the kernel is jax.lax.cumlogsumexp, as before; where jaxdev's are
    (JAXDEV_MATH=own, a TPU) a float32 running value takes the scan of float pairs."""
    from jaxdev.ops import scans

    x = np.zeros((3, 4), np.float32)

    def primitives(acc):
        body = scans._logcumsumexp.__wrapped__(1, np.dtype(acc))  # the factory: traced anew
        return {e.primitive.name for e in jax.make_jaxpr(body)(x).eqns}

    with tm.forced("fast"):
        assert "cumlogsumexp" in primitives(np.float32) and "cumlogsumexp" in primitives(np.float64)
    with tm.forced("own"):
        assert "cumlogsumexp" not in primitives(np.float32) and "cumlogsumexp" in primitives(np.float64)


@pytest.mark.tpu_fact("XLA's TPU hypot is its division and sqrt (complex64 logcumsumexp 5.8e-5 off on the chip)")
def test_complex64_logcumsumexp_forms_no_modulus(tpu_policy, tpu_division):
    """complex64 logcumsumexp (test_program_facts' inputs, a TPU's complex64 running value) was 5.8e-5
    relative off CPU on the chip, every function in it jaxdev's but XLA's atan2 (since replaced) and
    hypot, a division and a sqrt of the platform's. log|1 + z| is now transcendentals_complex's log's
    real part: with XLA's sqrt 1,000 ulps off it stays within complex64's tolerance (2.1e-4 relative
    before, through hypot)."""
    g = torch.Generator().manual_seed(0)
    torch.randn(3, 3, generator=g)
    t = torch.randn(3, 3, dtype=torch.complex64, generator=g) / 3
    with tracer.functions(("sqrt",)):
        got = torch.logcumsumexp(t.to(JAX), 0).cpu()
    torch.testing.assert_close(got, torch.logcumsumexp(t, 0))
