"""complex64 pow where jaxdev's own functions are chosen (a TPU): the C library's cpowf,
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
