"""float32 division where the platform's is approximate (capabilities' `division_approximate`: a TPU,
measured up to 191 ulps from CPU's): cpu_numerics.divide corrects it to about an ulp, and igamma, whose
divisions move its results past float32's tolerance otherwise, stays CPU's. The chip's division is
emulated here: cpu_numerics' _quotient seam perturbed by 200 ulps."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch
from jaxdev_testing import JAX

from jaxdev.ops.kit import cpu_numerics

_OFF = 200 * 2.0**-23


@pytest.fixture
def approximate_division(monkeypatch):
    """The platform's float32 division 200 ulps off (up for odd quotients' bits, down for even)."""
    real = cpu_numerics._quotient

    def approx(a, b):
        q = real(a, b)
        if q.dtype != jnp.float32:
            return q
        odd = (jax.lax.bitcast_convert_type(q, jnp.int32) & 1) == 1
        return q * jnp.where(odd, 1 + _OFF, 1 - _OFF).astype(jnp.float32)

    monkeypatch.setattr(cpu_numerics, "_quotient", approx)
    jax.clear_caches()
    yield
    jax.clear_caches()


def _ulps(got, want):
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float32)
    ulp = np.spacing(np.abs(want)).astype(np.float64)
    return np.where(got == want, 0, np.abs(got - want) / ulp)


@pytest.mark.tpu_fact("float32 division is not IEEE's on a TPU")
def test_divide_is_within_an_ulp_of_ieees_where_division_is_approximate(tpu_policy, approximate_division):
    rng = np.random.default_rng(0)
    a = (rng.standard_normal(20000) * 10.0 ** rng.integers(-15, 15, 20000)).astype(np.float32)
    b = (rng.standard_normal(20000) * 10.0 ** rng.integers(-15, 15, 20000)).astype(np.float32)
    got = jax.jit(cpu_numerics.divide)(jnp.asarray(a), jnp.asarray(b))
    assert _ulps(got, a / b).max() <= 1
    edges = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e30, 2e-30, 1.5], np.float32)  # in 2**-100..2**116
    x, y = (v.ravel() for v in np.meshgrid(edges, edges))
    got = np.asarray(jax.jit(cpu_numerics.divide)(jnp.asarray(x), jnp.asarray(y)))
    with np.errstate(all="ignore"):
        want = x / y
    assert np.array_equal(np.isnan(got), np.isnan(want)) and _ulps(got, want)[~np.isnan(want)].max() <= 1


@pytest.mark.tpu_fact("float32 division is not IEEE's on a TPU")
def test_igamma_float32_stays_cpus_where_division_is_approximate(tpu_policy, approximate_division):
    """The tpu_fact test's igamma inputs (test_program_facts): with every division 200 ulps off and
    left so, 400 of 3500 P's were past tolerance here (2.6e-4); corrected, as with IEEE's division."""
    g = torch.Generator().manual_seed(1)
    a = torch.cat([torch.rand(3000, generator=g) * 50 + 0.01, torch.rand(500, generator=g) * 1000 + 50])
    x = torch.rand(len(a), generator=g) * 3 * a
    for fn in (torch.special.gammainc, torch.special.gammaincc):
        torch.testing.assert_close(fn(a.to(JAX), x.to(JAX)).cpu(), fn(a, x), rtol=1.3e-6, atol=1e-5, equal_nan=True)


def test_divide_is_the_platforms_where_division_is_ieees(monkeypatch):
    if not cpu_numerics.division_ieee():
        pytest.skip("this platform's division is approximate")
    seen = []
    monkeypatch.setattr(cpu_numerics, "_quotient", lambda a, b: seen.append(1) or a / b)
    a, b = jnp.float32(1.0), jnp.float32(3.0)
    assert cpu_numerics.divide(a, b) == a / b and len(seen) == 1  # one division, no correction
