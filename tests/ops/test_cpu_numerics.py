"""jaxdev/ops/kit/cpu_numerics.py: what XLA keeps of a program's rounding (the facts round_to is built on),
the rounding, barrier, polynomial and CPU loop helpers, against numpy's and CPU PyTorch's answers."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time

import half_programs
import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
import torch
from jaxdev_testing import JAX

import jaxdev  # noqa: F401
from jaxdev.ops.kit import capabilities
from jaxdev.ops.kit import cpu_numerics as cn

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


def _bfloat16_pair():
    return (_on_cpu(RNG.uniform(1, 2, 4096).astype(ml_dtypes.bfloat16)) for _ in range(2))


def test_what_xla_drops_is_a_bfloat16_operations_own_rounding():
    """A bfloat16 product that the same program converts to float32 keeps float32's precision under jit
    (XLA computes bfloat16 in float32 and, allowed excess precision, removes the rounding between);
    eagerly it is rounded."""
    half_programs.xla_fact(
        half_programs.xla_flag("xla_allow_excess_precision") not in ("false", "0"),
        "XLA_FLAGS sets --xla_allow_excess_precision=false, so XLA keeps a bfloat16 operation's rounding",
    )
    eager, jitted = _both(lambda p, q: (p * q).astype(jnp.float32), *_bfloat16_pair())
    assert not _bits_equal(eager, jitted)


def test_round_to_keeps_a_bfloat16_products_rounding_under_jit():
    """Computing in float32 with round_to gives the rounded product eagerly and in one program."""
    a, b = _bfloat16_pair()
    r = cn.round_to(jnp.bfloat16)
    eager_r, jitted_r = _both(lambda p, q: r(p.astype(jnp.float32) * q.astype(jnp.float32)), a, b)
    assert _bits_equal(eager_r, jitted_r) and _bits_equal(eager_r, (a * b).astype(jnp.float32))


def _double_rounding_cases(narrow) -> np.ndarray:
    """float64 values, half of them just above a float32 value that is a tie of `narrow`: rounded to
    float32 first they fall on the tie and go to even; rounded once they go up."""
    base = RNG.uniform(1, 2, 20000)
    eps = float(ml_dtypes.finfo(narrow).eps)
    return np.concatenate([base, _single_rounding(base, narrow) * (1 + eps / 2 * (1 + 1e-12))])


@pytest.mark.parametrize("narrow", [ml_dtypes.bfloat16, np.float16])
def test_round_to_takes_float64_to_a_half_in_one_rounding(narrow):
    x = _double_rounding_cases(narrow)
    for result in _both(cn.round_to(narrow), _on_cpu(x)):
        assert _bits_equal(result, _single_rounding(x, narrow))


@pytest.mark.parametrize("narrow", [ml_dtypes.bfloat16, np.float16])
def test_xla_converts_float64_to_a_half_through_float32_without_native_float16(narrow):
    """XLA's one-step float64 -> half convert depends on the CPU: two roundings (through float32, as
    c10::Half(float(d)) rounds) where the CPU has no float64 -> float16 instruction, one with
    AVX512-FP16's vcvtsd2sh. Why dtypes.convert writes the step through float32 (issue 41)."""
    x = _double_rounding_cases(narrow)
    one_step = np.asarray(jax.jit(lambda v: v.astype(narrow).astype(jnp.float64))(_on_cpu(x)))
    if narrow == np.float16:  # bfloat16: XLA's own integer code, two roundings on every CPU
        native = half_programs.native_float16()
        if native is None:  # no /proc/cpuinfo: the fact's precondition read off the result instead
            native = _bits_equal(one_step, _single_rounding(x, narrow))
        half_programs.xla_fact(not native, "this CPU has AVX512-FP16 (vcvtsd2sh rounds float64 to float16 once)")
    assert _bits_equal(one_step, x.astype(np.float32).astype(narrow).astype(np.float64))


_SUBNORMALS = np.array([1e-40, -3.3e-42, 1.4e-45, 2e-38, 1.5], np.float64)


