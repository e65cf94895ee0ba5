"""igamma/igammac (torch.special.gammainc/gammaincc) against CPU: CPU's boundary values, its asymptotic
expansion for large a near x, and OpInfo's reference inputs, where JAX's gammainc gave NaN at a = 0
(4 of 256 elements of one sample, found by test_ops' compare_cpu) and wrong values for large a."""

from __future__ import annotations

import itertools
import math
import warnings

import pytest
import torch
import tpu_emulation
from jaxdev_testing import JAX, assert_same, check

INF, NAN = math.inf, math.nan
FUNCTIONS = {"igamma": torch.igamma, "igammac": torch.igammac}
DTYPES = [torch.float32, torch.float64]


def _both(fn, a, x, dtype, **tolerance):
    a, x = torch.tensor(a, dtype=dtype), torch.tensor(x, dtype=dtype)
    assert_same(fn(a.to(JAX), x.to(JAX)), fn(a, x), **tolerance)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", FUNCTIONS)
def test_boundary_values(name, dtype):
    """a = 0 < x is 1 (igamma) / 0 (igammac), not NaN; a or x infinite, NaN and negative as CPU tests them."""
    edges = [0.0, -0.0, -1.0, 0.25, 2.0, INF, -INF, NAN]
    pairs = list(itertools.product(edges, edges))
    _both(FUNCTIONS[name], [a for a, _ in pairs], [x for _, x in pairs], dtype, rtol=1e-6)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", FUNCTIONS)
def test_large_order_near_x(name, dtype):
    """CPU's uniform asymptotic expansion: JAX's gammainc gave P(1e4, 1e4) = 0.50197 (0.50133) in
    float32, 0 at a = x = 1e10, and 0.5000049 (0.5000013) in float64 at 1e10."""
    a = [1001.2, 13437.7, 4988429.0, 1e10, 50.0, 250.0, 1e4, 1e4]
    x = [1001.2, 13437.7, 4988429.0, 1e10, 45.0, 260.0, 1e4 + 300, 1e4 - 300]
    if dtype == torch.float32:
        a, x = a + [1e20, 1e30], x + [1e20, 1e30]
    _both(FUNCTIONS[name], a, x, dtype, rtol=2e-6 if dtype == torch.float32 else 1e-12)


@pytest.mark.parametrize("name", FUNCTIONS)
def test_float32_accuracy(name):
    """A power below float32's normal range inside P's prefactor (XLA flushed it to 0: P(181.66, 115.26)
    was 0, CPU 6.9e-9), kept with the few bits CPU keeps (P(196.76, 119.46) is CPU's 8.666e-11, 30% off
    the true value, and P(199.88, 121.60) CPU's 0), and small a, where XLA's float32 lgamma moved Q by
    1.5e-6."""
    a = [181.66249084472656, 196.763916015625, 199.88446044921875]
    x = [115.25628662109375, 119.45755004882812, 121.59707641601562]
    a += [0.5390304327011108, 0.002636602148413658, 0.19167344272136688]
    x += [0.8949875831604004, 0.0014661072054877877, 0.349202960729599]
    _both(FUNCTIONS[name], a, x, torch.float32, rtol=1e-6)


@pytest.mark.tpu_fact("a TPU flushes float32 subnormals, and float32 stays float32 there")
def test_float32_subnormal_power_under_the_tpus_policy(tpu_policy):
    """test_float32_accuracy's large orders where float32 does not widen: the power below float32's normal
    range is kept scaled (on the TPU stand-in P(181.66, 115.26) was 0, CPU's 6.9e-9)."""
    a = [181.66249084472656, 196.763916015625, 199.88446044921875, 150.0, 190.0]
    x = [115.25628662109375, 119.45755004882812, 121.59707641601562, 95.0, 118.0]
    _both(torch.igamma, a, x, torch.float32, rtol=1e-6)


