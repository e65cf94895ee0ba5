"""Facts of a platform's programs (jaxdev/ops/kit/capabilities.py: PROGRAM_FACTS), run here under the
TPU's, and as they are on a TPU: converts into and out of complex128 lowered in parts, float64/int64
bitcasts through uint64, float32 and complex64 kernels that widen kept in their own dtype where float64
is emulated. Each is what XLA's TPU compiler aborted or raised on (the chip, or run without it:
jaxdev/audit/deviceless.py). The `tpu_policy` fixture: tests/ops/conftest.py."""

from __future__ import annotations

import itertools
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch
from jaxdev_testing import JAX

import jaxdev
from jaxdev.ops.kit import capabilities

_C128_TO_C64 = re.compile(r"stablehlo\.convert .*complex<f64>.*-> tensor<[^>]*complex<f32>")
_F64_ARRAY = re.compile(r"tensor<[0-9x]+xf64>")  # a float64 array (a Python float is a float64 scalar)


# This platform's own float64 (before tpu_policy puts the TPU's facts on it): a TPU's is float32 pairs,
# with float32's exponent range (1e300 is inf there, 1e-310 zero), so no test can hand it such values.
_F64_EMULATED_HERE = "float64_emulated" in capabilities.PROGRAM_FACTS.get(capabilities.platform(), {})


@pytest.mark.tpu_fact("a convert into complex128, or from it into complex64, aborts XLA's TPU compiler")
def test_complex128_to_complex64_is_lowered_in_parts_with_the_same_bits(tpu_policy):
    parts = [1 + 2j, complex(-np.inf, -0.0), 3.3e38 - 1e-30j]
    if not _F64_EMULATED_HERE:  # float64 values past float32's range, which an emulated float64 cannot hold
        parts += [1e300 - 3.3e38j, complex(np.nan, 1e-310), 3.4028235677973366e38 + 0j]
    source = np.array(parts + list(np.random.default_rng(0).standard_normal(64) * 1e30), np.complex128)
    x = jnp.asarray(source)
    # NumPy's convert of the source (the CPU backend's bits); not of x read back, which a TPU reads back
    # as hi + lo, -0.0 + 0.0 = +0.0 (-0.0's sign lost on the chip)
    expected = source.astype(np.complex64)
    narrow = jax.jit(lambda v: v.astype(jnp.complex64))
    assert not _C128_TO_C64.search(narrow.lower(x).as_text())
    assert np.asarray(narrow(x)).view(np.uint32).tolist() == expected.view(np.uint32).tolist()
    scaled = jax.jit(lambda v, number: v * number)  # a Python complex enters as complex128
    ones = jnp.ones(2, jnp.complex64)
    assert not _C128_TO_C64.search(scaled.lower(ones, 1 + 2j).as_text())
    assert scaled(ones, 1 + 2j).tolist() == [1 + 2j, 1 + 2j]
    assert (np.dtype(np.complex128), np.dtype(np.complex64)) not in tpu_policy


@pytest.mark.tpu_fact("a convert into complex128, or from it into complex64, aborts XLA's TPU compiler")
def test_complex64_ops_with_python_numbers_and_complex128_copies_never_narrow_whole(tpu_policy):
    """What aborted pytest on a TPU (test_views.py::test_conj_and_neg_views: complex64 and complex32
    ops with Python complex numbers) and the other ways a complex128 value meets complex64."""
    g = torch.Generator().manual_seed(0)
    z = torch.randn(5, dtype=torch.complex64, generator=g)
    z128 = torch.randn(5, dtype=torch.complex128, generator=g)
    cases = {
        "mul number": lambda v, w: v * (1.5 - 2j),
        "add_ number": lambda v, w: v.clone().add_(3j, alpha=2),
        "conj mul": lambda v, w: v.conj() * (2 + 1j),
        "neg of conj": lambda v, w: torch.neg(v.conj()) - 2j,
        "to complex64": lambda v, w: w.to(torch.complex64),
        "0-dim complex128": lambda v, w: v + w[0],
        "full": lambda v, w: torch.full((3,), 1 / 3 + 2j, dtype=torch.complex64, device=v.device),
        "complex32": lambda v, w: (v.to(torch.complex32) * (1 + 1j)).to(torch.complex64),
        "scalar_tensor complex32": lambda v, w: torch.scalar_tensor(1 + 2j, dtype=torch.complex32, device=v.device),
    }
    for name, fn in cases.items():
        got, want = fn(z.to(JAX), z128.to(JAX)).cpu(), fn(z, z128)
        torch.testing.assert_close(got, want, msg=name)  # (CPU's complex product rounds differently from XLA's)
    assert (np.dtype(np.complex128), np.dtype(np.complex64)) not in tpu_policy