def test_xla_flushes_float32_subnormals_from_float64():
    """XLA:CPU runs its programs with x86's flush-to-zero set (every x86 CPU and ISA level)."""
    flushed = np.asarray(jax.jit(lambda v: v.astype(jnp.float32))(_on_cpu(_SUBNORMALS)))
    assert flushed[0] == 0


@pytest.mark.tpu_fact("XLA's TPU compiler has no float64 reduce_precision (UNIMPLEMENTED in its X64 rewrite)")
@pytest.mark.parametrize("narrow", [ml_dtypes.bfloat16, np.float16, np.float32])
def test_round_to_from_emulated_float64_rounds_once_without_a_float64_reduce_precision(monkeypatch, narrow):
    """Where float64 is float32 pairs, float64 -> half goes through float32 rounded to odd: one rounding
    still (ties just above a float32 tie, negatives, zeros, values past float32's range), and the
    program holds no float64 reduce_precision."""
    here = capabilities.platform()
    facts = {**capabilities.PROGRAM_FACTS.get(here, {}), "float64_emulated": "pretended"}
    monkeypatch.setitem(capabilities.PROGRAM_FACTS, here, facts)
    base = _double_rounding_cases(narrow) if narrow != np.float32 else RNG.uniform(1, 2, 20000)
    x = np.concatenate([base, -base, [0.0, -0.0, 1e39, -1e39, np.inf, -np.inf, 1e-30, -1e-30]])
    fn = cn.round_to(narrow)
    lines = str(jax.make_jaxpr(fn)(_on_cpu(x[:4]))).splitlines()
    assert not [line for line in lines if "reduce_precision" in line and "f64[" in line.split("=")[0]]
    normal = np.abs(x) >= float(ml_dtypes.finfo(narrow).smallest_normal)
    want = np.where(np.isfinite(x) & normal, _single_rounding(np.where(np.isfinite(x), x, 0), narrow), x)
    want = np.where(np.abs(want) > float(ml_dtypes.finfo(narrow).max), np.copysign(np.inf, x), want)
    for result in _both(fn, _on_cpu(x)):
        got = np.asarray(result)
        assert _bits_equal(got[normal], want[normal])


def test_round_to_keeps_float32_subnormals_from_float64():
    if capabilities.fact("float64_emulated"):
        pytest.skip("float64 is float32 pairs here (a TPU), which flushes float32 subnormals")
    x = _SUBNORMALS
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


@pytest.mark.parametrize("narrow", [np.float16, ml_dtypes.bfloat16])
def test_round_to_from_float32_is_the_conversions_rounding_on_every_bit_pattern_class(narrow):
    """float32 -> half by reduce_precision (and the subnormal grid by hand for float16) gives what the
    conversion gives: normals, ties, subnormals of the half and of float32, -0, overflow to inf."""
    bits = RNG.randint(0, 2**32, 200000, dtype=np.uint64).astype(np.uint32).view(np.float32)
    tiny = (RNG.uniform(-1, 1, 100000) * 2.0**-14).astype(np.float32)
    ties = ((np.round(RNG.uniform(-1024, 1024, 20000)) + 0.5) * 2.0**-24).astype(np.float32)
    edges = np.array([-0.0, -1e-9, 65519.99, 65520.0, -65520.0, np.inf, -np.inf, 2.0**-25, 3 * 2.0**-25], np.float32)
    x = np.concatenate([bits[np.isfinite(bits)], tiny, ties, edges])
    with np.errstate(over="ignore"):
        expected = x.astype(narrow).astype(np.float32)
    for result in _both(cn.round_to(narrow), _on_cpu(x)):
        assert _bits_equal(result, expected)


# --- what a program states: the structural check of tests/half_programs.py ---------------------------


