"""jaxdev's float32 asin, acos, asinh, acosh, atanh and exp2 (jaxdev/ops/kit/transcendentals_inverse.py),
forced on here (JAXDEV_MATH=own) and measured against torch's CPU results; the torch ops on the device
under the TPU's emulation (tests/tpu_emulation.py, tests/tpu_functions.py); XLA's programs where its
functions are chosen."""

from __future__ import annotations

import math

import jax
import numpy as np
import pytest
import torch
from jaxdev_testing import JAX
from test_transcendentals import own, ulps

from jaxdev.ops.kit import transcendentals as tm
from jaxdev.ops.kit import transcendentals_inverse as ti

_TPU_FACT = "XLA's TPU functions are accurate absolutely, not to the result (log 3,084 ulps from CPU's)"
_SPECIALS = [0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 2.0, 0.5, -0.5, 2.0**28, 3.4e38, -3.4e38, 1e-38]
# name: (jaxdev's function, torch's, domain)
FUNCTIONS = {
    "asin": (ti.asin, torch.asin, (-1, 1)),
    "acos": (ti.acos, torch.acos, (-1, 1)),
    "asinh": (ti.asinh, torch.asinh, (-1e30, 1e30)),
    "acosh": (ti.acosh, torch.acosh, (0.5, 1e30)),
    "atanh": (ti.atanh, torch.atanh, (-1.2, 1.2)),
    "exp2": (ti.exp2, torch.exp2, (-160, 140)),
}


def _values(lo: float, hi: float, n: int = 20_000) -> np.ndarray:
    """Uniform on [lo, hi], log-uniform magnitudes from 1e-30 to the larger bound (both signs where lo
    < 0), and the special values."""
    rng = np.random.default_rng(0)
    top = max(abs(lo), abs(hi))
    signs = rng.choice([-1.0, 1.0] if lo < 0 else [1.0], n)
    log_uniform = np.exp(rng.uniform(math.log(1e-30), math.log(top), n)) * signs
    return np.concatenate([rng.uniform(lo, hi, n), log_uniform, _SPECIALS]).astype(np.float32)


def _normal(want):
    return ~((np.abs(want) < 2.0**-126) & (want != 0))  # XLA's CPU backend flushes subnormals, as a TPU


@pytest.mark.tpu_fact(_TPU_FACT)
@pytest.mark.parametrize("name", list(FUNCTIONS))
def test_own_function_within_2_ulps_of_cpus(name):
    """Measured: asin, acos, atanh 2 ulps at most, asinh, acosh, exp2 1 (C's special values)."""
    fn, ref, (lo, hi) = FUNCTIONS[name]
    x = _values(lo, hi)
    want = ref(torch.from_numpy(x)).numpy()
    got = own(fn)(x)
    assert ulps(got, want)[_normal(want)].max() <= 2


def test_exp2_of_integers_is_exact():
    n = np.arange(-149, 128, dtype=np.float32)
    assert np.array_equal(own(ti.exp2)(n)[n >= -126], np.exp2(n.astype(np.float64)).astype(np.float32)[n >= -126])


@pytest.mark.parametrize("name", list(FUNCTIONS))
def test_xlas_function_where_its_functions_are_chosen(name):
    """Under JAXDEV_MATH=fast (auto on XLA's CPU backend) each is jnp's, the same program as before."""
    fn, _, _ = FUNCTIONS[name]
    x = np.zeros(4, np.float32)
    with tm.forced("fast"):
        jaxpr = str(jax.make_jaxpr(fn)(x))
    assert {"exp2": "exp2", "asin": "asin", "acos": "acos", "asinh": "asinh", "acosh": "acosh"}.get(
        name, "atanh"
    ) in jaxpr


@pytest.mark.tpu_fact(_TPU_FACT)
@pytest.mark.parametrize("name", list(FUNCTIONS))
def test_torch_op_takes_jaxdevs_function_on_a_tpu(name, tpu_policy, tpu_division, tpu_functions):
    """torch.asin ... on the device where jaxdev's functions are chosen: with XLA's functions 1,000 ulps
    off (tests/tpu_functions.py) each was 2,000 ulps from CPU here (exp2 through jnp.ldexp's 2 ** n)."""
    _, ref, (lo, hi) = FUNCTIONS[name]
    x = torch.from_numpy(_values(lo, hi, 2_000))
    want = ref(x).numpy()
    got = getattr(torch, name)(x.to(JAX)).cpu().numpy()
    assert ulps(got, want)[_normal(want)].max() <= 2


@pytest.mark.tpu_fact("XLA's complex64 atanh on a TPU reaches its own log")
def test_complex64_atanh_and_atan_where_the_own_functions_are_chosen(tpu_policy, tpu_division, tpu_functions):
    """complex64 atan was 2e-5 relative from CPU's on the chip (1.8x OpInfo's tolerance), 1.2e-4 under
    the emulation of its functions; now within 1e-6 there, over the plane, the unit circle, next to
    +-1 (1 + 1e-30j: the denominator underflows) and past 1e30."""
    g = torch.Generator().manual_seed(0)
    n = 5000
    r = torch.cat([torch.randn(n, generator=g) * 3, 10 ** (torch.rand(n, generator=g) * 40 - 20)])
    plane = torch.polar(r.abs(), torch.rand(2 * n, generator=g) * 2 * math.pi)
    circle = torch.polar(1 + (torch.rand(n, generator=g) - 0.5) * 1e-3, torch.rand(n, generator=g) * 2 * math.pi)
    near = torch.complex(1 + (torch.rand(n, generator=g) - 0.5) * 1e-6, 10 ** (torch.rand(n, generator=g) * -36))
    far = torch.complex(torch.randn(n, generator=g) * 1e30, torch.randn(n, generator=g))
    z = torch.cat([plane, circle, near, -near, far, torch.tensor([1 + 1e-30j])]).to(torch.complex64)
    for fn in (torch.atanh, torch.atan):
        want, got = fn(z), fn(z.to(JAX)).cpu()
        kept = want.abs() > 0
        assert ((got - want).abs()[kept] / want.abs()[kept]).max() < 1e-6