_INTO_C128 = re.compile(r"stablehlo\.convert .*-> tensor<[^>]*complex<f64>")


@pytest.mark.tpu_fact("a convert into complex128, or from it into complex64, aborts XLA's TPU compiler")
def test_converts_into_complex128_are_lowered_in_parts_with_the_same_bits(tpu_policy):
    """XLA's TPU compiler, run without the chip (jaxdev/audit/deviceless.py), aborts on a convert into
    complex128 from every other dtype (complex128 eigh's pred -> c128 first)."""
    rng = np.random.default_rng(0)
    special = [0.0, -0.0, np.nan, np.inf, -np.inf, 3.4e38, 6.1e-5, 65504.0]
    special += [] if _F64_EMULATED_HERE else [1e-310]  # zero in an emulated float64 (float32's range)
    floats = np.concatenate([special, rng.standard_normal(256) * 1e4])
    sources = {
        "bool": np.array([True, False, True]),
        "int8": np.arange(-128, 128, dtype=np.int8),
        "uint8": np.arange(256, dtype=np.uint8),
        "int32": rng.integers(-(2**31), 2**31 - 1, 256, dtype=np.int32),
        "int64": np.concatenate([rng.integers(-(2**63), 2**63 - 1, 256, dtype=np.int64), [2**53 + 1, -(2**63)]]),
        "uint64": np.array([0, 1, 2**53 + 1, 2**64 - 1], dtype=np.uint64),
        "float16": floats.astype(np.float16),
        "bfloat16": floats.astype(jnp.bfloat16),
        "float32": floats.astype(np.float32),
        "float64": floats,
        "complex64": (floats + 1j * floats[::-1]).astype(np.complex64),
    }
    widen = jax.jit(lambda v: v.astype(jnp.complex128))
    for name, values in sources.items():
        x = jnp.asarray(values)
        expected = np.asarray(values).astype(np.complex128)  # NumPy's convert: the CPU backend's bits
        assert not _INTO_C128.search(widen.lower(x).as_text()), name
        got = np.asarray(widen(x))
        if _F64_EMULATED_HERE:  # see _within_emulation
            _within_emulation(got, expected, name)
        else:
            assert got.view(np.uint64).tolist() == expected.view(np.uint64).tolist(), name
    assert not [pair for pair in tpu_policy if pair[1] == np.complex128 and pair[0] != np.complex128]


def _within_emulation(got, expected, name):
    """Where float64 is float32 pairs: a pair holds 2 x 24 significand bits (49 with lo's sign), so a
    value with more (a random int64's 53-bit rounding: 1 ulp off on the chip) is held within 2**-48 of
    it, and the read-back sums hi + lo (-0.0 comes back +0.0): equal values within 2**-47, NaN as NaN."""
    np.testing.assert_allclose(got, expected, rtol=2.0**-47, atol=0, equal_nan=True, err_msg=name)


def _widening_bodies():
    from jaxdev.ops import pointwise
    from jaxdev.ops.kit import cpu_numerics
    from jaxdev.ops.special import igamma
    from jaxdev.ops.special.bessel import i_k

    return {
        "sinh": pointwise._float32_in_float64(pointwise._hyperbolic(-1)),
        "cosh": pointwise._float32_in_float64(pointwise._hyperbolic(1)),
        "exp2": pointwise._float32_in_float64(pointwise._exp2),
        "erfinv": pointwise._erfinv,
        "exp_wide": cpu_numerics.exp_wide,
        "log_wide": cpu_numerics.log_wide,
        "log_half": cpu_numerics.log_half,
        "igamma": lambda v: igamma.igamma(v + 1, v),
        "igammac": lambda v: igamma.igammac(v + 1, v),
        "k0": i_k._k0_small,
    }


