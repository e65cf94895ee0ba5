"""JAXDEV_MATH=near (jaxdev/ops/kit/math_mode.py): jaxdev's own float32 functions, the platform's
arithmetic as it is. Under the emulated chip (tests/tpu_emulation.py: its facts, its division 2 ulps
off and 200 past float32's limits, its sqrt 2 ulps off) near's quotients stay within the platform's
2 ulps everywhere (a divisor near float32's limits is scaled into range first), its square roots and
multiply-adds are the platform's, and its division's program is a fraction of auto's correction."""

from __future__ import annotations

import contextlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch
from jaxdev_testing import JAX

from jaxdev.ops.kit import cpu_arithmetic, division, math_mode


@contextlib.contextmanager
def _math(value):
    """JAXDEV_MATH=value for what is traced inside (jaxdev's kernels traced afresh on both sides)."""
    jax.clear_caches()
    try:
        with math_mode.forced(value):
            yield
    finally:
        jax.clear_caches()


def _ulps(got, want):
    got, want = np.asarray(got, np.float32), np.asarray(want, np.float32)
    return np.abs(got.view(np.int32).astype(np.int64) - want.view(np.int32).astype(np.int64))


def _operands(n=20_000, seed=0):
    rng = np.random.default_rng(seed)
    a = (rng.uniform(0.5, 2, n) * np.exp2(rng.integers(-20, 20, n))).astype(np.float32)
    b = (rng.uniform(0.5, 2, n) * np.exp2(rng.integers(-20, 20, n))).astype(np.float32)
    b[: n // 4] *= np.float32(2.0**105)  # a quarter of the divisors past 2**100: the chip's reciprocal is far off there
    b[n // 4 : n // 2] *= np.float32(2.0**-105)
    return a, b


@pytest.mark.tpu_fact("float32 division is approximate on a TPU (7.5e7 ulps for divisors near float32's limits)")
def test_near_divides_within_the_platforms_ulps_everywhere(tpu_policy, tpu_division):
    a, b = _operands()
    want = torch.from_numpy(a) / torch.from_numpy(b)
    with _math("near"):
        got = (torch.from_numpy(a).to(JAX) / torch.from_numpy(b).to(JAX)).cpu()
        plain = jax.jit(lambda x, y: x / y)(a, b)
    normal = np.abs(want.numpy()) >= np.float32(2.0**-126)  # XLA flushes subnormal results (a TPU too)
    in_range = np.arange(len(a)) >= len(a) // 2
    # the platform's own bound in range: the emulation's 2-4 ulps here, a v5e's 2 (its sample may show less)
    bound = max(int(_ulps(plain, want.numpy())[in_range & normal].max()), 2)
    assert bound <= 4
    assert _ulps(got, want)[normal].max() <= bound
    assert _ulps(plain, want.numpy())[~in_range & normal].max() > 100  # far off there unscaled
    with _math("auto"):
        exact = (torch.from_numpy(a).to(JAX) / torch.from_numpy(b).to(JAX)).cpu()
    assert _ulps(exact, want)[normal].max() <= 1


@pytest.mark.tpu_fact("float32 division is approximate on a TPU")
def test_near_division_keeps_its_gradient(tpu_policy, tpu_division):
    a, b = _operands(2_000, seed=1)
    with _math("near"):
        da, db = jax.grad(lambda x, y: jnp.sum(division.divide(x, y)), argnums=(0, 1))(a, b)
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    for got, want in ((da, 1 / b64), (db, -a64 / (b64 * b64))):
        normal = (np.abs(want) >= 2.0**-126) & (np.abs(want) < 2.0**127)  # float32's normal range
        assert normal.sum() >= 1_000  # the in-range half at least
        np.testing.assert_allclose(np.asarray(got)[normal], want[normal], rtol=2e-6)


@pytest.mark.tpu_fact("float32 sqrt is not IEEE's on a TPU")
def test_near_takes_the_platforms_sqrt(tpu_policy, tpu_sqrt):
    x = np.random.default_rng(2).uniform(0, 100, 20_000).astype(np.float32)
    with _math("near"):
        got = torch.sqrt(torch.from_numpy(x).to(JAX)).cpu().numpy()
        platform = np.asarray(jax.jit(jnp.sqrt)(x))
    with _math("auto"):
        corrected = torch.sqrt(torch.from_numpy(x).to(JAX)).cpu().numpy()
    assert np.array_equal(got.view(np.int32), platform.view(np.int32))
    assert np.array_equal(corrected, np.sqrt(x))
    assert not np.array_equal(got, corrected)  # the emulated 2 ulps show


@pytest.mark.tpu_fact("float32 a * b + c rounds twice on a TPU")
def test_near_leaves_multiply_adds_to_the_platform(tpu_policy):
    with _math("near"):
        assert not cpu_arithmetic.contracts()
    with _math("auto"):
        assert cpu_arithmetic.contracts()


@pytest.mark.tpu_fact("float32 division is approximate on a TPU")
def test_near_division_is_a_small_program(tpu_policy):
    """What near buys: auto's corrected quotient is tens of operations, near's a handful."""
    sizes, ones = {}, jnp.ones(4, jnp.float32)
    for value in ("auto", "near"):
        with _math(value):
            text = jax.jit(division.divide).lower(ones, ones).as_text()
        sizes[value] = sum("stablehlo." in line for line in text.splitlines())
    assert sizes["near"] * 3 < sizes["auto"], sizes  # 23 against 80 operations here


@pytest.mark.skipif(jax.default_backend() != "cpu", reason="near is auto on XLA's CPU backend only")
def test_near_leaves_cpu_programs_as_auto_makes_them():
    """On XLA's CPU backend (IEEE division and sqrt, contracted multiply-adds, XLA's functions chosen)
    near changes no program: the coverage baseline's bits hold under either setting."""
    from jaxdev.ops.kit import transcendentals

    x = jnp.linspace(0.5, 4.0, 8, dtype=jnp.float32)
    fns = {
        "divide": lambda v: division.divide(v, v + 1),
        "sqrt": division.sqrt,
        "fmadd": lambda v: cpu_arithmetic.fmadd(v, v, v),
        "exp": transcendentals.exp,
        "tanh": transcendentals.tanh,
    }
    for name, fn in fns.items():
        texts = {}
        for value in ("auto", "near"):
            with _math(value):
                texts[value] = jax.jit(fn).lower(x).as_text()
        assert texts["auto"] == texts["near"], name


def test_unset_the_setting_is_the_platforms_default(monkeypatch):
    """JAXDEV_MATH unset: near on an accelerator (timed on a TPU v5e: math_settings' docstring), auto on
    XLA's CPU backend; set, what it says."""
    import jax

    monkeypatch.delenv("JAXDEV_MATH", raising=False)
    monkeypatch.setattr(math_mode, "_mode", None)
    monkeypatch.setattr(jax, "default_backend", lambda: "tpu")
    assert math_mode.mode() == "near"
    monkeypatch.setattr(math_mode, "_mode", None)
    monkeypatch.setattr(jax, "default_backend", lambda: "cpu")
    assert math_mode.mode() == "auto"
    monkeypatch.setattr(math_mode, "_mode", None)
    monkeypatch.setenv("JAXDEV_MATH", " Fast ")
    assert math_mode.mode() == "fast"
    monkeypatch.setattr(math_mode, "_mode", None)
    monkeypatch.setenv("JAXDEV_MATH", "exact")
    with pytest.raises(ValueError, match="JAXDEV_MATH must be auto, near, fast or own, not 'exact'"):
        math_mode.mode()
