"""jaxdev's float32 atan and atan2 (jaxdev/ops/kit/transcendentals_atan.py), forced on here
(JAXDEV_MATH=own) and measured against torch's CPU results: what a TPU's kernels use by default
(atan, atan2, angle, the complex log's argument, complex logcumsumexp). On XLA's CPU backend XLA's
functions stay."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch
from jaxdev_testing import describe_exit, run_python
from test_transcendentals import own, ulps

from jaxdev.ops.kit import transcendentals as tm
from jaxdev.ops.kit import transcendentals_atan as ta

_TPU_FACT = "XLA's TPU functions are accurate absolutely, not to the result (complex64 logcumsumexp 5.8e-5 off)"


def magnitudes(rng, n: int) -> np.ndarray:
    """Uniform on [-10, 10], log-uniform magnitudes from 1e-30 to 1e30, and values next to the
    reductions' boundaries (7/16, 11/16, 1, 39/16)."""
    edges = np.concatenate([np.linspace(b * 0.98, b * 1.02, n // 8) for b in (0.4375, 0.6875, 1.0, 2.4375)])
    log_uniform = np.exp(rng.uniform(math.log(1e-30), math.log(1e30), n)) * rng.choice([-1.0, 1.0], n)
    return np.concatenate([rng.uniform(-10, 10, n), log_uniform, edges, -edges]).astype(np.float32)


def _normal(want):
    return ~((np.abs(want) < 2.0**-126) & (want != 0))  # XLA's CPU backend flushes subnormals, as a TPU


@pytest.mark.tpu_fact(_TPU_FACT)
def test_own_atan_within_2_ulps_of_cpus():
    x = magnitudes(np.random.default_rng(0), 20_000)
    x = np.concatenate([x, np.float32([0.0, -0.0, np.inf, -np.inf, np.nan, 3.4e38, -1e-37])])
    want = torch.atan(torch.from_numpy(x)).numpy()
    got = own(ta.atan)(x)
    keep = _normal(want)
    d = ulps(got[keep], want[keep])
    assert d.max() <= 2, (x[keep][np.argmax(d)], d.max())  # measured: 2, 64 % exact on [-10, 10]
    assert np.array_equal(np.signbit(got[x == 0]), np.signbit(want[x == 0]))


@pytest.mark.tpu_fact(_TPU_FACT)
def test_own_atan2_within_2_ulps_of_cpus_in_every_quadrant():
    rng = np.random.default_rng(1)
    y, x = magnitudes(rng, 20_000), rng.permutation(magnitudes(rng, 20_000))
    close = rng.uniform(-10, 10, 20_000).astype(np.float32)  # |y| ~ |x|: the octant's edge, either side
    y = np.concatenate([y, close * np.float32(1 + 1e-3), -close, 3e38 * np.sign(close)]).astype(np.float32)
    x = np.concatenate([x, -close, close * np.float32(1 - 1e-3), 2.9e38 * np.ones_like(close)]).astype(np.float32)
    want = torch.atan2(torch.from_numpy(y), torch.from_numpy(x)).numpy()
    got = own(lambda v: ta.atan2(v[0], v[1]))(np.stack([y, x]))
    keep = _normal(want)
    d = ulps(got[keep], want[keep])
    assert d.max() <= 2, (y[keep][np.argmax(d)], x[keep][np.argmax(d)], d.max())


def test_own_atan2_signs_zeros_infinities_and_nans_are_c99s():
    special = np.float32(
        [0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 1e-30, -3e38, 2e-38, -1.5e-38, 1.3e-38]
    )  # tiny normals: no flushed comparison
    y, x = (v.ravel() for v in np.meshgrid(special, special))
    want = torch.atan2(torch.from_numpy(y), torch.from_numpy(x)).numpy()
    got = own(lambda v: ta.atan2(v[0], v[1]))(np.stack([y, x]))
    assert (ulps(got, want) <= 1).all()  # CPU's atan2f(1, 1) is an ulp below pi/4 rounded; ours is pi/4
    number = ~np.isnan(want)  # a NaN's sign bit is not C99's to give
    assert np.array_equal(np.signbit(got[number]), np.signbit(want[number])), list(zip(y, x, got, want))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_own_half_atan_and_atan2_are_cpus(dtype):
    """Computed in float32 and rounded once, as CPU's kernels: CPU's bits (an ulp of float32 may move
    a rounding: at most one half-ulp apart)."""
    rng = np.random.default_rng(2)
    y = torch.from_numpy(magnitudes(rng, 4_000)).clamp(-6e4, 6e4).to(dtype)
    x = torch.from_numpy(rng.permutation(magnitudes(rng, 4_000))).clamp(-6e4, 6e4).to(dtype)
    jdt = {torch.float16: jnp.float16, torch.bfloat16: jnp.bfloat16}[dtype]
    half_ulp = 2.0**-10 if dtype == torch.float16 else 2.0**-7
    for got, want in (
        (own(ta.atan)(jnp.asarray(y.float().numpy()).astype(jdt)), torch.atan(y)),
        (
            own(lambda v: ta.atan2(v[0], v[1]))(jnp.asarray(torch.stack([y, x]).float().numpy()).astype(jdt)),
            torch.atan2(y, x),
        ),
    ):
        got, want = np.asarray(got).astype(np.float32), want.float().numpy()
        assert (np.abs(got - want) <= half_ulp * np.abs(want) + 1e-30).all()


def test_own_atan2_gradient_is_the_derivative():
    y, x = jnp.asarray([0.3, -1.7, 2.5, 0.0], jnp.float32), jnp.asarray([1.0, 0.5, -2.0, -3.0], jnp.float32)
    with tm.forced("own"):
        gy, gx = jax.jit(jax.vmap(jax.grad(ta.atan2, argnums=(0, 1))))(y, x)
        ga = jax.jit(jax.vmap(jax.grad(ta.atan)))(y)
    r2 = np.asarray(x * x + y * y)
    np.testing.assert_allclose(gy, np.asarray(x) / r2, rtol=1e-6)
    np.testing.assert_allclose(gx, -np.asarray(y) / r2, rtol=1e-6)
    np.testing.assert_allclose(ga, 1 / (1 + np.asarray(y) ** 2), rtol=1e-6)


def test_kernels_take_jaxdevs_atan2_where_chosen_and_xlas_on_cpu():
    """atan2, atan, angle and complex64 log trace jaxdev's functions under own (no atan2 primitive:
    what a TPU computes inaccurately) and XLA's under auto on XLA's CPU backend."""
    from jaxdev.ops.kit import transcendentals_complex as tc

    z = jnp.asarray([1 + 2j, -3 - 0.5j], jnp.complex64)
    r = jnp.asarray([0.5, -2.0], jnp.float32)
    programs = {  # a fresh function each trace: JAX caches a traced function's program
        "atan2": lambda: jax.make_jaxpr(lambda a, b: ta.atan2(a, b))(r, r[::-1]),
        "atan": lambda: jax.make_jaxpr(lambda a: ta.atan(a))(r),
        "log": lambda: jax.make_jaxpr(lambda a: tc.log(a))(z),  # complex64's
    }
    for name, program in programs.items():
        with tm.forced("own"):
            text = str(program())
        assert " atan2 " not in text and " atan " not in text, name
        if jax.default_backend() == "cpu":
            with tm.forced("auto"):
                assert f" {name} " in str(program()), name  # XLA's own primitive


_DEVICE_OPS = """
import torch, jaxdev
g = torch.Generator().manual_seed(0)
z = torch.randn(64, 3, dtype=torch.complex64, generator=g) * 3
z[0] = torch.tensor([2e-38 + 0j, 0j, -1.5e-38 + 1.3e-38j])  # tiny normal parts (subnormals flush)
torch.testing.assert_close(torch.angle(z.to("jax")).cpu(), torch.angle(z))
torch.testing.assert_close(torch.logcumsumexp(z.to("jax"), 0).cpu(), torch.logcumsumexp(z, 0))
y, x = z.real.contiguous(), z.imag.contiguous()
for a, b in ((y, x), (x, y)):
    torch.testing.assert_close(torch.atan2(a.to("jax"), b.to("jax")).cpu(), torch.atan2(a, b))
torch.testing.assert_close(torch.atan(y.to("jax")).cpu(), torch.atan(y))
print("ok")
"""


@pytest.mark.parametrize("math_mode", ["own", "auto"])
def test_angle_atan2_and_complex_logcumsumexp_on_the_device_are_cpus(math_mode):
    """Through the dispatcher, in a fresh process (a kernel keeps the functions it was traced with)."""
    proc = run_python(_DEVICE_OPS, env={"JAXDEV_MATH": math_mode}, timeout=300)
    assert proc.returncode == 0 and "ok" in proc.stdout, describe_exit(proc)