@pytest.mark.tpu_fact("float64 is emulated: sinh, exp2 and igamma of float32 raised in float64")
def test_float32_kernels_that_widen_stay_float32_where_float64_is_emulated(monkeypatch):
    x = jnp.linspace(0.5, 3, 8, dtype=jnp.float32)
    widening = _widening_bodies()
    if capabilities.platform() == "cpu":  # widened here (what the test below takes away)
        assert all(_F64_ARRAY.search(jax.jit(fn).lower(x).as_text()) for fn in widening.values())
    monkeypatch.setitem(capabilities.PROGRAM_FACTS, capabilities.platform(), {"float64_emulated": "pretended"})
    jax.clear_caches()  # traced anew
    for name, fn in _widening_bodies().items():
        assert not _F64_ARRAY.search(jax.jit(fn).lower(x).as_text()), name


@pytest.mark.tpu_fact("float64 is emulated: sinh, exp2 and igamma of float32 raised in float64")
def test_float32_kernels_without_float64_stay_close_to_cpu(tpu_policy):
    """In float32 with jaxdev's own functions: sinh within 2 ulps of CPU's, cosh and exp2 within 1,
    erfinv as close as CPU jaxdev (its float32 Newton steps), igamma and K0/K1 within float32's
    tolerance (measured: igamma 9.8e-7 absolute, K0 4.9e-7 relative; CPU's policy 5.4e-7, 2.6e-7)."""
    g = torch.Generator().manual_seed(0)

    def points(lo, hi):
        inside = torch.rand(20000, generator=g) * (hi - lo) + lo
        return torch.cat(
            [inside, torch.randn(5000, generator=g), torch.tensor([0.0, -0.0, 1e-30, -1e-8, np.inf, np.nan])]
        )

    for fn, lo, hi, ulps in [(torch.sinh, -88, 88, 2), (torch.cosh, -88, 88, 1), (torch.exp2, -126, 127.9, 1)]:
        x = points(lo, hi)
        got, want = fn(x.to(JAX)).cpu().double(), fn(x).double()
        ulp = torch.nextafter(want.float().abs(), torch.tensor(np.inf)).double() - want.abs()
        off = torch.where((got == want) | (got.isnan() & want.isnan()), 0, (got - want).abs() / ulp)
        assert off.max() <= ulps, (fn.__name__, off.max())
    y = points(-0.99999, 0.99999).clamp(-0.99999, 0.99999)
    torch.testing.assert_close(torch.erfinv(y.to(JAX)).cpu(), torch.erfinv(y), rtol=1e-5, atol=1e-6, equal_nan=True)
    a = torch.cat([torch.rand(3000, generator=g) * 50 + 0.01, torch.rand(500, generator=g) * 1000 + 50])
    x = torch.rand(len(a), generator=g) * 3 * a
    for fn in (torch.special.gammainc, torch.special.gammaincc):
        torch.testing.assert_close(fn(a.to(JAX), x.to(JAX)).cpu(), fn(a, x), rtol=1.3e-6, atol=1e-5, equal_nan=True)
    k = torch.rand(5000, generator=g) * 2 + 1e-4  # K0 and K1 below 2: log_half, exp_wide, _k0_small
    for fn in (
        torch.special.modified_bessel_k0,
        torch.special.scaled_modified_bessel_k0,
        torch.special.modified_bessel_k1,
    ):
        torch.testing.assert_close(fn(k.to(JAX)).cpu(), fn(k), rtol=1.3e-6, atol=0)
    assert (np.dtype(np.float32), np.dtype(np.float64)) not in tpu_policy  # nothing widened


