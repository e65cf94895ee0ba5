"""entr, log_ndtr, ndtri, erfcx, i0, i1 and i1e where jaxdev's own float32 functions are chosen (a TPU):
CPU's float algorithms on the kit's exp/log/erfc and corrected division (jaxdev/ops/special/own_float32.py),
measured here on CPU with the TPU's policy and division emulated (tests/ops/conftest.py), against
CPU torch's float32 results. With jax.scipy's kernels (XLA's functions, every division the platform's)
the same comparison fails; on XLA's CPU backend (JAXDEV_MATH=auto) jax.scipy's bits stay."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import jax.scipy.special as jss
import numpy as np
import pytest
import torch
from jax import lax
from jax._src.interpreters import mlir
from jaxdev_testing import JAX
from test_transcendentals import ulps

from jaxdev.ops.kit import transcendentals as tm
from jaxdev.ops.special import own_float32
from jaxdev.programs import exec_cache

_TPU_FACT = "XLA's float32 log/exp/division on a TPU are approximations"
_TINY = np.finfo(np.float32).tiny
EDGES = [0.0, -0.0, math.inf, -math.inf, math.nan, 1.0, -1.0, 0.5, 2.0, 1e-37, -1e-37, 3.4e38, -3.4e38]


def _spread(lo: float, hi: float, big: float, n: int = 6000, *, seed: int = 0) -> np.ndarray:
    """Uniform on [lo, hi], log-uniform magnitudes 1e-37..`big` with both signs, and EDGES."""
    rng = np.random.default_rng(seed)
    mags = np.exp(rng.uniform(math.log(1e-37), math.log(big), 2 * n))
    signs = rng.choice([-1.0, 1.0], 2 * n)
    return np.concatenate([rng.uniform(lo, hi, n), mags * signs, EDGES]).astype(np.float32)


def _ndtri_arguments() -> np.ndarray:
    """Uniform on [0, 1], log-uniform down to 1e-37 and up to 1 - 6e-8, and out of the domain."""
    rng = np.random.default_rng(1)
    small = np.exp(rng.uniform(math.log(1e-37), 0, 6000))
    near_one = 1 - np.exp(rng.uniform(math.log(6e-8), 0, 6000))
    outside = [-0.5, 1.5, 1.0000001, -1e-30, 0.13533528, 0.8646647, 0.5]
    return np.concatenate([rng.uniform(0, 1, 6000), small, near_one, EDGES, outside]).astype(np.float32)


# name: (torch's function, own_float32's, jax.scipy's, arguments, ulps allowed); measured: entr 2, erfcx 2,
# i0 2, i1 3, i1e 0 (jax.scipy's i1e, which has no exp, 3), log_ndtr 3, ndtri 5. ndtri's tails cancel
# (x - log(x)/x - z P(z)/Q(z)): CPU's result and jaxdev's are each within 3 ulps of float64's truth there,
# 5 apart; a numpy port of CPU's float steps with glibc's logf is 5 from CPU's too.
FUNCTIONS = {
    "log_ndtr": (torch.special.log_ndtr, own_float32.log_ndtr, jss.log_ndtr, _spread(-40, 14, 1e30), 4),
    "entr": (torch.special.entr, own_float32.entr, jss.entr, _spread(0, 10, 3e38), 2),
    "ndtri": (torch.special.ndtri, own_float32.ndtri, jss.ndtri, _ndtri_arguments(), 5),
    "erfcx": (torch.special.erfcx, own_float32.erfcx, jss.erfcx, _spread(-30, 60, 3e38), 4),
    "i0": (torch.special.i0, own_float32.i0, jss.i0, _spread(-92, 92, 3e38), 4),
    "i1": (torch.special.i1, own_float32.i1, jss.i1, _spread(-92, 92, 3e38), 4),
    "i1e": (torch.special.i1e, own_float32.i1e, jss.i1e, _spread(-100, 100, 3e38), 1),
}


# XLA's float32 functions as far off as a TPU v5e's were measured against CPU's (transcendentals.py):
# exp 42 ulps, log 3,084; expm1 and log1p taken as exp and log.
_XLA_ULPS = {lax.exp_p: 42, lax.expm1_p: 42, lax.log_p: 3084, lax.log1p_p: 3084}


def _off_by(ulps_off: int):
    def perturb(y):
        odd = (lax.bitcast_convert_type(y, jnp.int32) & 1) == 1
        off = jnp.float32(ulps_off * 2.0**-23)
        return y * jnp.where(odd, 1 + off, 1 - off)

    return perturb


@pytest.fixture
def tpu_transcendentals(monkeypatch):
    """XLA's float32 exp, expm1, log and log1p lowered as far off as a TPU's (_XLA_ULPS: up for a result
    with odd last bit, down for even); jaxdev's own functions, which are adds, multiplies and bit
    operations, are untouched. Programs traced afresh, jaxdev's executable cache off (its key does not
    see a lowering)."""
    monkeypatch.setenv(exec_cache.ENV, "off")
    saved = {p: mlir._lowerings[p] for p in _XLA_ULPS}

    def lowering_for(entry, ulps_off):
        def lowering(ctx, *args, **params):
            (y,) = entry.rule(ctx, *args, **params)
            aval = ctx.avals_out[0]
            if aval.dtype != np.float32:
                return [y]
            perturb = mlir.lower_fun(_off_by(ulps_off), multiple_results=False)
            return perturb(ctx.replace(primitive=None, avals_in=[aval], avals_out=[aval]), y)

        return lowering

    for p, n in _XLA_ULPS.items():
        mlir.register_lowering(p, lowering_for(saved[p], n))
    jax.clear_caches()
    try:
        yield
    finally:
        mlir._lowerings.update(saved)
        jax.clear_caches()


def _cpu_and_jax(fn, x: np.ndarray):
    cpu = fn(torch.from_numpy(x)).numpy()
    got = fn(torch.from_numpy(x).to(JAX)).cpu().numpy()
    keep = (np.abs(x) >= _TINY) | (x == 0) | ~np.isfinite(x)  # a TPU flushes subnormal arguments
    keep &= (np.abs(cpu) >= _TINY) | (cpu == 0) | ~np.isfinite(cpu)  # and results
    return x[keep], cpu[keep], got[keep]


@pytest.mark.tpu_fact(_TPU_FACT)
@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_within_ulps_of_cpus_where_own_functions_are_chosen(name, tpu_policy, tpu_division, tpu_transcendentals):
    fn, _, _, x, allowed = FUNCTIONS[name]
    x, cpu, got = _cpu_and_jax(fn, x)
    d = ulps(got, cpu)
    worst = int(np.argmax(d))
    print(name, "max ulps", d.max(), "at", x[worst], got[worst], cpu[worst])
    assert d.max() <= allowed, (name, x[worst], got[worst], cpu[worst], d.max())


@pytest.mark.tpu_fact(_TPU_FACT)
@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_jax_scipys_kernel_is_past_those_ulps_there(name, tpu_policy, tpu_division, tpu_transcendentals):
    """What the test above would have measured before own_float32.py: jax.scipy's function, as the
    kernels took it, on the same arguments under the same emulation."""
    fn, _, xla, x, allowed = FUNCTIONS[name]
    x, cpu, _ = _cpu_and_jax(fn, x)
    d = ulps(np.asarray(jax.jit(xla)(jnp.asarray(x))), cpu)
    print(name, "jax.scipy's max ulps", d.max())
    assert d.max() > allowed


# jax.scipy's float32 erfcx and log_ndtr are wrong on CPU too: CPU's algorithm runs on every platform
EVERYWHERE = ("erfcx", "log_ndtr")


@pytest.mark.parametrize("name", sorted(set(FUNCTIONS) - set(EVERYWHERE)))
def test_xla_cpu_backend_keeps_jax_scipys_bits(name):
    """Under JAXDEV_MATH=auto on XLA's CPU backend the kernels are jax.scipy's, bit for bit."""
    if tm.own(jnp.float32):
        pytest.skip("jaxdev's own functions are chosen here")
    fn, _, xla, x, _ = FUNCTIONS[name]
    got = fn(torch.from_numpy(x).to(JAX)).cpu().numpy()
    want = np.asarray(jax.jit(xla)(jnp.asarray(x)))
    assert np.array_equal(got.view(np.int32), want.view(np.int32))


def test_erfcx_and_log_ndtr_float32_are_cpus_on_every_platform():
    """jax.scipy's float32 erfcx is 0 on x in 9.19..9.4 (CPU 0.0610 at 9.2) and its log_ndtr(4.98) 6 %
    off CPU's: both are CPU's algorithm (own_float32.py) wherever they run, within a few ulps of CPU
    on XLA's CPU backend with its own erfc and log."""
    x = torch.tensor([9.2, 9.3, 9.4, 20.0, 4.98, 7.98, -4.98, -20.0, 0.5, -0.5])
    for fn in (torch.special.erfcx, torch.special.log_ndtr):
        torch.testing.assert_close(fn(x.to(JAX)).cpu(), fn(x), rtol=1e-5, atol=0)
    rng = np.random.default_rng(3)
    x = torch.from_numpy(rng.uniform(-9, 30, 50000).astype(np.float32))
    assert ulps(torch.special.erfcx(x.to(JAX)).cpu().numpy(), torch.special.erfcx(x).numpy()).max() <= 4


