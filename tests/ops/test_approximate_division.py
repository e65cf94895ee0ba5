"""float32 division where the platform's is approximate (capabilities' `division_approximate`: a TPU,
measured up to 191 ulps from CPU's): cpu_numerics.divide corrects it to about an ulp, and igamma, whose
divisions move its results past float32's tolerance otherwise, stays CPU's. The chip's division is
emulated here: every float32 division lowered 200 ulps off (tests/ops/conftest.py's `tpu_division`)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch
from jaxdev_testing import JAX

from jaxdev.ops.kit import cpu_numerics, division, math_mode


def _ulps(got, want):
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float32)
    ulp = np.spacing(np.abs(want)).astype(np.float64)
    return np.where(got == want, 0, np.abs(got - want) / ulp)


@pytest.mark.tpu_fact("float32 division is not IEEE's on a TPU")
def test_divide_is_within_an_ulp_of_ieees_where_division_is_approximate(tpu_policy, tpu_division):
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
def test_igamma_float32_stays_cpus_where_division_is_approximate(tpu_policy, tpu_division):
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
    monkeypatch.setattr(division, "_quotient", lambda a, b: seen.append(1) or a / b)
    a, b = jnp.float32(1.0), jnp.float32(3.0)
    assert cpu_numerics.divide(a, b) == a / b and len(seen) == 1  # one division, no correction


def test_fast_math_leaves_division_to_the_platform_where_it_is_approximate(tpu_policy, monkeypatch):
    """JAXDEV_MATH=fast asks for XLA's numerics: one division, no correction, where the platform's is
    approximate too (the TPU's policy here); auto corrects it there."""
    seen = []
    monkeypatch.setattr(division, "_quotient", lambda a, b: seen.append(1) or a / b)
    a, b = jnp.float32(1.0), jnp.float32(3.0)
    with math_mode.forced("fast"):
        assert cpu_numerics.division_ieee() and cpu_numerics.divide(a, b) == a / b and len(seen) == 1
    with math_mode.forced("auto"):
        assert not cpu_numerics.division_ieee()
        cpu_numerics.divide(a, b)
        assert len(seen) > 2  # the quotient, then its correction's


@pytest.mark.tpu_fact("float32 division is not IEEE's on a TPU")
def test_divide_corrects_divisors_near_float32s_limits(tpu_policy, tpu_division):
    """A TPU's quotient by a divisor past about 2**115 or under 2**-114 was up to 7.5e7 ulps off (its
    reciprocal's range), divide's too before it scaled such divisors: now within an ulp."""
    rng = np.random.default_rng(1)
    n = 20000
    sign = rng.choice([-1.0, 1.0], n)
    edge = rng.choice([-126.0, 115.0], n)
    b = (2.0 ** (edge + rng.uniform(0, 12, n)) * sign).astype(np.float32)
    a = (2.0 ** rng.uniform(-8, 8, n) * rng.choice([-1.0, 1.0], n)).astype(np.float32)
    with np.errstate(all="ignore"):
        want = a / b
    got = np.asarray(jax.jit(cpu_numerics.divide)(jnp.asarray(a), jnp.asarray(b)))
    kept = np.isfinite(want) & (np.abs(want) >= np.float32(2.0**-126))
    assert kept.sum() > n // 2 and _ulps(got[kept], want[kept]).max() <= 1


@pytest.mark.tpu_fact("float32 division is not IEEE's on a TPU")
@pytest.mark.parametrize("name", ["sigmoid", "silu", "logsigmoid", "erfc", "log1p"])
def test_functions_that_divide_stay_cpus_where_division_is_approximate(tpu_policy, tpu_division, name):
    """sigmoid's 1 / (1 + exp(-x)) was 181 ulps off CPU's on the chip at x near -80 (a divisor near
    2**115), silu's 213; the own functions divide through division.divide."""
    fn = {
        "sigmoid": torch.sigmoid,
        "silu": torch.nn.functional.silu,
        "logsigmoid": torch.nn.functional.logsigmoid,
        "erfc": torch.erfc,
        "log1p": torch.log1p,
    }[name]
    g = torch.Generator().manual_seed(0)
    x = (torch.rand(50000, generator=g) * 2 - 1) * 10.0 ** (torch.rand(50000, generator=g) * 4 - 2)
    x = torch.cat([x, torch.linspace(-87, 87, 20001), torch.tensor([0.0, -0.0, 1e-8, -1e-8])])
    if name == "log1p":
        x = x.abs() * 1e-5  # where the rounding correction is the size of the result
    want = fn(x)
    got = fn(x.to(JAX)).cpu()
    kept = want.abs() >= 2.0**-126  # a TPU flushes subnormal results
    assert _ulps(got[kept].numpy(), want[kept].numpy()).max() <= 2


@pytest.mark.tpu_fact("float32 division is not IEEE's on a TPU")
@pytest.mark.parametrize("name", ["div", "div_number", "reciprocal", "addcdiv", "foreach_div"])
def test_torch_divisions_are_ieees_where_the_platforms_is_not(tpu_policy, tpu_division, name):
    """torch.div and its kin through division.divide where division is approximate: the chip's quotient
    by a divisor near float32's limits was up to 7.5e7 ulps off (4 ulps in range under the emulation,
    400 near the limits, before)."""
    fn = {
        "div": lambda x, y: x / y,
        "div_number": lambda x, y: x / 3.7,
        "reciprocal": lambda x, y: torch.reciprocal(y),
        "addcdiv": lambda x, y: torch.addcdiv(x, x, y, value=0.5),
        "foreach_div": lambda x, y: torch._foreach_div([x], [y])[0],
    }[name]
    rng = np.random.default_rng(2)
    n = 20000
    a = torch.from_numpy((2.0 ** rng.uniform(-8, 8, n) * rng.choice([-1, 1], n)).astype(np.float32))
    near = 2.0 ** (rng.choice([-126.0, 115.0], n // 2) + rng.uniform(0, 12, n // 2))
    b = torch.from_numpy(np.concatenate([near, 2.0 ** rng.uniform(-40, 40, n // 2)]).astype(np.float32))
    want = fn(a, b)
    got = fn(a.to(JAX), b.to(JAX)).cpu()
    kept = torch.isfinite(want) & (want.abs() >= 2.0**-126)
    assert _ulps(got[kept].numpy(), want[kept].numpy()).max() <= 1


@pytest.mark.tpu_fact("float32 division is not IEEE's on a TPU")
def test_divide_keeps_zeros_signs_and_tiny_dividends(tpu_policy, tpu_division):
    """The review of f8a4a4a: the correction made -0 / 1 into +0 (-0 - -0 is +0), and a dividend under
    2**-100 over a small divisor came out up to twice too large (FLT_MIN / 1e-20), its residual's parts
    below float32's smallest normal, which XLA flushes."""
    f = jax.jit(cpu_numerics.divide)
    assert np.signbit(f(jnp.float32(-0.0), jnp.float32(1.0))) and np.signbit(f(jnp.float32(-1e-30), jnp.float32(2e30)))
    assert f(jnp.float32(1.1754944e-38), jnp.float32(1e-20)) == np.float32(1.1754944e-38) / np.float32(1e-20)
    rng = np.random.default_rng(4)
    a = (2.0 ** rng.uniform(-126, -100, 50000) * rng.choice([-1, 1], 50000)).astype(np.float32)
    b = (2.0 ** rng.uniform(-126, 127, 50000) * rng.choice([-1, 1], 50000)).astype(np.float32)
    with np.errstate(all="ignore"):
        want = a / b
    got = np.asarray(f(jnp.asarray(a), jnp.asarray(b)))
    kept = np.isfinite(want) & (np.abs(want) >= np.float32(2.0**-126))
    assert _ulps(got[kept], want[kept]).max() <= 1
    assert np.array_equal(np.signbit(got[want == 0]), np.signbit(want[want == 0]))


@pytest.mark.tpu_fact("float32 division is not IEEE's on a TPU")
def test_divide_has_gradients_in_both_modes(tpu_policy):
    """jax.grad through divide raised in JAX's transpose where its tangent was a division scaled by the
    tangent's own magnitude (not linear); forward and reverse now give -a / b^2 and 1 / b."""
    db = jax.grad(lambda y: cpu_numerics.divide(jnp.float32(1), y))(jnp.float32(3.0))
    da = jax.grad(lambda x: cpu_numerics.divide(x, jnp.float32(3.0)))(jnp.float32(2.0))
    fwd = jax.jacfwd(lambda y: cpu_numerics.divide(jnp.float32(1), y))(jnp.float32(3.0))
    assert abs(db - (-1 / 9)) < 1e-7 and abs(da - 1 / 3) < 1e-7 and abs(fwd - (-1 / 9)) < 1e-7


def _fmod_cases():
    """Exact multiples (fl(k b) against b), wide magnitudes (a quotient up to 2^230) and C's special
    values, float32."""
    rng = np.random.default_rng(3)
    n = 20_000
    b = rng.uniform(-100, 100, n).astype(np.float32)
    multiples = (rng.integers(-1000, 1000, n) * b).astype(np.float32)
    wide = (np.exp(rng.uniform(-87, 88, (2, n))) * rng.choice([-1, 1], (2, n))).astype(np.float32)
    special = np.array([0.0, -0.0, 1.0, -1.0, np.inf, -np.inf, np.nan, 5.5, -3e38, 1.5e-38], np.float32)
    sa, sb = (v.ravel() for v in np.meshgrid(special, special))
    return np.concatenate([multiples, wide[0], sa]), np.concatenate([b, wide[1], sb])


@pytest.mark.tpu_fact("float32 rem is a - b trunc(a / b) on a TPU's approximate quotient")
def test_fmod_is_cs_where_division_is_approximate(tpu_policy, tpu_division):
    """division.fmod is C's fmodf bit for bit (NaN where C's is): the platform's rem (emulated as a
    TPU's) differed on 96,276 of 200,000 such exact multiples; on the chip 97 % of them came out 0."""
    a, b = _fmod_cases()
    want = np.fmod(a, b)  # numpy's is C's fmodf
    got = np.asarray(jax.jit(division.fmod)(jnp.asarray(a), jnp.asarray(b)))
    finite = ~np.isnan(want) & ~((np.abs(want) < np.finfo(np.float32).tiny) & (want != 0))  # flushed
    assert np.array_equal(np.isnan(got), np.isnan(want))
    assert np.array_equal(got[finite].view(np.int32), want[finite].view(np.int32))


@pytest.mark.tpu_fact("float32 rem is a - b trunc(a / b) on a TPU's approximate quotient")
@pytest.mark.parametrize("name", ["fmod", "remainder", "floor_divide", "grid_sample_reflect"])
def test_torch_remainders_are_cpus_where_the_platforms_rem_is_not(tpu_policy, tpu_division, name):
    """torch.fmod, torch.remainder and floor division go through C's fmod, as grid_sample's reflection
    padding does (fmod of the coordinate by the span, flips by the quotient's floor)."""
    g = torch.Generator().manual_seed(5)
    b = torch.rand(4_000, generator=g) * 200 - 100
    a = torch.randint(-1000, 1000, (4_000,), generator=g).float() * b
    if name == "grid_sample_reflect":
        grid = torch.rand(1, 50, 40, 2, generator=g) * 14 - 7  # far outside [-1, 1]: many reflections
        image = torch.randn(1, 2, 9, 11, generator=g)
        fn = lambda i, gr: torch.nn.functional.grid_sample(i, gr, padding_mode="reflection", align_corners=False)
        a, b = image, grid
    else:
        fn = {"fmod": torch.fmod, "remainder": torch.remainder, "floor_divide": torch.floor_divide}[name]
    got, want = fn(a.to(JAX), b.to(JAX)).cpu(), fn(a, b)
    if name == "grid_sample_reflect":  # the emulation's other divisions (by 2 too) move the weights 5e-5;
        torch.testing.assert_close(got, want, rtol=0, atol=1e-4)  # a wrong reflection moved them 3.7
    else:
        assert torch.equal(got, want)