def _nextafter_operands():
    """Every pair of special values, then random ones (a tenth of them with b == a). Where float64 is
    float32 pairs (float32's exponent range, 48-49 significand bits) only operands whose results a pair
    holds exactly: float32 values between 2**-70 and 2**100 (x +- one float64 ulp is then hi = x, lo =
    +-ulp, a normal float32), zeros towards zeros, infinities towards themselves."""
    rng = np.random.default_rng(0)
    if not _F64_EMULATED_HERE:
        special = [0.0, -0.0, 5e-324, -5e-324, 2.2250738585072014e-308, 1.7976931348623157e308, 1.0, -1.0]
        special += [np.inf, -np.inf, np.nan]
        spread = rng.standard_normal(4000) * 10.0 ** rng.integers(-300, 300, 4000)
        pairs = np.meshgrid(special, special)
    else:
        held = [1.0, -1.0, 3.0, 2.0**-70, -(2.0**100), np.nan]
        spread = (rng.standard_normal(4000) * 2.0 ** rng.integers(-60, 90, 4000)).astype(np.float32)
        pairs = [np.array(v) for v in zip(*itertools.product(held, held + [0.0, -0.0, np.inf, -np.inf]))]
        ends = [(0.0, 0.0), (0.0, -0.0), (-0.0, 0.0), (-0.0, -0.0), (np.inf, np.inf), (-np.inf, -np.inf)]
        pairs = [np.concatenate([p, e]) for p, e in zip(pairs, zip(*ends))]
    head = pairs[0].size
    a, b = (np.concatenate([grid.ravel(), rng.permutation(spread)]).astype(np.float64) for grid in pairs)
    b[head:] = np.where(rng.random(4000) < 0.1, a[head:], b[head:])
    return a, b


@pytest.mark.tpu_fact("float64 is emulated: XLA's float64 nextafter raised on a TPU; its bits are a float32 pair's")
def test_float64_nextafter_is_refused_where_float64_is_emulated(tpu_policy):
    """nextafter_values steps on the bits without XLA's next_after (which raised on a TPU); but a TPU's
    float64 bits are its float32 pair's (the v5e: 1/3 bitcast to 0x3eaaaaabb22aaaab), so float64
    nextafter there is refused in one sentence rather than computed from them (the chip gave garbage)."""
    from jaxdev.ops.binary.floating import nextafter_values

    a, b = _nextafter_operands()
    assert "next_after" not in jax.jit(nextafter_values).lower(a, b).as_text()
    with pytest.raises(jaxdev.PlatformDtypeError, match="emulated there as float32 pairs"):
        torch.nextafter(torch.from_numpy(a).to(JAX), torch.from_numpy(b).to(JAX))


_WIDE_ARRAY = re.compile(r"tensor<[0-9x]*x?(f64|complex<f64>)>")  # a float64 or complex128 array


@pytest.mark.tpu_fact("float64 is emulated: complex128 programs abort XLA's TPU compiler (deviceless.py)")
@pytest.mark.per_op_mode("spies on the bodies a kernel traces at each call; fused mode replays its segment's program")
def test_complex64_kernels_that_widen_stay_complex64_where_float64_is_emulated(monkeypatch):
    """complex64 atan/atanh, logcumsumexp and matrix_exp widened to complex128 (float32 to float64) for
    CPU's accuracy; XLA's TPU compiler run without the chip aborted or raised on each of those wide
    programs, so where float64 is emulated they stay in their own dtype."""
    from jaxdev.ops import scans
    from jaxdev.ops.kit import complex_c99
    from jaxdev.ops.linalg import matrix_exp

    z = jnp.asarray(np.linspace(0.1, 0.9, 8) + 0.3j, jnp.complex64)
    seen = []
    monkeypatch.setattr(matrix_exp, "_expm_body", _recording(matrix_exp._expm_body, seen, "matrix_exp"))
    monkeypatch.setattr(scans, "_logcumsumexp", _recording(scans._logcumsumexp, seen, "logcumsumexp"))
    g = torch.Generator().manual_seed(0)
    cases = {dt: torch.randn(3, 3, dtype=dt, generator=g) / 3 for dt in (torch.float32, torch.complex64)}

    def run_all():
        seen.clear()
        for t in cases.values():
            torch.linalg.matrix_exp(t.to(JAX)).cpu()
            torch.logcumsumexp(t.to(JAX), 0).cpu()
        return {(name, str(jnp.dtype(arg)) if arg is not None else None) for name, arg in seen}

    if capabilities.platform() == "cpu":  # widened here (what the fact takes away)
        assert _WIDE_ARRAY.search(jax.jit(complex_c99.atanh).lower(z).as_text())
        assert ("matrix_exp", "complex128") in run_all() and ("logcumsumexp", "complex128") in run_all()
    monkeypatch.setitem(capabilities.PROGRAM_FACTS, capabilities.platform(), {"float64_emulated": "pretended"})
    jax.clear_caches()
    for fn in (complex_c99.atanh, complex_c99.atan):
        assert not _WIDE_ARRAY.search(jax.jit(fn).lower(z).as_text()), fn.__name__
    assert run_all() == {("matrix_exp", None), ("logcumsumexp", "complex64"), ("logcumsumexp", "float32")}
    for t in cases.values():  # and still CPU's values, in their own precision
        torch.testing.assert_close(torch.linalg.matrix_exp(t.to(JAX)).cpu(), torch.linalg.matrix_exp(t))
        torch.testing.assert_close(torch.logcumsumexp(t.to(JAX), 0).cpu(), torch.logcumsumexp(t, 0))
    got = torch.atanh(torch.from_numpy(np.asarray(z)).to(JAX)).cpu()
    torch.testing.assert_close(got, torch.atanh(torch.from_numpy(np.asarray(z))))


