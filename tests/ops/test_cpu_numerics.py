"""jaxdev/ops/cpu_numerics.py: what XLA keeps of a program's rounding (the facts round_to is built on),
the rounding, barrier, polynomial and CPU loop helpers, against numpy's and CPU PyTorch's answers."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
import torch

import jaxdev  # noqa: F401
from jaxdev.ops import cpu_numerics as cn

CPU = jax.devices("cpu")[0]
RNG = np.random.RandomState(0)


def _on_cpu(x):
    return jax.device_put(jnp.asarray(x), CPU)


def _both(fn, *args):
    """fn run eagerly (one program per operation) and as one jitted program."""
    return fn(*args), jax.jit(fn)(*args)


def _single_rounding(x: np.ndarray, dtype) -> np.ndarray:
    """float64 values rounded once to `dtype`'s grid (ties to even, subnormals kept), exactly."""
    info = ml_dtypes.finfo(dtype)
    e = np.floor(np.log2(np.maximum(np.abs(x), float(info.smallest_normal))))
    ulp = np.exp2(e - info.nmant)
    return np.round(x / ulp) * ulp


def _bits_equal(a, b) -> bool:
    a, b = np.asarray(a), np.asarray(b)
    return a.dtype == b.dtype and a.tobytes() == b.tobytes()


# --- what XLA keeps ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "wide,narrow", [(np.float32, np.float16), (np.float32, ml_dtypes.bfloat16), (np.float64, np.float32)]
)
def test_a_written_round_trip_is_kept_under_jit_and_eagerly(wide, narrow):
    """x.astype(narrow).astype(wide), alone and between operations, is the correctly rounded value in
    one program as in eager ops (creation.py said XLA dropped it; it does not: see the next test)."""
    x = RNG.uniform(-4, 4, 20000).astype(wide)
    y = RNG.uniform(-4, 4, 20000).astype(wide)

    def trip(v):
        return v.astype(narrow).astype(wide)

    def chain(a, b):
        return trip(trip(a * b) + a)

    expected = np.asarray(x).astype(narrow).astype(wide)
    for result in _both(trip, _on_cpu(x)):
        assert _bits_equal(result, expected)
    eager, jitted = _both(chain, _on_cpu(x), _on_cpu(y))
    assert _bits_equal(eager, jitted)
    product = (x * y).astype(narrow).astype(wide)
    assert _bits_equal(eager, (product + x).astype(narrow).astype(wide))


def test_what_xla_drops_is_a_bfloat16_operations_own_rounding():
    """A bfloat16 product that the same program converts to float32 keeps float32's precision under jit
    (XLA computes bfloat16 in float32 and removes the rounding between); eagerly it is rounded. Computing
    in float32 with round_to gives the rounded value in both."""
    a = _on_cpu(RNG.uniform(1, 2, 4096).astype(ml_dtypes.bfloat16))
    b = _on_cpu(RNG.uniform(1, 2, 4096).astype(ml_dtypes.bfloat16))
    eager, jitted = _both(lambda p, q: (p * q).astype(jnp.float32), a, b)
    assert not _bits_equal(eager, jitted)
    r = cn.round_to(jnp.bfloat16)
    eager_r, jitted_r = _both(lambda p, q: r(p.astype(jnp.float32) * q.astype(jnp.float32)), a, b)
    assert _bits_equal(eager_r, jitted_r) and _bits_equal(eager_r, eager)


@pytest.mark.parametrize("narrow", [ml_dtypes.bfloat16, np.float16])
def test_xla_converts_float64_to_a_half_through_float32_and_round_to_rounds_once(narrow):
    """Double rounding: a float64 just above a float32 value that is a half's tie rounds to that float32
    first, then to even; once rounded, it goes up. round_to takes float64 to the half in one rounding."""
    base = RNG.uniform(1, 2, 20000)
    eps = float(ml_dtypes.finfo(narrow).eps)
    x = np.concatenate([base, _single_rounding(base, narrow) * (1 + eps / 2 * (1 + 1e-12))])
    twice = np.asarray(jax.jit(lambda v: v.astype(narrow).astype(jnp.float64))(_on_cpu(x)))
    assert not np.array_equal(twice, _single_rounding(x, narrow))
    for result in _both(cn.round_to(narrow), _on_cpu(x)):
        assert _bits_equal(result, _single_rounding(x, narrow))


def test_xla_flushes_float32_subnormals_from_float64_and_round_to_keeps_them():
    x = np.array([1e-40, -3.3e-42, 1.4e-45, 2e-38, 1.5], np.float64)
    flushed = np.asarray(jax.jit(lambda v: v.astype(jnp.float32))(_on_cpu(x)))
    assert flushed[0] == 0
    for result in _both(cn.round_to(jnp.float32), _on_cpu(x)):
        assert _bits_equal(result, _single_rounding(x, np.float32))
        assert result[0] != 0


def test_round_to_a_values_own_dtype():
    """Halves are pinned (reduce_precision leaves a half value as it is); float32/float64 untouched."""
    h = _on_cpu(RNG.uniform(-4, 4, 1000).astype(np.float16))
    for result in _both(cn.round_to(jnp.float16), h):
        assert _bits_equal(result, h)
    f = _on_cpu(np.array([1e-40, 1.0], np.float32))
    assert cn.round_to(jnp.float32)(f) is f


