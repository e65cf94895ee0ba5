"""jaxdev's float32 lgamma and pow (jaxdev/ops/kit/transcendentals_gamma.py) and what uses them (igamma,
aten lgamma, mvlgamma), measured here on CPU by forcing them on (JAXDEV_MATH=own) against torch's CPU
results (glibc's lgammaf and powf): what a TPU's kernels use, where XLA's lgamma was 1.19e5 ulps and
pow(x/a, a) 9.4e-5 relative from CPU's (a v5e, benchmarks/tpu_probe_division.py), which kept igamma
float32 9.3e-4 relative off there. On XLA's CPU backend XLA's functions stay."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch
from jaxdev_testing import JAX
from test_transcendentals import own, ulps

from jaxdev.ops.kit import transcendentals as tm
from jaxdev.ops.kit import transcendentals_gamma as tg
from jaxdev.ops.special import functions

_TPU_FACT = "XLA's TPU lgamma is 1.2e5 ulps from CPU's and its float32 pow 9.4e-5 relative"


def _lgamma_arguments() -> dict[str, np.ndarray]:
    """100,000 float32 arguments: uniform, log-uniform to 1e30, next to the zeros at 1 and 2, negative
    ones, next to the poles (-k +- 1e-6 .. 1e-1), and around zero."""
    rng = np.random.default_rng(0)
    n = 15_000
    near = rng.uniform(-0.3, 0.3, n) * 10.0 ** rng.integers(-7, 0, n)
    out = {
        "uniform": rng.uniform(0, 50, n),
        "log-uniform": np.exp(rng.uniform(math.log(1e-30), math.log(1e30), n)),
        "near 1": 1 + near,
        "near 2": 2 + near[::-1],
        "negative": rng.uniform(-50, 0, n),
        "poles": -rng.integers(0, 50, n) + rng.choice([1.0, -1.0], n) * 10.0 ** rng.uniform(-6, -1, n),
        "around 0": rng.uniform(-0.3, 0.3, 10_000),
    }
    return {k: v.astype(np.float32) for k, v in out.items()}


@pytest.mark.tpu_fact(_TPU_FACT)
def test_own_lgamma_within_2_ulps_of_cpus_for_positive_x():
    """x > 0 (and |x| < 1/4): within 2 ulps of glibc's lgammaf, relative to the result next to the zeros
    at 1 and 2 (measured: 2 ulps, 1 near 1 and 2)."""
    for name, x in _lgamma_arguments().items():
        x = x[(x > 0) | (np.abs(x) < 0.25)]
        want = torch.lgamma(torch.from_numpy(x)).numpy()
        d = ulps(own(tg.lgamma)(x), want)
        limit = 3 if name == "around 0" else 2  # x in (-1/4, 0): lgamma(1 + x) - log|x|, 3 measured
        assert d.max() <= limit, (name, x[np.argmax(d)], d.max())


@pytest.mark.tpu_fact(_TPU_FACT)
def test_own_lgamma_near_cpus_for_negative_x():
    """x < -1/4 by reflection, log(pi / |x sin(pi x)|) - lgamma(-x): within 8 ulps of the larger term
    (measured 6-7.5; ~1e-7 absolute where they cancel, next to lgamma's zeros between the poles, which
    glibc refines and these functions do not), so relative to the result within 2 ulps where |lgamma|
    >= 4 and 8 where >= 1 (measured 2 and 8; next to a pole included)."""
    args = _lgamma_arguments()
    x = np.concatenate([args["negative"], args["poles"]])
    x = x[(x < -0.25) & (x != np.round(x))]
    want = torch.lgamma(torch.from_numpy(x)).numpy()
    got = own(tg.lgamma)(x)
    for least, limit in ((4, 2), (1, 8)):
        large = np.abs(want) >= least
        assert ulps(got[large], want[large]).max() <= limit, least
    scale = np.maximum(np.abs(want), np.abs(torch.lgamma(torch.from_numpy(-x)).numpy()))
    off = np.abs(got.astype(np.float64) - want) / np.spacing(scale)
    assert off.max() <= 8, (x[np.argmax(off)], off.max())


@pytest.mark.tpu_fact(_TPU_FACT)
def test_own_lgamma_edges_are_cpus():
    x = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, -1, -2, -50, -(2.0**23), -1e30, 1, 2, 1e30, 3e38, 4e36, 1e-30])
    x = x.astype(np.float32)
    got, want = own(tg.lgamma)(x), torch.lgamma(torch.from_numpy(x)).numpy()
    assert ulps(got, want).max() <= 1, (got, want)


def test_own_lgamma_gradient_is_digamma():
    x = jnp.asarray([0.3, 1.0, 1.7, 9.5, -2.5, 100.0], jnp.float32)
    with tm.forced("own"):
        grad = jax.jit(jax.vmap(jax.grad(tg.lgamma)))(x)
    want = torch.digamma(torch.from_numpy(np.array(x))).numpy()
    np.testing.assert_allclose(np.asarray(grad), want, rtol=2e-6)


@pytest.mark.tpu_fact(_TPU_FACT)
def test_own_pow_within_3_ulps_of_cpus():
    """Positive bases in (1e-6, 1e6) and exponents up to 1e3 in magnitude, and bases next to 1 with
    exponents to 1e3 (a log(x) of ~1e-4 times 1e3): within 3 ulps of glibc's powf (measured 3 and 1:
    log(x) is a pair to ~3e-10 relative, times an exponent that takes e log(x) to 88); every result
    that is normal, overflow and underflow alike."""
    rng = np.random.default_rng(0)
    n = 100_000
    bases = np.exp(rng.uniform(math.log(1e-6), math.log(1e6), n))
    exponents = rng.uniform(-1, 1, n) * 10.0 ** rng.uniform(-3, 3, n)
    near_one, large = 1 + rng.uniform(-1e-3, 1e-3, n), rng.uniform(0, 1000, n)
    b = np.concatenate([bases, near_one]).astype(np.float32)
    e = np.concatenate([exponents, large]).astype(np.float32)
    want = torch.pow(torch.from_numpy(b), torch.from_numpy(e)).numpy()
    with tm.forced("own"):
        got = np.asarray(jax.jit(tg.pow)(b, e))
    normal = (np.abs(want) >= 2.0**-126) | (want == 0)
    d = ulps(got[normal], want[normal])
    assert d.max() <= 3, (b[normal][np.argmax(d)], e[normal][np.argmax(d)], d.max())


@pytest.mark.tpu_fact(_TPU_FACT)
def test_own_pow_keeps_jnp_powers_special_values():
    v = np.array([0.0, -0.0, 1.0, -1.0, -2.0, 2.0, np.inf, -np.inf, np.nan, 0.5], np.float32)
    b, e = (a.ravel() for a in np.meshgrid(v, v))
    with tm.forced("own"):
        got = np.asarray(jax.jit(tg.pow)(b, e))
    want = torch.pow(torch.from_numpy(b), torch.from_numpy(e)).numpy()
    assert ulps(got, want).max() == 0


def test_pow_kept_subnormal_is_cpus_subnormal_power_scaled():
    """Powers below float32's normal range (igamma's prefactor), in float32 throughout: glibc's powf on the
    subnormal grid times 2^64, within pow32's 3 ulps (of the grid's 2^-149); normal powers as pow32's (4 ulps here)."""
    rng = np.random.default_rng(1)
    b = rng.uniform(0.5, 0.7, 20_000).astype(np.float32)
    e = rng.uniform(150, 310, 20_000).astype(np.float32)  # b^e from ~2^-230 to ~2^-80
    want = torch.pow(torch.from_numpy(b), torch.from_numpy(e)).numpy().astype(np.float64)
    power, tiny = jax.jit(tg.pow32_kept_subnormal)(b, e)
    got = np.where(tiny, np.asarray(power, np.float64) * 2.0**-tg.SUBNORMAL_SHIFT, np.asarray(power))
    subnormal = (want > 0) & (want < 2.0**-126)
    assert subnormal.sum() > 1000 and np.asarray(tiny)[subnormal].all()
    few = subnormal & (want < 2.0**-140)  # 9 bits or fewer: glibc's value itself
    assert few.sum() > 1000 and (got[few] == want[few]).all()
    assert np.abs(got - want)[subnormal].max() <= 3 * 2.0**-149  # pow32's 3 ulps (measured 2)
    normal = want >= 2.0**-126
    assert ulps(got[normal].astype(np.float32), want[normal].astype(np.float32)).max() <= 4  # e log(b) to -87


