"""The Bessel and Airy functions of torch.special (J0/J1/Y0/Y1, modified I0/I1/K0/K1, scaled K0/K1,
spherical J0, Airy Ai) on the device against CPU PyTorch, with JAXDEV_FALLBACK=error so a kernel that
quietly fell back to CPU fails: float32 and float64 over the whole normal range (tiny to the largest
finite), both sides of every branch point, signed zeros, infinities and NaN; integer and bool inputs
(float32 results); half precision and complex (CPU raises); out=; torch.compile.

Tolerances are a few ulp: CPU and the device run the same approximations in the input's precision,
so anything looser would hide a float32 result computed in float64 (or the reverse). Subnormal
inputs are left out: XLA flushes subnormals to zero, which is the device's, not these kernels', rule.
"""

from __future__ import annotations

import warnings

import pytest
import torch
from jaxdev_testing import JAX, assert_same, on_both

from jaxdev.graphs.program import EagerGraphWarning

S = torch.special

NAMES = [
    "bessel_j0",
    "bessel_j1",
    "bessel_y0",
    "bessel_y1",
    "modified_bessel_i0",
    "modified_bessel_i1",
    "modified_bessel_k0",
    "modified_bessel_k1",
    "scaled_modified_bessel_k0",
    "scaled_modified_bessel_k1",
    "spherical_bessel_j0",
    "airy_ai",
]
# Where each approximation changes form (CPU compares against these constants in the input's dtype).
BRANCHES = [1e-5, 0.5, 2.0, 5.0, 8.0, 2.09, -2.09, 8.3203353, 103.892]
# A few ulp; the absolute floor covers results near a zero of the function (Y0 at 0.8936, Y1 at
# 2.197), where the last bits of log(x) decide most of the digits left.
TOLERANCE = {torch.float32: dict(rtol=2e-6, atol=1e-7), torch.float64: dict(rtol=4e-15, atol=1e-16)}


pytestmark = pytest.mark.usefixtures("no_fallback")  # tests/conftest.py


def _around(points, dtype, steps=4):
    """Each point and its neighbours a few ulp either side, in `dtype`."""
    out = []
    for p in points:
        x = torch.tensor([p], dtype=dtype)
        up, down = x.clone(), x.clone()
        out.append(x)
        for _ in range(steps):
            up, down = (
                torch.nextafter(up, torch.tensor(float("inf"), dtype=dtype)),
                torch.nextafter(down, torch.tensor(-float("inf"), dtype=dtype)),
            )
            out += [up, down]
    return torch.cat(out)


def _wide(dtype):
    info = torch.finfo(dtype)
    gen = torch.Generator().manual_seed(0)
    magnitudes = torch.logspace(
        torch.log10(torch.tensor(info.tiny)).item(),
        torch.log10(torch.tensor(info.max)).item(),
        1500,
        dtype=torch.float64,
    )
    magnitudes = magnitudes.clamp(info.tiny, info.max).to(dtype)
    x = torch.cat(
        [
            torch.linspace(-12, 12, 2401, dtype=dtype),
            magnitudes,
            torch.randn(1000, generator=gen, dtype=torch.float64).to(dtype) * 30,
            torch.tensor([1e3, 1e4, 1e6, 1e12, 1e30, info.tiny, info.max], dtype=dtype),
            _around(BRANCHES, dtype),
        ]
    )
    edges = torch.tensor([0.0, -0.0, float("inf"), -float("inf"), float("nan")], dtype=dtype)
    return torch.cat([x, -x, edges])


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
@pytest.mark.parametrize("name", NAMES)
def test_like_cpu_over_the_range(name, dtype):
    fn = getattr(S, name)
    x = _wide(dtype)
    expected = fn(x)
    assert_same(fn(x.to(JAX)), expected, **TOLERANCE[dtype])


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
@pytest.mark.parametrize("name", NAMES)
def test_edges_exactly(name, dtype):
    """0, -0 (the sign of a zero result too), the infinities and NaN: CPU's conventions (Y at 0 is
    -inf, K at 0 is +inf, both NaN below 0; J/Y/I at +-inf NaN, spherical J0 there 0, ...)."""
    fn = getattr(S, name)
    x = torch.tensor([0.0, -0.0, float("inf"), -float("inf"), float("nan"), -1.0, -1e30, 200.0, 1e30], dtype=dtype)
    expected = fn(x)
    got = fn(x.to(JAX)).cpu()
    assert_same(fn(x.to(JAX)), expected, **TOLERANCE[dtype])
    assert torch.equal(got.isnan(), expected.isnan())
    zero = expected == 0
    assert torch.equal(got[zero].signbit(), expected[zero].signbit()), f"{got} vs {expected}"


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
def test_airy_series_and_oscillations(dtype):
    """Ai's Maclaurin series (|x| < 2.09) runs a data-dependent number of terms per element; the
    oscillating form for x << 0 takes sin and cos of 2/3 |x|^1.5, where one ulp of that argument
    changes the result, so the division by 3 must round as CPU's does."""
    series = torch.linspace(-2.09, 2.09, 4001, dtype=dtype)
    far = -torch.logspace(0.5, 12, 2000, dtype=torch.float64).to(dtype)
    for x in (series, far):
        assert_same(S.airy_ai(x.to(JAX)), S.airy_ai(x), **TOLERANCE[dtype])