# --- barriers ----------------------------------------------------------------------------------------


def test_a_division_by_a_constant_needs_the_barrier():
    """XLA turns x / 3 into x * (1/3) inside a program, an ulp off for some x; divide_by keeps it."""
    x = _on_cpu(RNG.uniform(-100, 100, 20000).astype(np.float32))
    true = np.asarray(x) / np.float32(3)
    assert not _bits_equal(jax.jit(lambda v: v / 3.0)(x), true)
    for result in _both(lambda v: cn.divide_by(v, 3.0), x):
        assert _bits_equal(result, true)


def test_one_over_sqrt_needs_the_barrier():
    """1 / sqrt(v) becomes rsqrt (1 ulp off for about a third of float32 inputs); sqrt_divisor keeps
    the rounded square root and the rounded division CPU does."""
    v = _on_cpu(RNG.uniform(0.1, 100, 20000).astype(np.float32))
    true = np.float32(1) / np.sqrt(np.asarray(v))
    assert not _bits_equal(jax.jit(lambda a: 1.0 / jnp.sqrt(a))(v), true)
    assert _bits_equal(jax.jit(lambda a: 1.0 / cn.sqrt_divisor(a))(v), true)


def test_a_product_with_a_bool_keeps_inf_times_zero():
    x = _on_cpu(np.array([np.inf, 1.0, -np.inf], np.float32))
    m = _on_cpu(np.array([False, True, False]))
    result = jax.jit(lambda a, b: (lambda p, q: p * q)(*cn.opaque((a, b.astype(a.dtype)))))(x, m)
    assert np.isnan(result[0]) and result[1] == 1 and np.isnan(result[2])


def test_widened_rounds_a_float64_evaluation_once():
    x = _on_cpu(RNG.uniform(-80, 80, 20000).astype(np.float32))
    expected = np.exp(np.asarray(x, np.float64)).astype(np.float32)
    assert _bits_equal(jax.jit(cn.exp_wide)(x), expected)
    d = _on_cpu(np.asarray(x, np.float64))
    assert _bits_equal(cn.exp_wide(d), jnp.exp(d))


# --- polynomials -------------------------------------------------------------------------------------


def test_horner_in_cpu_order():
    c = (1.5, -2.25, 0.125, 3.0)
    z = _on_cpu(np.array([0.5, -3.0, 2.0, np.inf, -np.inf], np.float64))
    polevl = cn.horner(c, z)
    expected = ((1.5 * np.asarray(z) - 2.25) * np.asarray(z) + 0.125) * np.asarray(z) + 3.0
    assert _bits_equal(polevl, expected)  # Cephes: from the first coefficient, an infinity stays one
    from_zero = np.asarray(cn.horner(c, z, from_zero=True))
    assert _bits_equal(from_zero[:3], expected[:3]) and np.isnan(from_zero[3:]).all()  # 0 * inf


def test_chebyshev_rounded_by_identity_is_the_plain_recurrence():
    coefficients = (-4.4e-18, 3.3e-17, 1.7e-1, -3.0e-1, 6.8e-1)
    y = _on_cpu(RNG.uniform(-2, 2, 1000).astype(np.float32))
    plain = cn.chebyshev(coefficients, y)
    rounded = cn.chebyshev(coefficients, y, lambda v: v)
    assert all(_bits_equal(a, b) for a, b in zip(plain, rounded))
    b0, b1, b2 = np.zeros(1000, np.float32), np.zeros(1000, np.float32), np.zeros(1000, np.float32)
    b0[:] = np.float32(coefficients[0])
    yn = np.asarray(y)
    for c in coefficients[1:]:
        b2, b1 = b1, b0
        b0 = yn * b1 - b2 + np.float32(c)
    assert _bits_equal(plain[0], b0) and _bits_equal(plain[1], b2)


# --- CPU's loop model --------------------------------------------------------------------------------


def test_scalar_lanes_of_a_short_run_and_a_strided_input():
    lanes = np.asarray(cn.scalar_lanes((63,), (1,), 32, 1))
    assert not lanes[:32].any() and lanes[32:].all()
    assert np.asarray(cn.scalar_lanes((10,), (3,), 32, 1)).all()


def test_scalar_lanes_follow_the_thread_chunks():
    n = 3 * cn.GRAIN_SIZE
    one = np.asarray(cn.scalar_lanes((n,), (1,), 32, 1))
    assert one.sum() == n % 32
    three = np.asarray(cn.scalar_lanes((n,), (1,), 32, 3))
    assert three.sum() == 3 * (cn.GRAIN_SIZE % 32)


@pytest.mark.parametrize("threads", [1, 3])
def test_half_i0e_depends_on_the_thread_count_as_cpus_does(threads):
    """Which elements CPU computes with its scalar op depends on torch.get_num_threads(); jaxdev reads
    the same number (cpu_threads), so it matches this process's CPU under each setting."""
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        assert cn.cpu_threads() == threads
        x = (torch.rand(3 * cn.GRAIN_SIZE + 50, generator=torch.Generator().manual_seed(1)) * 30).to(torch.bfloat16)
        expected = torch.special.i0e(x)
        got = torch.special.i0e(x.to("jax")).cpu()
    finally:
        torch.set_num_threads(before)
    assert torch.equal(got.view(torch.int16), expected.view(torch.int16))