@pytest.fixture
def chips_lgamma_and_power(monkeypatch):
    """XLA's lgamma and float32 pow as inaccurate as the chip's (0.0099 and 9.4e-5 relative there): a
    kernel that still calls them fails."""
    lgamma, power = jax.lax.lgamma, jnp.power

    def off(v, scale):
        return v * (1 + scale) if v.dtype == jnp.float32 else v

    monkeypatch.setattr(jax.lax, "lgamma", lambda v: off(lgamma(v), 0.0099))
    monkeypatch.setattr(jnp, "power", lambda a, b: off(power(a, b), 9.4e-5))
    jax.clear_caches()
    yield
    jax.clear_caches()


@pytest.mark.tpu_fact(_TPU_FACT)
@pytest.mark.usefixtures("tpu_division", "chips_lgamma_and_power")
def test_igamma_float32_stays_cpus_with_the_chips_lgamma_pow_and_division(tpu_policy):
    """test_program_facts' igamma inputs, every float32 division as a TPU's (tpu_division) and XLA's lgamma and pow
    the chip's: within float32's tolerance of CPU's (before the own lgamma and pow: 9.3e-4 relative)."""
    g = torch.Generator().manual_seed(1)
    a = torch.cat([torch.rand(3000, generator=g) * 50 + 0.01, torch.rand(500, generator=g) * 1000 + 50])
    x = torch.rand(len(a), generator=g) * 3 * a
    for fn in (torch.special.gammainc, torch.special.gammaincc):
        torch.testing.assert_close(fn(a.to(JAX), x.to(JAX)).cpu(), fn(a, x), rtol=1.3e-6, atol=1e-5, equal_nan=True)