def test_the_structural_check_names_each_host_dependent_rounding():
    f16, f32 = jnp.float16, jnp.float32
    h = _on_cpu(np.ones(64, np.float16))
    w = _on_cpu(np.ones(64, np.float32))

    def trip(v):
        return v.astype(f16).astype(f32)

    assert half_programs.program_hazards(lambda a, b: a * b, h, h) == []  # one correctly rounded operation
    found = half_programs.program_hazards(lambda a, b: a * b + a, h, h)
    assert [f.split(":")[0] for f in found] == ["a half product summed"]
    found = half_programs.program_hazards(jnp.exp, h)
    assert [f.split(":")[0] for f in found] == ["arithmetic in a half dtype"]
    found = half_programs.program_hazards(lambda a, b: (trip(a * b) + 1).astype(f16), w, w)
    assert [f.split(":")[0] for f in found] == ["round trip through a half"]
    found = half_programs.program_hazards(lambda v: v.astype(f16), _on_cpu(np.ones(64)))
    assert [f.split(":")[0] for f in found] == ["float64 to a half in one step"]
    r = cn.round_to(f16)
    assert half_programs.program_hazards(lambda a, b: (r(r(a * b) + 1) * 3).astype(f16), w, w) == []
    assert half_programs.program_hazards(lambda a, b: (a.astype(f32) * b.astype(f32) + 1).astype(f16), h, h) == []


def test_the_run_wide_scan_judges_what_jaxdevs_code_wrote():
    """tests/half_scan.py (the pytest plugin of scripts/isa_matrix.sh) reports a hazard with the file of
    jaxdev that wrote it, leaves the same arithmetic written outside jaxdev to its writer, and judges
    nothing compiled under unjudged()."""
    import half_scan

    h = _on_cpu(np.ones(8, np.float16))
    # a new program each run: one from the persistent cache has no stack frames to name a file by
    fresh = 1 + time.time_ns() % 1000 / 1024
    with half_scan.unjudged():  # the hazard is this test's, should the plugin judge this run
        kernel = jax.jit(lambda z: cn.horner((1.5, 2.0, fresh), z)).lower(h).compile().as_text()
    found = half_scan.jaxdev_hazards(kernel)
    assert found and all(
        f.startswith(os.path.join("ops", "kit", "cpu_numerics.py") + ": a half product summed") for f in found
    )
    own = jax.jit(lambda z: (z * 1.5 + 2.0) * z + 3.0).lower(h).compile().as_text()
    assert half_programs.hazards(own) and half_scan.jaxdev_hazards(own) == []


def test_the_hosts_float16_is_read_from_its_flags_and_the_isa_cap(monkeypatch):
    """The precondition of the XLA facts above: native float16 needs AVX512-FP16 and no cap of AVX2 or
    below; the last --flag XLA_FLAGS gives wins, a bare one is true."""
    monkeypatch.setenv("XLA_FLAGS", "--xla_cpu_max_isa=AMX --xla_cpu_max_isa=avx2 --xla_allow_excess_precision")
    assert half_programs.xla_flag("xla_cpu_max_isa") == "avx2" and half_programs.xla_flag("xla_dump_to") is None
    assert half_programs.xla_flag("xla_allow_excess_precision") == "true"
    assert half_programs.native_float16() in (False, None)
    monkeypatch.delenv("XLA_FLAGS")
    try:
        with open("/proc/cpuinfo") as info:
            has = any(line.startswith("flags") and "avx512_fp16" in line.split() for line in info)
    except OSError:
        has = None
    assert half_programs.native_float16() == has