def _recording(factory, seen, name):
    """`factory` (a jitted body factory), its last static argument recorded into `seen` per call."""

    def recorded(*static):
        seen.append((name, static[-1]))
        return factory(*static)

    return recorded


_F64_TO_I64 = re.compile(r"stablehlo\.bitcast_convert .*tensor<[0-9x]*f64>\) -> tensor<[0-9x]*i64>")
_I64_TO_F64 = re.compile(r"stablehlo\.bitcast_convert .*tensor<[0-9x]*i64>\) -> tensor<[0-9x]*f64>")


@pytest.mark.tpu_fact("integer arithmetic on a float64 -> int64 bitcast fails to compile on a TPU")
def test_float64_int64_bitcasts_go_through_uint64_with_the_same_bits(tpu_policy):
    """XLA's TPU compiler (run without the chip) raised INVALID_ARGUMENT on float64 copysign, signbit,
    frexp, ldexp, floor division, exp2, lgamma, digamma and erfinv: all bitcast float64 to int64."""
    special = [0.0, -0.0, np.inf, -np.inf, np.nan, -np.nan, 5e-324, -1.7976931348623157e308, 1 / 3]
    source = np.concatenate([special, np.random.default_rng(0).standard_normal(64) * 1e10])
    if _F64_EMULATED_HERE:  # values a float32 pair holds exactly: float32's range, 48 significand bits
        source = (source.view(np.int64) & ~np.int64(31)).view(np.float64)[~(abs(source) > 3e38) | np.isinf(source)]
    x = jnp.asarray(source)
    bits = jax.jit(lambda v: jax.lax.bitcast_convert_type(v, jnp.int64))
    masked = jax.jit(lambda v: jax.lax.bitcast_convert_type(bits(v) & jnp.int64(0x7FFFFFFFFFFFFFFF), jnp.float64))
    assert not _F64_TO_I64.search(bits.lower(x).as_text())
    assert not _I64_TO_F64.search(masked.lower(x).as_text())
    expected = source.view(np.int64)  # not x read back: a TPU reads -0.0 back as +0.0 (hi + lo)
    if not _F64_EMULATED_HERE:  # a TPU's bitcast gives its float32 pair's bits, hi << 32 | lo (the v5e)
        assert np.asarray(bits(x)).tolist() == expected.tolist()
        assert np.asarray(masked(x)).view(np.int64).tolist() == (expected & 0x7FFFFFFFFFFFFFFF).tolist()
    t = torch.from_numpy(source.copy())
    with pytest.raises(jaxdev.PlatformDtypeError, match="emulated there as float32 pairs"):
        torch.frexp(t.to(JAX))  # made from the bits: refused where float64 is emulated
    for fn in (
        lambda v: torch.copysign(v, -v),
        torch.signbit,
        lambda v: v.floor_divide(0.3),
    ):
        got, want = fn(t.to(JAX)).cpu(), fn(t)
        assert torch.equal(got, want) or torch.allclose(got, want, equal_nan=True)