@pytest.mark.tpu_fact(_TPU_FACT)
def test_lgamma_and_mvlgamma_ops_take_the_own_lgamma(tpu_policy):
    """aten lgamma and mvlgamma under the TPU's policy: no XLA lgamma in their programs, and lgamma's
    float32, float16 and bfloat16 results CPU's (within 2 ulps for float32; half values rounded once)."""
    x = jnp.linspace(0.1, 30, 64, dtype=jnp.float32)
    assert "= lgamma " not in str(jax.make_jaxpr(tg.lgamma)(x))  # the primitive applied
    assert "= lgamma " not in str(jax.make_jaxpr(lambda v: functions.multigammaln(v, 3))(x))
    t = torch.from_numpy(np.array(x))
    assert ulps(torch.lgamma(t.to(JAX)).cpu().numpy(), torch.lgamma(t).numpy()).max() <= 2
    for dt in (torch.float16, torch.bfloat16):
        assert torch.equal(torch.lgamma(t.to(dt).to(JAX)).cpu(), torch.lgamma(t.to(dt)))
    m = t + 2
    torch.testing.assert_close(torch.mvlgamma(m.to(JAX), 3).cpu(), torch.mvlgamma(m, 3), rtol=1.3e-6, atol=1e-5)


@pytest.mark.tpu_fact(_TPU_FACT)
@pytest.mark.usefixtures("chips_lgamma_and_power")
def test_the_pow_op_takes_the_own_pow(tpu_policy, monkeypatch):
    """torch.pow in float32 (tensor and number exponents, negative bases with integer exponents, an odd
    one negating) and float16 under the TPU's policy, XLA's pow made the chip's: CPU's within 1 ulp,
    special values exactly."""
    traced, own_pow = [], tg.pow32
    monkeypatch.setattr(tg, "pow32", lambda b, e: traced.append(b.dtype) or own_pow(b, e))
    g = torch.Generator().manual_seed(0)
    base = torch.cat([torch.rand(4000, generator=g) * 20 - 10, torch.tensor([0.0, -0.0, np.inf, -np.inf, np.nan])])
    whole = torch.randint(-12, 12, (2000,), generator=g).float()
    exponent = torch.cat([whole, torch.rand(2000, generator=g) * 8 - 4, torch.tensor([0.0, 1, -1, 3, np.nan])])
    for got, want in (
        (torch.pow(base.to(JAX), exponent.to(JAX)), torch.pow(base, exponent)),
        (torch.pow(base.to(JAX), 3.7), torch.pow(base, 3.7)),
        (torch.pow(base.to(JAX), 5.0), torch.pow(base, 5.0)),
        (torch.pow(2.5, exponent.to(JAX)), torch.pow(2.5, exponent)),
    ):
        got, want = got.cpu().numpy(), want.numpy()
        number = ~np.isnan(want)
        assert np.array_equal(np.isnan(got), ~number) and np.array_equal(
            np.signbit(got[number]), np.signbit(want[number])
        )
        finite = np.isfinite(want) & (np.abs(want) > 2.0**-126)
        assert ulps(got[finite], want[finite]).max() <= 1
        assert np.array_equal(got[~finite], want[~finite], equal_nan=True)
    assert traced  # (XLA's pow on CPU is CPU's: only the spy tells the two apart here)
    half = base.half()
    torch.testing.assert_close(torch.pow(half.to(JAX), 2.5).cpu(), torch.pow(half, 2.5), rtol=0, atol=0, equal_nan=True)