INTEGER_DTYPES = [torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64]
INTEGER_DTYPES += [torch.uint16, torch.uint32, torch.uint64]


@pytest.mark.parametrize("dtype", INTEGER_DTYPES, ids=str)
@pytest.mark.parametrize("name", NAMES)
def test_integer_inputs_give_float32(name, dtype):
    fn = getattr(S, name)
    if dtype == torch.bool:
        x = torch.tensor([True, False, True])
    elif dtype.is_signed:
        x = torch.tensor([-100, -3, -1, 0, 1, 2, 3, 5, 8, 9, 100, 127], dtype=dtype)
    else:
        x = torch.tensor([0, 1, 2, 3, 5, 8, 9, 100, 200], dtype=dtype)
    expected = fn(x)
    assert expected.dtype == torch.float32
    assert_same(fn(x.to(JAX)), expected, **TOLERANCE[torch.float32])


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.complex64, torch.complex128], ids=str)
@pytest.mark.parametrize("name", NAMES)
def test_unsupported_dtypes_raise_as_cpu(name, dtype):
    fn = getattr(S, name)
    err = on_both(lambda d: fn(torch.ones(3, dtype=dtype, device=d)), match=f'"{name}_cpu" not implemented for')
    assert isinstance(err, NotImplementedError)


@pytest.mark.parametrize("name", NAMES)
def test_out(name):
    fn = getattr(S, name)
    x = torch.linspace(-10, 10, 41)

    def into(out_dtype, source_dtype=torch.float32):
        def run(d):
            out = torch.empty(0, dtype=out_dtype, device=d)
            r = fn(x.to(device=d, dtype=source_dtype), out=out)
            assert r is out
            return out

        return run

    on_both(into(torch.float64), rtol=2e-6, atol=1e-7)  # computed in float32, then widened
    on_both(into(torch.float32, torch.int64), rtol=2e-6, atol=1e-7)
    err = on_both(into(torch.int64), match="can't be cast to the desired output type Long")
    assert isinstance(err, RuntimeError)
    err = on_both(into(torch.float32, torch.float16), match="not implemented for 'Half'")
    assert isinstance(err, NotImplementedError)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
@pytest.mark.parametrize("name", NAMES)
def test_compiled_graph_traces(name, dtype):
    """Every kernel (Airy's loop included) traces inside a compiled program: one XLA program, no
    op-by-op fallback, and the values of eager CPU."""
    fn = getattr(S, name)

    def f(x):
        return fn(x * 1.0) + fn(x.abs() + 1)

    torch._dynamo.reset()
    x = torch.cat(
        [torch.linspace(-10, 10, 101, dtype=dtype), torch.tensor([0.0, float("inf"), float("nan")], dtype=dtype)]
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error", EagerGraphWarning)
        got = torch.compile(f, backend="jax", fullgraph=True)(x.to(JAX))
    torch._dynamo.reset()
    assert_same(got, f(x), **TOLERANCE[dtype])