def _all_finite(dtype: torch.dtype) -> torch.Tensor:
    """Every finite value of a 16-bit float dtype but the subnormal ones (a TPU flushes them)."""
    x = torch.arange(-(2**15), 2**15, dtype=torch.int32).to(torch.int16).view(dtype)
    return x[torch.isfinite(x) & ((x.abs() >= torch.finfo(dtype).tiny) | (x == 0))]


# torch's half-capable functions (CPU has no half ndtri, log_ndtr or erfcx)
HALF_FUNCTIONS = {"entr": torch.special.entr, "i0": torch.special.i0, "i1": torch.special.i1, "i1e": torch.special.i1e}


@pytest.mark.tpu_fact(_TPU_FACT)
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("name", sorted(HALF_FUNCTIONS))
def test_halves_take_the_float32_path_and_round_as_cpu(name, dtype, tpu_policy, tpu_division, tpu_transcendentals):
    """Every finite half value (subnormal arguments and results left out): CPU's half result but where the float32 value lies within a few ulps of a
    half's rounding boundary (measured: none, or at most an ulp of the half in a handful). entr's half
    kernel on CPU rounds log(x) to the half before the product: a float32 entr rounded once differs
    from it in 7,489 of 31,743 positive float16 values."""
    fn = HALF_FUNCTIONS[name]
    x = _all_finite(dtype)
    cpu, got = fn(x), fn(x.to(JAX)).cpu()
    assert got.dtype == dtype
    # bfloat16's i1(x) ~ x/2: a float32 result under float32's smallest normal (flushed) may round up to it
    normal = (cpu.abs() > torch.finfo(dtype).tiny) | (cpu == 0) | ~cpu.isfinite()
    x, cpu, got = x[normal], cpu[normal], got[normal]
    same = (got == cpu) | (got.isnan() & cpu.isnan())
    ulps_off = torch.where(same, 0, (got.view(torch.int16).int() - cpu.view(torch.int16).int()).abs())
    print(name, dtype, "differ", int((~same).sum()), "of", len(x), "by at most", int(ulps_off.max()))
    assert int((~same).sum()) <= len(x) // 1000 and int(ulps_off.max()) <= 1