@pytest.mark.tpu_fact("float32 sqrt is not IEEE's on a TPU")
@pytest.mark.parametrize("fn", [torch.special.gammainc, torch.special.gammaincc])
def test_float32_sqrt_is_ieees_where_the_platforms_is_not(tpu_policy, fn):
    """igamma's square roots (the Lanczos factor, the asymptotic series' eta, sqrt(a / 2), sqrt(2 pi a)
    and the regime's threshold) are division.sqrt's: the same bits under a sqrt 2 ulps off as under
    IEEE's. They were XLA's: 12,367 of 20,000 results differed, and under the emulated chip (its
    division too) the asymptotic regime was a mean of 12.7 ulps from CPU (max 334), now 7.4 (196)."""
    g = torch.Generator().manual_seed(0)
    a = torch.rand(4000, generator=g) * 280 + 0.1
    x = a * (1 + (torch.rand(4000, generator=g) - 0.5) * 0.6)
    ieee = fn(a.to(JAX), x.to(JAX)).cpu()
    with tpu_emulation.sqrt():
        approximate = fn(a.to(JAX), x.to(JAX)).cpu()
    assert int((ieee.view(torch.int32) != approximate.view(torch.int32)).sum()) == 0


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("name", FUNCTIONS)
def test_halves(name, dtype):
    """CPU computes the halves in float and rounds: so does jaxdev. A float ulp apart can round to
    neighbouring halves, and XLA flushes a subnormal result (bfloat16's 1e-39) to 0."""
    g = torch.Generator().manual_seed(3)
    a, x = torch.rand(2, 500, generator=g, dtype=torch.float64) * 30
    _both(FUNCTIONS[name], a.tolist(), x.tolist(), dtype, rtol=1e-3, atol=1e-37)


@pytest.mark.parametrize("fn", [torch.special.gammainc, torch.special.gammaincc])
def test_gradient_in_x(fn):
    """PyTorch's derivative formula (there is none in a, on CPU as here) runs on jax's values."""
    g = torch.Generator().manual_seed(4)
    a = torch.rand(40, generator=g, dtype=torch.float64) * 20 + 0.1
    x = torch.rand(40, generator=g, dtype=torch.float64) * 20
    grads = []
    for device in ("cpu", JAX):
        leaf = x.to(device).detach().requires_grad_()
        fn(a.to(device), leaf).sum().backward()
        grads.append(leaf.grad)
    assert_same(grads[1], grads[0], rtol=1e-12, atol=1e-15)
    with pytest.raises(NotImplementedError, match=r"igammac?: input"):
        fn(a.to(JAX).requires_grad_(), x.to(JAX)).sum().backward()


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", FUNCTIONS)
def test_random_orders_and_limits(name, dtype):
    g = torch.Generator().manual_seed(0)
    a = 10 ** (torch.rand(3000, generator=g, dtype=torch.float64) * 7 - 3)
    x = a * torch.rand(3000, generator=g, dtype=torch.float64) * 2.5
    a, x = a.to(dtype), x.to(dtype)
    fn = FUNCTIONS[name]
    # an absolute tolerance: values far below 1 come from exp of a large sum, whose last bits (CPU's as
    # much as jax's) move them by up to 1e-4 relatively in float32
    tolerance = dict(rtol=1e-5, atol=1e-6) if dtype == torch.float32 else dict(rtol=1e-10, atol=1e-13)
    assert_same(fn(a.to(JAX), x.to(JAX)), fn(a, x), **tolerance)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", FUNCTIONS)
def test_opinfo_reference_inputs(name, dtype):
    from torch.testing._internal.common_methods_invocations import op_db

    op = next(o for o in op_db if o.name == name)
    # every small sample's elements in one call (an elementwise op): one compilation instead of one per
    # shape; the large random samples (2.2M elements) add nothing the other tests lack
    a, x = [], []
    for sample in op.reference_inputs("cpu", dtype):
        if sample.input.numel() > 4096:
            continue
        pair = torch.broadcast_tensors(sample.input, sample.args[0])
        a.append(pair[0].reshape(-1))
        x.append(pair[1].reshape(-1))
    a, x = torch.cat(a), torch.cat(x)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        expected = op(a, x)
    assert_same(op(a.to(JAX), x.to(JAX)), expected, rtol=1e-5 if dtype == torch.float32 else 1e-10, atol=1e-37)


@pytest.mark.usefixtures("no_fallback")
def test_incomplete_gamma_like_cpu():
    a = torch.tensor([0.5, 1.0, 3.0, 10.0, float("inf"), 2.0, 0.0])
    x = torch.tensor([0.3, 2.0, 3.0, 4.0, 1.0, float("inf"), 1.0])
    check(torch.special.gammainc, a, x, grad=False, rtol=1e-5, atol=1e-6)
    check(torch.special.gammaincc, a, x, grad=False, rtol=1e-5, atol=1e-6)