@pytest.mark.cpu_fact("the default keeps XLA's functions on the CPU backend only")
def test_the_cpu_backend_keeps_xlas_power():
    x = jnp.linspace(0.5, 4, 8, dtype=jnp.float32)
    with tm.forced("auto"):
        assert str(jax.make_jaxpr(tg.pow)(x, x)) == str(jax.make_jaxpr(jnp.power)(x, x))


def test_float32_lgamma_is_jaxdevs_own_on_every_platform():
    """XLA's float32 lgamma is up to 22,084 ulps from CPU's on its CPU backend too (lgamma(1) = 4.8e-7,
    near 2 worst): aten lgamma and mvlgamma take the own one wherever they run, within 2 ulps of CPU
    for x > 0 under the default (JAXDEV_MATH=auto), float64 stays XLA's."""
    with tm.forced("auto"):
        x = jnp.linspace(0.5, 4, 8, dtype=jnp.float32)
        assert str(jax.make_jaxpr(tg.lgamma)(x)) != str(jax.make_jaxpr(jax.scipy.special.gammaln)(x))
        wide = x.astype(jnp.float64)
        assert str(jax.make_jaxpr(tg.lgamma)(wide)) == str(jax.make_jaxpr(jax.scipy.special.gammaln)(wide))
        rng = np.random.default_rng(7)
        v = torch.from_numpy(
            np.concatenate([rng.uniform(0, 1e3, 30000), rng.uniform(1.9, 2.1, 10000)]).astype(np.float32)
        )
        v = torch.cat([v, torch.tensor([1.0, 2.0, 3.0, 0.5, 10.0])])
        got, want = torch.lgamma(v.to(JAX)).cpu(), torch.lgamma(v)
        assert got[-5] == 0 and got[-4] == 0  # lgamma(1) = lgamma(2) = 0 exactly (XLA's: 4.8e-7 at 1)
        spacing = torch.from_numpy(np.spacing(want.abs().numpy()))
        assert ((got - want).abs() / spacing).max() <= 2
        m = torch.mvlgamma(v[:1000].abs() + 2, 3)
        torch.testing.assert_close(torch.mvlgamma(v[:1000].abs().to(JAX) + 2, 3).cpu(), m, rtol=2.5e-7, atol=0)