@pytest.mark.tpu_fact("float32 division is not IEEE's on a TPU: a division kept from XLA's rewrite keeps no CPU bits")
def test_division_by_a_number_broadcasts_its_divisor_in_the_open(tpu_policy):
    """Where division is IEEE's (CPU) a broadcast divisor waits behind a barrier, so that XLA cannot make
    the division a product by the reciprocal (1 ulp off); on a TPU the barrier made XLA write every such
    divisor to memory as a full array (the LM step's AdamW: `_foreach_div_` by a number per parameter,
    issue 37), so there it is broadcast in the open. Values stay within float32's tolerance."""
    from jaxdev.ops.kit import formulas

    x = torch.randn(64, 32, generator=torch.Generator().manual_seed(0))
    program = jax.jit(formulas.DIV).lower(jnp.asarray(x.numpy()), jnp.float32(3.7)).as_text()
    assert "optimization_barrier" not in program
    torch.testing.assert_close((x.to(JAX) / 3.7).cpu(), x / 3.7)
    params = [t.to(JAX) for t in (x, x.T.contiguous())]
    torch._foreach_div_(params, [3.7, 0.3])
    torch.testing.assert_close([p.cpu() for p in params], [x / 3.7, x.T / 0.3])


def test_division_by_a_number_keeps_its_barrier_where_division_is_ieees():
    from jaxdev.ops.kit import formulas

    if capabilities.fact("division_approximate"):
        pytest.skip("this platform's division is not IEEE's")
    program = jax.jit(formulas.DIV).lower(jnp.ones((4, 3), jnp.float32), jnp.float32(3.7)).as_text()
    assert "optimization_barrier" in program


def _row_sums_broadcast_straight(fn, *args):
    """The full-shape operations of jaxpr(fn) that take a sum over the last axis broadcast straight
    back over its rows (through reshapes and broadcasts alone)."""
    from jax.extend.core import Literal

    jaxpr = jax.make_jaxpr(fn)(*args).jaxpr
    made = {v: e for e in jaxpr.eqns for v in e.outvars}
    full = args[0].shape

    def row_sum(v):
        if isinstance(v, Literal):
            return False
        while v in made and made[v].primitive.name in ("broadcast_in_dim", "reshape"):
            v = made[v].invars[0]
        return v in made and made[v].primitive.name == "reduce_sum" and made[v].params["axes"] == (len(full) - 1,)

    return [e for e in jaxpr.eqns if e.outvars[0].aval.shape == full and any(row_sum(v) for v in e.invars)]


@pytest.mark.tpu_fact("a row sum broadcast back over its rows becomes a reduce-window fused apart on a TPU")
def test_layer_norm_gradient_scales_its_row_sums_at_row_shape(tpu_policy):
    """CPU's formula for layer norm's input gradient, rstd / n (n g - sum g - xhat sum(g xhat)), broadcast
    each row sum straight into the gradient: XLA's TPU compiler made those reduce-windows fused into the
    input gradient's fusion, and left the bias gradient's sum a pass of its own over the gradient (the LM
    step, issue 37). There the sums are scaled at row shape first; the gradients stay CPU's within
    float32's tolerance, in float32 and bfloat16."""
    from jaxdev.ops import normalization

    gen = torch.Generator().manual_seed(0)
    x, g = torch.randn(4, 6, 16, generator=gen), torch.randn(4, 6, 16, generator=gen)
    w, b = torch.randn(16, generator=gen), torch.randn(16, generator=gen)
    _, mean, rstd = torch.native_layer_norm(x, (16,), w, b, 1e-5)
    arrays = [jnp.asarray(t.numpy()) for t in (g, x, mean, rstd, w, b)]
    grad = lambda *a: normalization._layer_norm_grad(*a, (2,), (True, True, True))
    assert not _row_sums_broadcast_straight(grad, *arrays)
    for dtype in (torch.float32, torch.bfloat16):
        grads = {}
        for where in ("cpu", JAX, "exact"):
            leaves = [t.detach().to(torch.float64 if where == "exact" else dtype) for t in (x, w, b)]
            leaves = [t.to("cpu" if where == "exact" else where).requires_grad_() for t in leaves]
            out = torch.nn.functional.layer_norm(leaves[0], (16,), leaves[1], leaves[2])
            out.backward(g.to(dtype).to(out.dtype).to(out.device))
            grads[where] = [t.grad.cpu().double() for t in leaves]
        for got, cpu, exact in zip(grads[JAX], grads["cpu"], grads["exact"]):
            if dtype == torch.float32:
                torch.testing.assert_close(got, cpu, rtol=1.3e-6, atol=1e-5)
            else:  # no farther from float64's than CPU is (bfloat16's saved statistics round alike)
                assert (got - exact).abs().max() <= (cpu - exact).abs().max()