def test_llvm_makes_half_arithmetic_of_float32_between_written_round_trips():
    """The mechanism of issue 41, on any x86 CPU: XLA hands the float32 product and sum between written
    float16 round trips to LLVM, which narrows each into a half operation (no rounding is lost by that
    alone); a CPU with native float16 then computes them in float16 and fuses the pair into an FMA, one
    rounding where CPU rounds twice. round_to's reduce_precision leaves LLVM no half arithmetic, and
    the same written round trips through bfloat16 leave none either (XLA rounds to bfloat16 with
    integer code of its own): why tests/half_programs.py counts float16 round trips only."""
    script = """if True:
        import glob, os, re, sys, jax, jax.numpy as jnp
        from jaxdev.ops.kit.cpu_numerics import round_to
        def written(half):
            def fn(a, b, c):
                trip = lambda v: v.astype(half).astype(jnp.float32)
                return trip(trip(a.astype(jnp.float32) * b) + c).astype(half)
            return fn
        def stated(a, b, c):
            r = round_to(jnp.float16)
            return r(r(a.astype(jnp.float32) * b) + c).astype(jnp.float16)
        for name, fn, half in (("written", written(jnp.float16), jnp.float16), ("stated", stated, jnp.float16),
                               ("bfloat16", written(jnp.bfloat16), jnp.bfloat16)):
            fn.__name__ = name
            w = jnp.ones(256, half)
            jax.jit(fn)(w, w, w)
            ir = [open(p).read() for p in glob.glob(os.path.join(sys.argv[1], f"*jit_{name}*with-opt.ll"))]
            assert ir, name
            arithmetic = re.compile(r"= f(mul|add)( [a-z]+)* (<\\d+ x )?(half|bfloat)")
            print(name, any(arithmetic.search(text) for text in ir))
    """
    with tempfile.TemporaryDirectory() as dump:
        flags = f"{os.environ.get('XLA_FLAGS', '')} --xla_dump_to={dump}"  # an ISA cap given stays
        env = {**os.environ, "XLA_FLAGS": flags, "JAXDEV_CACHE_DIR": "off"}
        out = subprocess.run([sys.executable, "-c", script, dump], env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["written", "True", "stated", "False", "bfloat16", "False"]


# --- barriers ----------------------------------------------------------------------------------------


def _simplifier_runs() -> None:
    """The precondition of the two barrier facts: XLA's algebraic simplifier, which rewrites them."""
    disabled = (half_programs.xla_flag("xla_disable_hlo_passes") or "").split(",")
    half_programs.xla_fact("algsimp" not in disabled, "XLA_FLAGS disables the algebraic simplifier (algsimp)")


def test_a_division_by_a_constant_needs_the_barrier():
    """XLA turns x / 3 into x * (1/3) inside a program, an ulp off for some x; divide_by keeps it."""
    x = _on_cpu(RNG.uniform(-100, 100, 20000).astype(np.float32))
    true = np.asarray(x) / np.float32(3)
    for result in _both(lambda v: cn.divide_by(v, 3.0), x):
        assert _bits_equal(result, true)
    _simplifier_runs()
    assert not _bits_equal(jax.jit(lambda v: v / 3.0)(x), true)


def test_one_over_sqrt_needs_the_barrier():
    """1 / sqrt(v) becomes rsqrt (1 ulp off for about a third of float32 inputs); sqrt_divisor keeps
    the rounded square root and the rounded division CPU does."""
    v = _on_cpu(RNG.uniform(0.1, 100, 20000).astype(np.float32))
    true = np.float32(1) / np.sqrt(np.asarray(v))
    assert _bits_equal(jax.jit(lambda a: 1.0 / cn.sqrt_divisor(a))(v), true)
    _simplifier_runs()
    assert not _bits_equal(jax.jit(lambda a: 1.0 / jnp.sqrt(a))(v), true)


def test_torch_rsqrt_is_one_over_a_rounded_sqrt():
    """torch.rsqrt (and pow(x, -0.5)) are CPU's 1 / sqrt(x), IEEE's rounded square root and division
    (formulas.rsqrt); XLA's rsqrt they took before was 2 ulps from it (32,531 of 100,000 values 1 ulp off)."""
    x = torch.from_numpy(RNG.uniform(1e-3, 1e3, 20000).astype(np.float32))
    want = (np.float32(1) / np.sqrt(x.numpy())).astype(np.float32)  # numpy: IEEE's sqrt, then division
    for got in (torch.rsqrt(x.to(JAX)), x.to(JAX).pow(-0.5)):
        assert _bits_equal(got.cpu().numpy(), want)


def test_a_product_with_a_bool_keeps_inf_times_zero():
    x = _on_cpu(np.array([np.inf, 1.0, -np.inf], np.float32))
    m = _on_cpu(np.array([False, True, False]))
    result = jax.jit(lambda a, b: (lambda p, q: p * q)(*cn.opaque((a, b.astype(a.dtype)))))(x, m)
    assert np.isnan(result[0]) and result[1] == 1 and np.isnan(result[2])


def test_widened_rounds_a_float64_evaluation_once():
    if capabilities.fact("float64_emulated"):
        pytest.skip("float64 is float32 pairs here (a TPU): widened evaluates in float32 by design")
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
