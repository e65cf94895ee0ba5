"""complex64 pow, log2, log10 and log1p where jaxdev's own functions are chosen (a TPU): the C library's cpowf,
exp(exponent * log(base)), on the own complex exp and log (transcendentals_complex.pow)."""

from __future__ import annotations

import pytest
import torch
from jaxdev_testing import JAX


@pytest.mark.tpu_fact("XLA's complex64 pow on a TPU reaches its own exp and log")
def test_complex64_pow_is_cpus_where_the_own_functions_are_chosen(tpu_policy, tpu_division, tpu_functions):
    """The chip's complex64 pow was 2.2e-4 relative from CPU's (166x OpInfo's tolerance); under the
    emulation of its functions 1.2e-4 with jnp.power, now within 5e-6, tensor and number exponents."""
    g = torch.Generator().manual_seed(0)
    a = torch.complex(torch.randn(5000, generator=g) * 3, torch.randn(5000, generator=g) * 3)
    b = torch.complex(torch.randn(5000, generator=g) * 2, torch.randn(5000, generator=g) * 2)
    for want, got in (
        (torch.pow(a, b), torch.pow(a.to(JAX), b.to(JAX)).cpu()),
        (torch.pow(a, 2.5 + 1j), torch.pow(a.to(JAX), 2.5 + 1j).cpu()),
    ):
        assert ((got - want).abs() / want.abs()).max() < 5e-6


@pytest.mark.tpu_fact("XLA's complex64 log2, log10 and log1p on a TPU reach its own log")
def test_complex64_log2_log10_log1p_where_the_own_functions_are_chosen(tpu_policy, tpu_division, tpu_functions):
    """c10's log2 and log10 (log(z) / log(base)) and log1p on the own complex log: 1.2e-4 to 2.4e-4
    relative with XLA's under the emulation of its functions, now within 1e-6; special values as CPU."""
    g = torch.Generator().manual_seed(0)
    r = torch.cat([torch.randn(3000, generator=g) * 3, 10 ** (torch.rand(3000, generator=g) * 60 - 30)])
    z = torch.polar(r.abs(), torch.rand(6000, generator=g) * 6.283)
    z = torch.cat([z, torch.tensor([0j, 1 + 0j, -1 + 0j, 1e-30 + 0j, -0.5 + 1e-20j])]).to(torch.complex64)
    for fn in (torch.log2, torch.log10, torch.log1p):
        want, got = fn(z), fn(z.to(JAX)).cpu()
        finite = (want.abs() > 0) & want.isfinite()
        assert ((got - want).abs()[finite] / want.abs()[finite]).max() < 1e-6
        torch.testing.assert_close(got[~finite], want[~finite], rtol=0, atol=0)


@pytest.mark.tpu_fact("XLA's complex64 tanh and tan on a TPU reach its own exp")
def test_complex64_tanh_and_tan_where_the_own_functions_are_chosen(tpu_policy, tpu_division, tpu_functions):
    """glibc's ctanhf on the own sinh, cosh, sin and cos (tan = -i tanh(iz)): 1.2e-4 relative with XLA's
    under the emulation of its functions, now within 1.3e-6 (OpInfo's complex64 rtol), |x| past 44
    included; Annex G's tanh(+-inf + iy) = +-1 + i0."""
    g = torch.Generator().manual_seed(0)
    re = torch.cat([torch.randn(3000, generator=g) * 3, torch.randn(3000, generator=g) * 60])
    im = torch.cat([torch.randn(3000, generator=g) * 3, torch.randn(3000, generator=g) * 100])
    z = torch.complex(re, im).to(torch.complex64)
    for fn in (torch.tanh, torch.tan):
        want, got = fn(z), fn(z.to(JAX)).cpu()
        kept = want.abs() > 0
        assert ((got - want).abs()[kept] / want.abs()[kept]).max() < 1.3e-6
    edges = torch.tensor([complex(float("inf"), 1), complex(float("-inf"), -2), complex(float("nan"), 0)])
    torch.testing.assert_close(
        torch.tanh(edges.to(torch.complex64).to(JAX)).cpu(), torch.tanh(edges.to(torch.complex64)), equal_nan=True
    )


@pytest.mark.tpu_fact("XLA's complex64 asinh on a TPU reaches its own log")
def test_complex64_asinh_and_asin_where_the_own_functions_are_chosen(tpu_policy, tpu_division, tpu_functions):
    """log(z + sqrt(z^2 + 1)) on the own complex log (log1p near 0, z^2 + 1 without cancellation next
    to +-i, log 2z far out): 1.2e-4 relative with XLA's under the emulation of its functions, now
    within 1.3e-6 (asin = -i asinh(iz))."""
    g = torch.Generator().manual_seed(0)
    r = torch.cat([torch.randn(3000, generator=g) * 3, 10 ** (torch.rand(3000, generator=g) * 60 - 30)])
    z = torch.polar(r.abs(), torch.rand(6000, generator=g) * 6.283)
    near_i = torch.complex(
        (torch.rand(2000, generator=g) - 0.5) * 1e-3, 1 + (torch.rand(2000, generator=g) - 0.5) * 1e-3
    )
    z = torch.cat([z, near_i, -near_i]).to(torch.complex64)
    for fn in (torch.asinh, torch.asin):
        want, got = fn(z), fn(z.to(JAX)).cpu()
        kept = want.abs() > 0
        assert ((got - want).abs()[kept] / want.abs()[kept]).max() < 1.3e-6


def _ulps(got, want):
    """|got - want| in float32 ulps, part by part (ordered as integers, -0 as 0)."""
    g, w = (torch.view_as_real(t).contiguous().view(torch.int32).long() for t in (got, want))
    g, w = (torch.where(t < 0, -(t & 0x7FFFFFFF), t) for t in (g, w))
    return (g - w).abs()


@pytest.mark.tpu_fact("XLA's complex64 asinh on a TPU reaches its own log")
def test_complex64_asinh_real_part_next_to_the_imaginary_axis(tpu_policy, tpu_division, tpu_functions):
    """asinh's real part (asin's imaginary part) part by part: log|z + sqrt(z^2 + 1)| cancelled where
    |z + sqrt(z^2 + 1)| is near 1, next to the imaginary axis below i: asinh(0.5j) had real part -1.3e-8
    (CPU's 0; on the TPU stand-in test_pointwise's branch-cut test), asinh(1e-30 + 0.5j) too, asinh(1e-5 +
    0.3j) 3e-4 relative off, and at the branch point 1e-30 + 1j 5e-31 (CPU's 1e-15). Now within 5 ulps."""
    g = torch.Generator().manual_seed(3)
    y = (torch.rand(20000, generator=g) - 0.5) * 4
    x = (torch.rand(20000, generator=g) - 0.5) * 10 ** (torch.rand(20000, generator=g) * -30)
    edges = [0.5j, -0.5j, 1e-30 + 0.5j, 1e-5 + 0.3j, 1e-30 + 1j, 2e-19 + 0.5j, 1e-3 + 0.99j, 0.3 + 0j]
    z = torch.cat([torch.complex(x, y), torch.tensor(edges)]).to(torch.complex64)
    for fn, arg in ((torch.asinh, z), (torch.asin, z * 1j)):
        want, got = fn(arg), fn(arg.to(JAX)).cpu()
        assert _ulps(got, want).max() <= 5
        assert torch.equal(torch.signbit(torch.view_as_real(got)), torch.signbit(torch.view_as_real(want)))