def test_layer_norm_gradient_keeps_cpus_formula_where_row_sums_fuse():
    from jaxdev.ops import normalization

    if capabilities.fact("row_sums_fuse_as_windows"):
        pytest.skip("this platform scales layer norm's row sums at row shape")
    x = jnp.linspace(-1, 1, 96, dtype=jnp.float32).reshape(4, 24)
    stats = jnp.mean(x, 1, keepdims=True), jnp.ones((4, 1), jnp.float32)
    grad = lambda *a: normalization._layer_norm_grad(*a, (1,), (True, False, False))
    assert _row_sums_broadcast_straight(grad, x, x, *stats, None, None)


def _score_masks(is_causal):
    """The `x == max` masks (bool, the scores' full shape) in attention's backward program."""
    from jaxdev.ops import attention

    q = jnp.linspace(-1, 1, 2 * 3 * 8 * 4, dtype=jnp.float32).reshape(2, 3, 8, 4)
    run = attention._backward(jax.lax.Precision.HIGHEST, None, is_causal, None)

    def eqns(jaxpr):
        for e in jaxpr.eqns:
            yield e
            for sub in jax.core.jaxprs_in_params(e.params):
                yield from eqns(sub)

    jaxpr = jax.make_jaxpr(run)(q, q, q, q, None).jaxpr
    return [e for e in eqns(jaxpr) if e.primitive.name == "eq" and e.outvars[0].aval.shape == (2, 3, 8, 8)]


@pytest.mark.tpu_fact("the gradient through a row max is a full-shape mask a TPU writes out and reads in a product")
def test_attention_gradient_leaves_out_the_shift_through_its_max(tpu_policy):
    """Softmax does not depend on the shift by its rows' max, so the gradient through that max is
    rounding residue; XLA's TPU compiler wrote its mask, x == max over [batch, heads, L, S], out and read
    it in the key gradient's product (3.4x that product's cost in the LM step, issue 37). There it is
    left out; the gradients stay CPU's within tolerance."""
    assert not _score_masks(True) and not _score_masks(False)
    gen = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 3, 8, 4, generator=gen) for _ in range(3))
    g = torch.randn(2, 3, 8, 4, generator=gen)
    for dtype in (torch.float32, torch.bfloat16):
        grads = []
        for where, dt in (("cpu", dtype), (JAX, dtype), ("cpu", torch.float64)):
            leaves = [t.detach().to(dt).to(where).requires_grad_() for t in (q, k, v)]
            torch.nn.functional.scaled_dot_product_attention(*leaves, is_causal=True).backward(g.to(dt).to(where))
            grads.append([t.grad.cpu().double() for t in leaves])
        for got, cpu, exact in zip(*grads):
            if dtype == torch.float32:
                torch.testing.assert_close(got, cpu, rtol=1.3e-6, atol=1e-5)
            else:  # CPU's flash kernel rounds its own way: within twice its distance from float64's
                assert (got - exact).abs().max() <= 2 * (cpu - exact).abs().max()


def test_attention_gradient_keeps_the_shift_through_its_max_elsewhere():
    if capabilities.fact("max_gradient_mask_materialized"):
        pytest.skip("this platform leaves the max's gradient out")
    assert _score_masks(True)