@pytest.mark.tpu_fact(_TPU_FACT)
@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_backward_matches_cpus(name, tpu_policy):
    """The autograd formulas, on the own forward results: the gradient CPU's within float32's tolerance;
    log_ndtr's, exp(-(result + x^2/2)) / sqrt(2 pi), turns an ulp of the result (~x^2/2, 53 at x = -10)
    into that much relative error: within 3 ulps of it (2e-5)."""
    (x, rtol), fn = _GRADIENT_POINTS[name], FUNCTIONS[name][0]
    x = torch.from_numpy(x)
    want_x = x.clone().requires_grad_()
    fn(want_x).sum().backward()
    got_x = x.to(JAX).requires_grad_()
    fn(got_x).sum().backward()
    torch.testing.assert_close(got_x.grad.cpu(), want_x.grad, rtol=rtol, atol=1e-5)


_GRADIENT_POINTS = {
    "entr": (np.linspace(0.05, 20, 200, dtype=np.float32), 1.3e-6),
    "log_ndtr": (np.linspace(-10, 6, 200, dtype=np.float32), 2e-5),
    "ndtri": (np.linspace(0.001, 0.999, 200, dtype=np.float32), 1.3e-6),
    "erfcx": (np.linspace(-5, 40, 200, dtype=np.float32), 1.3e-6),
    "i0": (np.linspace(-30, 30, 200, dtype=np.float32), 1.3e-6),
    "i1": (np.linspace(-30, 30, 200, dtype=np.float32), 1.3e-6),
    "i1e": (np.linspace(-30, 30, 200, dtype=np.float32), 1.3e-6),
}


