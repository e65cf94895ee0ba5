"""jaxdev's float32 sin, cos, tan (jaxdev/ops/kit/transcendentals_trig.py), the digamma and trigamma
built on them (jaxdev/ops/special/digamma.py, zeta.py), measured here on CPU by forcing them on
(JAXDEV_MATH=own) against torch's CPU results: what a TPU's kernels use by default, where XLA's sin
and tan are accurate absolutely but not relative to a small result near a multiple of pi (the TPU's
polygamma n=0/1 was 9.05 relative off next to a pole). On XLA's CPU backend XLA's functions stay."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch
from test_transcendentals import own, ulps

from jaxdev.ops.kit import cpu_numerics
from jaxdev.ops.kit import transcendentals as tm
from jaxdev.ops.kit import transcendentals_trig as tt
from jaxdev.ops.special import functions, zeta

_TPU_FACT = "XLA's TPU sin/tan are accurate absolutely, not relative to a small result near a multiple of pi"


def angles() -> np.ndarray:
    """100,000 float32 angles: uniform on [-1e4, 1e4], log-uniform magnitudes to 1e5, k pi/2 plus a
    tiny offset, pi x for x next to an integer (trigamma's reflection), and the edge cases."""
    rng = np.random.default_rng(0)
    n = 25_000
    uniform = rng.uniform(-1e4, 1e4, n)
    log_uniform = np.exp(rng.uniform(math.log(1e-30), math.log(1e5), n)) * rng.choice([-1.0, 1.0], n)
    quarter_turns = rng.integers(-60_000, 60_000, n) * (np.pi / 2) + rng.uniform(-1e-3, 1e-3, n)
    near = rng.integers(-30, 30, n) + rng.choice([1e-3, 1e-4, 1e-5, -1e-5, 3e-6], n)
    pi_x = np.float32(np.pi) * near.astype(np.float32)  # a float32 product, as trigamma's
    edges = [0.0, -0.0, math.inf, -math.inf, math.nan, 1e-8, -1e-37, 0.7853982, 2.6e7, -3.4e38, 1e30]
    return np.concatenate([uniform, log_uniform, quarter_turns, pi_x, edges]).astype(np.float32)


@pytest.mark.tpu_fact(_TPU_FACT)
@pytest.mark.parametrize("name", ["sin", "cos", "tan"])
def test_own_trig_within_2_ulps_of_cpus(name):
    """Within 2 ulps of torch's float32 result (measured: sin and cos 1, tan 2), relative to the
    result however close x lies to a multiple of pi/2."""
    x = angles()
    want = getattr(torch, name)(torch.from_numpy(x)).numpy()
    got = own(getattr(tm, name))(x)
    normal = ~((np.abs(want) < 2.0**-126) & (want != 0))
    d = ulps(got[normal], want[normal])
    # tan is sin / cos: one more ulp where the platform's division is not IEEE's (a v5e: 3 at -8828.64)
    bound = 3 if name == "tan" and not cpu_numerics.division_ieee() else 2
    assert d.max() <= bound, (name, x[normal][np.argmax(d)], d.max())
    assert np.array_equal(np.signbit(got[x == 0]), np.signbit(want[x == 0]))  # sin(-0) = -0


def test_own_trig_gradients_are_the_derivatives():
    x = jnp.asarray([0.3, 1.7, -2.5, 100.0], jnp.float32)
    for fn, derivative in ((tm.sin, np.cos), (tm.cos, lambda v: -np.sin(v)), (tm.tan, lambda v: 1 / np.cos(v) ** 2)):
        with tm.forced("own"):
            grad = jax.jit(jax.vmap(jax.grad(lambda v, f=fn: f(v))))(x)
        np.testing.assert_allclose(np.asarray(grad), derivative(np.asarray(x, np.float64)), rtol=2e-6)


@pytest.mark.cpu_fact("the default keeps XLA's functions on the CPU backend only")
def test_the_cpu_backend_keeps_xlas_trig_digamma_and_trigamma():
    """On XLA's CPU backend the default traces XLA's own functions (the coverage baseline's bits)."""
    x = jnp.linspace(-3.3, 4, 8, dtype=jnp.float32)
    pairs = [(tm.sin, jnp.sin), (tm.cos, jnp.cos), (tm.tan, jnp.tan)]
    with tm.forced("auto"):
        for kit, xla in pairs:
            assert str(jax.make_jaxpr(kit)(x)) == str(jax.make_jaxpr(xla)(x))
        assert "digamma" in str(jax.make_jaxpr(functions.digamma)(x))
        assert " sin " in str(jax.make_jaxpr(zeta._trigamma)(x))


def pole_neighbours() -> np.ndarray:
    """x = -k + 1e-3 .. 1e-5 (and below -k) for k = 0..9, and ordinary values."""
    offsets = np.array([1e-3, 3e-4, 1e-4, 3e-5, 1e-5, -1e-3, -1e-4, -1e-5])
    near = (-np.arange(10)[:, None] + offsets[None, :]).ravel()
    rng = np.random.default_rng(1)
    spread = np.concatenate([rng.uniform(-30, 30, 4000), np.exp(rng.uniform(-30, 20, 2000))])
    edges = [0.0, -0.0, -1.0, -7.0, 10.0, 1e-30, 1e18, math.inf, -math.inf, math.nan, -1e6 - 0.5]
    return np.concatenate([near, spread, edges]).astype(np.float32)


_POLYGAMMA = {
    "digamma": (functions.digamma, torch.digamma),
    "trigamma": (zeta._trigamma, lambda t: torch.polygamma(1, t)),
}


@pytest.fixture
def reductions(monkeypatch):
    """How many times jaxdev's sin/cos polynomials were traced (transcendentals_trig.sin_cos_reduced)."""
    calls = []
    real = tt.sin_cos_reduced
    monkeypatch.setattr(tt, "sin_cos_reduced", lambda hi, lo: calls.append(1) or real(hi, lo))
    return calls


@pytest.mark.tpu_fact(_TPU_FACT)
@pytest.mark.parametrize("name", sorted(_POLYGAMMA))
def test_digamma_and_trigamma_near_poles_within_opinfos_tolerance(name, reductions):
    """float32 within OpInfo's tolerance (rtol 1.3e-6, atol 1e-5) of CPU's next to every pole; the
    traced program takes jaxdev's sin (tan) and none of XLA's tan, log or digamma (what a TPU computes
    inaccurately; XLA's sin stays only past the reduction's range, |x| >= 2.6e7)."""
    fn, ref = _POLYGAMMA[name]
    x = pole_neighbours()
    want = ref(torch.from_numpy(x)).numpy()
    got = own(fn)(x)
    np.testing.assert_allclose(got, want, rtol=1.3e-6, atol=1e-5, equal_nan=True)
    with tm.forced("own"):
        program = str(jax.make_jaxpr(fn)(jnp.asarray(x)))
    assert reductions
    for primitive in ("tan", "log", "digamma"):
        assert f" {primitive} " not in program, primitive


@pytest.mark.tpu_fact(_TPU_FACT)
@pytest.mark.parametrize("name", sorted(_POLYGAMMA))
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_digamma_and_trigamma_are_cpus(name, dtype):
    """Computed in float32 and rounded once, as CPU's kernels: CPU's bits next to the poles."""
    fn, ref = _POLYGAMMA[name]
    t = torch.from_numpy(pole_neighbours()).to(dtype)
    jdt = {torch.float16: jnp.float16, torch.bfloat16: jnp.bfloat16}[dtype]
    want = ref(t).float().numpy()

    def in_half(v):  # polygamma's kernel widens halves itself (with_order); digamma's own path does
        return fn(v.astype(jnp.float32)).astype(jdt) if name == "trigamma" else fn(v)

    got = own(in_half)(jnp.asarray(t.float().numpy()).astype(jdt)).astype(np.float32)
    if cpu_numerics.division_ieee():
        np.testing.assert_allclose(got, want, rtol=0, atol=0, equal_nan=True)
    else:  # the float32 value lands an ulp off where division is not IEEE's; a rounding may then move
        ulp = np.spacing(np.abs(want)) * (
            2.0**13 if dtype == torch.float16 else 2.0**16
        )  # the half's ulp  # (a v5e: 4 of 6,091, one half-ulp)
        near = (got == want) | (np.abs(got - want) <= ulp)  # equal first: inf - inf is NaN (trigamma at poles)
        assert near[~np.isnan(want)].all() and np.array_equal(np.isnan(got), np.isnan(want))


def complex_values() -> np.ndarray:
    rng = np.random.default_rng(2)
    n = 20_000
    box = rng.uniform(-10, 10, n) + 1j * rng.uniform(-10, 10, n)
    polar = np.exp(rng.uniform(-20, 20, n)) * np.exp(1j * rng.uniform(-np.pi, np.pi, n))
    unit = np.exp(1j * rng.uniform(-np.pi, np.pi, 2000)) * (1 + rng.uniform(-1e-4, 1e-4, 2000))
    return np.concatenate([box, polar, unit]).astype(np.complex64)


@pytest.mark.tpu_fact("XLA's TPU complex functions are built on its real exp, log, sin and cos")
@pytest.mark.parametrize("name", ["exp", "log", "sin", "cos", "sinh", "cosh"])
def test_own_complex64_within_twice_cpus_distance(name, reductions):
    """complex64 on jaxdev's float32 functions: within 2x CPU's own distance from the complex128
    result (relative to |result|, floored at float32's epsilon; measured: 1.1-1.6x)."""
    from jaxdev.ops.kit import transcendentals_complex as tc

    z = complex_values()
    with np.errstate(all="ignore"):
        exact = getattr(np, name)(z.astype(np.complex128))
    cpu = getattr(torch, name)(torch.from_numpy(z)).numpy()
    got = own(getattr(tc, name))(z)
    kept = np.isfinite(exact) & (np.abs(exact) < 3e38) & (np.abs(exact) > 1e-30)  # no overflow, no flushing

    def distance(w):
        return np.abs(w[kept] - exact[kept]) / np.abs(exact[kept])

    ratio = distance(got) / np.maximum(distance(cpu), np.finfo(np.float32).eps)
    assert ratio.max() <= 2, (name, z[kept][np.argmax(ratio)], ratio.max())
    assert reductions or name == "log"  # exp, sin ... took jaxdev's sin/cos (log: atan2 and own log)


_KERNELS = r"""
import numpy as np, torch
import jaxdev
from jaxdev.ops.kit import transcendentals as tm, transcendentals_trig as tt
assert tm.mode() == "own"
calls = []
real = tt.sin_cos_reduced
tt.sin_cos_reduced = lambda hi, lo: calls.append(1) or real(hi, lo)
rng = np.random.default_rng(0)
x = torch.from_numpy(np.concatenate([rng.uniform(-30, 30, 500), -np.arange(10) + 1e-4]).astype(np.float32))
z = torch.from_numpy((rng.uniform(-5, 5, (8, 64)) + 1j * rng.uniform(-5, 5, (8, 64))).astype(np.complex64))
ops = {
    "sin": (torch.sin, x), "cos": (torch.cos, x), "tan": (torch.tan, x),
    "digamma": (torch.digamma, x), "trigamma": (lambda t: torch.polygamma(1, t), x),
    "csin": (torch.sin, z), "ccos": (torch.cos, z), "cexp": (torch.exp, z), "clog": (torch.log, z),
    "csinh": (torch.sinh, z), "ccosh": (torch.cosh, z),
}
for name, (fn, v) in ops.items():
    before = len(calls)
    want = fn(v)
    got = fn(v.to("jax")).cpu()
    worst = ((got - want).abs() / want.abs().clamp_min(1e-6)).max().item()
    print(name, len(calls) - before, worst)
"""


@pytest.mark.tpu_fact(_TPU_FACT)
def test_kernels_take_jaxdevs_trig_and_complex_functions():
    """The aten kernels (sin, cos, tan, digamma, polygamma, complex64 sin ... logcumsumexp) trace
    jaxdev's sin/cos polynomials under JAXDEV_MATH=own, and stay near CPU's results."""
    from jaxdev_testing import run_python

    proc = run_python(_KERNELS, env={"JAXDEV_MATH": "own"}, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = {
        line.split()[0]: (int(line.split()[1]), float(line.split()[2])) for line in proc.stdout.strip().splitlines()
    }
    assert len(rows) == 11, rows
    traced = {name for name, (calls, _) in rows.items() if calls == 0 and name != "clog"}
    assert not traced, f"not through transcendentals_trig: {sorted(traced)}"
    assert max(worst for _, worst in rows.values()) <= 2e-5, rows


@pytest.mark.tpu_fact("float64 is emulated: logcumsumexp's complex64 running value stays complex64 on a TPU")
def test_complex64_logcumsumexp_as_a_tpu_runs_it(reductions):
    """logcumsumexp's complex path with a complex64 running value (a TPU's: no complex128 there)
    takes jaxdev's exp, sin and cos, and is as near CPU's (a complex128 running value) as XLA's CPU
    functions are with that complex64 running value (5.8e-5 relative off on the chip with XLA's): the
    running sum's own rounding, where it passes near 0, is the same for both."""
    from jaxdev.ops import scans

    rng = np.random.default_rng(3)
    z = (rng.uniform(-5, 5, (4, 200)) + 1j * rng.uniform(-5, 5, (4, 200))).astype(np.complex64)
    want = torch.logcumsumexp(torch.from_numpy(z), 1).numpy()
    out = {}
    for mode in ("own", "fast"):
        with tm.forced(mode):
            body = scans._logcumsumexp.__wrapped__(1, jnp.dtype(jnp.complex64))  # the factory: traced anew
            out[mode] = np.asarray(jax.jit(body)(z))
    assert reductions
    errors = {mode: np.abs(got - want) / np.abs(want) for mode, got in out.items()}
    assert np.all(errors["own"] <= 2 * errors["fast"] + 4 * np.finfo(np.float32).eps), errors["own"].max()


@pytest.mark.tpu_fact("XLA's TPU complex functions are built on its real exp, log, sin and cos")
def test_own_complex64_log_near_the_unit_circle_part_by_part():
    """log z's real part, log|z|, is as small as |z| - 1 near the unit circle: within 2x CPU's distance
    from the complex128 result relative to that part itself (m^2 + n^2 - 1 as exact pairs; with the
    squares rounded it was 2.7e-5 relative off at |z| = 0.999, n = 0.53)."""
    from jaxdev.ops.kit import transcendentals_complex as tc

    rng = np.random.default_rng(3)
    angle, radius = rng.uniform(-np.pi, np.pi, 20_000), 1 + rng.uniform(-1e-2, 1e-2, 20_000)
    z = (radius * np.exp(1j * angle)).astype(np.complex64)
    exact = np.log(z.astype(np.complex128)).real
    cpu = torch.log(torch.from_numpy(z)).numpy().real
    got = own(tc.log)(z).real
    kept = np.abs(exact) > 1e-30

    def distance(w):
        return np.abs(w[kept] - exact[kept]) / np.abs(exact[kept])

    ratio = distance(got) / np.maximum(distance(cpu), np.finfo(np.float32).eps)
    assert ratio.max() <= 2, (z[kept][np.argmax(ratio)], ratio.max())