def test_erfcx_and_log_ndtr_float64_are_cpus_on_every_platform():
    """jax.scipy's float64 erfcx is 0 at x = 26.557 (CPU 0.0212) and its log_ndtr(7.98) 6 % off CPU's:
    both are CPU's double algorithm (own_float64.py), erfcx within 4 ulps over |x| to 1e4, log_ndtr
    within 1e-12 relative where its result is normal (XLA's double erfc in its far tail is ~500 ulps
    from glibc's there; a subnormal result XLA flushes)."""
    x = torch.tensor([26.557, 20.0, 9.3, 0.5, -0.5, -6.0, -6.2, -26.0, -27.0, 60.0, 6e7], dtype=torch.float64)
    torch.testing.assert_close(torch.special.erfcx(x.to(JAX)).cpu(), torch.special.erfcx(x), rtol=1e-15, atol=0)
    x = torch.tensor([7.98, 4.98, 30.0, 0.0, -0.5, -1.0, -1.5, -40.0, -1e4], dtype=torch.float64)
    torch.testing.assert_close(torch.special.log_ndtr(x.to(JAX)).cpu(), torch.special.log_ndtr(x), rtol=1e-12, atol=0)
    rng = np.random.default_rng(5)
    x = torch.from_numpy(np.concatenate([rng.uniform(-40, 40, 20000), rng.uniform(-1e4, 1e4, 20000)]))
    want, got = torch.special.erfcx(x), torch.special.erfcx(x.to(JAX)).cpu()
    assert torch.equal(want.isinf(), got.isinf())
    finite = want.isfinite()
    spacing = torch.from_numpy(np.spacing(want[finite].abs().numpy()))
    assert ((got[finite] - want[finite]).abs() / spacing).max() <= 4
    want, got = torch.special.log_ndtr(x), torch.special.log_ndtr(x.to(JAX)).cpu()
    normal = want.abs() >= torch.finfo(torch.float64).tiny
    assert ((got[normal] - want[normal]).abs() / want[normal].abs()).max() <= 1e-12


@pytest.mark.tpu_fact("XLA's float32 sin on a TPU is accurate to an absolute error")
def test_sinc_is_cpus_where_the_own_functions_are_chosen(tpu_policy, tpu_division, tpu_functions):
    """sinc was jnp.sinc, XLA's sin inside: 2,005 ulps from CPU under the emulation of the chip's
    functions (benchmarks/tpu_emulated_ulps.py); now CPU's sin(pi x) / (pi x) on the own sin."""
    rng = np.random.default_rng(6)
    x = np.concatenate([rng.uniform(-100, 100, 20000), np.arange(-50, 51) + rng.uniform(-1e-3, 1e-3, 101)])
    x = torch.from_numpy(x.astype(np.float32))
    want, got = torch.sinc(x), torch.sinc(x.to(JAX)).cpu()
    kept = want.abs() >= 2.0**-126
    assert ulps(got[kept].numpy(), want[kept].numpy()).max() <= 2
    assert torch.sinc(torch.zeros(1).to(JAX)).item() == 1.0
