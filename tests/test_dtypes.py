"""every dtype round-trips exactly, results carry torch's dtypes, unsupported ones fail clearly."""

from __future__ import annotations

import itertools
import math

import jax
import jax.numpy as jnp
import pytest
import torch
from half_programs import program_hazards
from jaxdev_testing import ALL_DTYPES, JAX, assert_same, on_both

import jaxdev
from jaxdev import dtypes

_BITS = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}


def extreme_values(dtype: torch.dtype) -> torch.Tensor:
    """A CPU tensor of `dtype` with the values most likely to be mangled: limits, -0, inf, nan, subnormals."""
    if dtype == torch.bool:
        return torch.tensor([True, False, True])
    if dtype.is_complex:
        real = extreme_values(torch.float32 if dtype == torch.complex64 else torch.float64)
        return torch.complex(real, real.flip(0))
    if dtype.is_floating_point:
        fi = torch.finfo(dtype)
        vals = [
            0.0,
            -0.0,
            1.0,
            -1.5,
            fi.max,
            fi.min,
            fi.tiny,
            fi.tiny / 4,
            fi.eps,
            float("inf"),
            float("-inf"),
            float("nan"),
        ]
        return torch.tensor(vals, dtype=dtype)
    ii = torch.iinfo(dtype)
    return torch.tensor([0, 1, ii.max, ii.min, ii.max - 1, ii.min + 1, 7], dtype=dtype)


def bits(t: torch.Tensor) -> torch.Tensor:
    """The raw bits of a CPU tensor, for an exact comparison (nan, -0.0)."""
    t = t.contiguous()
    if t.dtype == torch.bool:
        return t.view(torch.uint8)
    if t.is_complex():
        t = torch.view_as_real(t)
    return t.view(_BITS[t.element_size()])


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=str)
def test_round_trip_is_bit_exact(dtype):
    cpu = extreme_values(dtype)
    on_jax = cpu.to("jax")
    assert on_jax.device == JAX and on_jax.dtype == dtype and on_jax.shape == cpu.shape
    back = on_jax.cpu()
    assert back.dtype == dtype
    assert torch.equal(bits(back), bits(cpu)), f"{dtype}: {back} != {cpu}"


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=str)
def test_jax_array_has_matching_dtype(dtype):
    t = extreme_values(dtype).to("jax")
    expected = {
        torch.bool: jnp.bool_,
        torch.uint8: jnp.uint8,
        torch.int8: jnp.int8,
        torch.int16: jnp.int16,
        torch.int32: jnp.int32,
        torch.int64: jnp.int64,
        torch.float16: jnp.float16,
        torch.bfloat16: jnp.bfloat16,
        torch.float32: jnp.float32,
        torch.float64: jnp.float64,
        torch.complex64: jnp.complex64,
        torch.complex128: jnp.complex128,
    }[dtype]
    assert jaxdev.to_jax(t).dtype == jnp.dtype(expected)


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=str)
def test_factory_with_dtype_on_jax(dtype):
    cpu = torch.tensor([[1, 0], [3, 4]], dtype=dtype)
    assert_same(torch.tensor([[1, 0], [3, 4]], dtype=dtype, device="jax"), cpu)
    assert_same(torch.zeros(2, 2, dtype=dtype, device="jax"), torch.zeros(2, 2, dtype=dtype))
    assert_same(torch.ones(2, 2, dtype=dtype, device="jax"), torch.ones(2, 2, dtype=dtype))


def test_int64_and_float64_are_not_truncated_to_32_bits():
    big = torch.tensor([2**40 + 1, -(2**62)], dtype=torch.int64)
    assert_same(big.to("jax"), big)
    assert_same(big.to("jax") + 1, big + 1)
    precise = torch.tensor([1.0 + 2**-40], dtype=torch.float64)
    assert_same(precise.to("jax"), precise)
    assert_same(precise.to("jax") * 3, precise * 3)


def test_default_dtypes_match_cpu():
    assert torch.tensor([1, 2], device="jax").dtype == torch.int64
    assert torch.tensor([1.0], device="jax").dtype == torch.float32
    assert torch.tensor([1j], device="jax").dtype == torch.complex64
    assert torch.arange(3, device="jax").dtype == torch.int64
    assert torch.zeros(2, device="jax").dtype == torch.float32


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=str)
def test_cast_between_dtypes_matches_cpu(dtype):
    # A float source with fractions, negatives and out-of-range values for small integer types.
    src = torch.tensor([0.0, 1.75, -2.5, 3.0, 100.25], dtype=torch.float64)
    if dtype == torch.uint8 or dtype == torch.bool:
        src = src.abs()  # negative float -> uint8 is undefined behaviour in C++
    expected = src.to(dtype)
    assert_same(src.to("jax").to(dtype), expected)
    assert_same(src.to("jax", dtype), expected)
    assert_same(expected.to("jax").to(torch.float64), expected.to(torch.float64))


# --- type promotion ----------------------------------------------------------------------------------

_PROMO_DTYPES = [
    torch.bool,
    torch.uint8,
    torch.int8,
    torch.int32,
    torch.int64,
    torch.float16,
    torch.bfloat16,
    torch.float32,
    torch.float64,
    torch.complex64,
    torch.complex128,
]


def _sample(dtype):
    return torch.tensor([1, 0, 1], dtype=dtype) if dtype == torch.bool else torch.tensor([1, 2, 3], dtype=dtype)


@pytest.mark.parametrize(
    "a,b", list(itertools.combinations_with_replacement(_PROMO_DTYPES, 2)), ids=lambda d: str(d)[6:]
)
def test_add_promotes_like_cpu(a, b):
    x, y = _sample(a), _sample(b)
    expected = x + y
    assert_same(x.to("jax") + y.to("jax"), expected)


@pytest.mark.parametrize(
    "dtype,scalar",
    [
        (torch.int32, 2),
        (torch.int32, 2.5),
        (torch.int32, 1j),
        (torch.uint8, 3),
        (torch.float16, 2.5),
        (torch.bfloat16, 3),
        (torch.bool, 2),
        (torch.bool, 0.5),
        (torch.float32, True),
        (torch.int64, 2.5),
    ],
    ids=str,
)
def test_python_scalar_promotion_like_cpu(dtype, scalar):
    on_both(lambda d: _sample(dtype).to(d) * scalar)
    on_both(lambda d: _sample(dtype).to(d) + scalar)
    on_both(lambda d: scalar - _sample(dtype).to(d))  # CPU refuses bool subtraction: so must jax


@pytest.mark.parametrize(
    "dim_dtype,zero_dtype",
    [
        (torch.int32, torch.int64),
        (torch.float16, torch.float64),
        (torch.int8, torch.float32),
        (torch.float32, torch.complex128),
    ],
    ids=str,
)
def test_zero_dim_tensor_promotion_like_cpu(dim_dtype, zero_dtype):
    x = _sample(dim_dtype)
    z = torch.tensor(2, dtype=zero_dtype)
    assert_same(x.to("jax") * z.to("jax"), x * z)


def test_integer_division_and_comparison_dtypes_like_cpu():
    x = torch.tensor([7, -7, 9], dtype=torch.int32)
    y = torch.tensor([2, 2, -4], dtype=torch.int32)
    xj, yj = x.to("jax"), y.to("jax")
    assert_same(xj / yj, x / y)
    assert_same(torch.div(xj, yj, rounding_mode="floor"), torch.div(x, y, rounding_mode="floor"))
    assert_same(torch.div(xj, yj, rounding_mode="trunc"), torch.div(x, y, rounding_mode="trunc"))
    assert_same(xj // yj, x // y)
    assert_same(xj % yj, x % y)
    assert_same(xj < yj, x < y)
    assert_same(xj == 7, x == 7)


def test_reduction_result_dtypes_like_cpu():
    i = torch.tensor([[1, 2], [3, 4]], dtype=torch.int32)
    b = torch.tensor([True, False, True])
    h = torch.tensor([1.0, 2.0], dtype=torch.float16)
    assert_same(i.to("jax").sum(), i.sum())
    assert_same(b.to("jax").sum(), b.sum())
    assert_same(i.to("jax").prod(), i.prod())
    assert_same(h.to("jax").sum(), h.sum())
    assert_same(i.to("jax").float().mean(), i.float().mean())
    with pytest.raises(RuntimeError):
        i.mean()  # CPU refuses
    with pytest.raises(RuntimeError):
        i.to("jax").mean()


def test_inplace_result_cannot_be_cast_like_cpu():
    i = torch.tensor([1, 2], dtype=torch.int64)
    with pytest.raises(RuntimeError, match="can't be cast"):
        i.clone().add_(0.5)
    with pytest.raises(RuntimeError, match="can't be cast"):
        i.to("jax").add_(0.5)


# --- dtypes JAX cannot hold --------------------------------------------------------------------------


def _assert_names_dtype_and_device(err: BaseException, dtype_name: str):
    message = str(err)
    assert dtype_name in message, f"error does not name the dtype {dtype_name}: {message[:300]}"
    assert "jax" in message, f"error does not name the device: {message[:300]}"


def test_complex32_is_held_as_the_bytes_of_complex_half():
    # served as CPU serves it (jaxdev/ops/carriers/complex_half.py; its tests: tests/ops/test_complex_half.py)
    cpu = torch.tensor([1 + 2j, -0.5 + 65504j], dtype=torch.complex32)
    on_jax = cpu.to("jax")
    assert on_jax.dtype == torch.complex32 and on_jax.untyped_storage().nbytes() == 8
    assert torch.equal(on_jax.view(torch.int32).cpu(), cpu.view(torch.int32))
    assert torch.equal(
        torch.zeros(2, dtype=torch.complex32, device="jax").view(torch.int32).cpu(), torch.zeros(2, dtype=torch.int32)
    )
    assert dtypes.STORED_AS[torch.complex32] is torch.uint32
    with pytest.raises(dtypes.ComplexHalfError):
        dtypes.to_jax_dtype(torch.complex32)  # values are decoded by the ops that serve it, never read as such


def test_quantized_tensor_to_jax_is_a_clear_error():
    q = torch.quantize_per_tensor(torch.ones(2), 0.1, 0, torch.qint8)
    with pytest.raises((TypeError, RuntimeError, NotImplementedError)) as info:
        q.to("jax")
    _assert_names_dtype_and_device(info.value, "qint8")


def test_quantized_factory_on_jax_is_a_clear_error():
    with pytest.raises((TypeError, RuntimeError, NotImplementedError)) as info:
        torch.empty(2, dtype=torch.quint8, device="jax")
    _assert_names_dtype_and_device(info.value, "quint8")


def test_unsupported_dtype_error_class_is_public():
    assert issubclass(jaxdev.UnsupportedDtypeError, Exception)
    with pytest.raises(jaxdev.UnsupportedDtypeError):
        torch.empty(2, dtype=torch.quint8, device="jax")


@pytest.mark.parametrize("dtype", [torch.float8_e4m3fn, torch.float8_e5m2], ids=str)
def test_float8_round_trips_or_fails_clearly(dtype):
    cpu = torch.tensor([0.0, 1.0, -2.0, 0.5, 448.0 if dtype == torch.float8_e4m3fn else 57344.0]).to(dtype)
    try:
        on_jax = cpu.to("jax")
    except (TypeError, RuntimeError, NotImplementedError) as err:
        _assert_names_dtype_and_device(err, str(dtype).split(".")[1])
        return
    assert on_jax.dtype == dtype
    assert torch.equal(bits(on_jax.cpu()), bits(cpu))


# --- float -> integer conversion of values out of range (copy_, to, sum(dtype=), cumsum(dtype=)) ---

_OUT_OF_RANGE = [300.0, -1.0, -129.0, 255.9, 256.0, 70000.0, -40000.0, 65536.5, 3000000007.0, -3000000007.0,
                 5e9 + 3, 2.0**40 + 5, -(2.0**40) - 5, 2.0**31, -(2.0**31), 2.0**31 + 1, 2.0**63, -(2.0**63),
                 1e30, -1e30, math.nan, math.inf, -math.inf, -0.5, 0.99, -0.0]  # fmt: skip
_INTS = [torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64, torch.bool]
_FLOATS = [torch.float16, torch.bfloat16, torch.float32, torch.float64, torch.complex64, torch.complex128]


@pytest.mark.usefixtures("no_fallback")
@pytest.mark.skipif(not dtypes._X86, reason="CPU PyTorch's conversion was measured (and is emulated) on x86")
@pytest.mark.parametrize("src", _FLOATS, ids=str)
@pytest.mark.parametrize("dst", _INTS, ids=str)
def test_float_to_integer_conversion_of_out_of_range_values_is_cpus(src, dst):
    values = torch.tensor(_OUT_OF_RANGE, dtype=torch.float64).to(src)
    if src.is_complex:
        values = values + 2j
    on_both(lambda d: values.to(d).to(dst))
    on_both(lambda d: torch.zeros(len(_OUT_OF_RANGE), dtype=dst, device=d).copy_(values.to(d)))
    on_both(lambda d: values.to(d)[::2].to(dst))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_float64_converts_to_a_half_through_float32_as_cpu(dtype):
    """c10's halves are built from float: a double just above a float that is a half's tie rounds to
    that float, then to even (two roundings). XLA's one-step convert rounds once on a CPU with native
    float16, so dtypes.convert writes the step through float32 (issue 41): the program holds no
    float64 -> half convert, and the values are CPU's."""
    eps = torch.finfo(dtype).eps
    base = torch.rand(4000, generator=torch.Generator().manual_seed(0), dtype=torch.float64) + 1
    ties = base.to(dtype).to(torch.float64) * (1 + eps / 2 * (1 + 1e-12))
    x = torch.cat([base, ties, -ties])
    assert_same(x.to(JAX).to(dtype), x.to(dtype))
    program = jax.jit(lambda v: dtypes.convert(v, dtypes.to_jax_dtype(dtype)))
    assert program_hazards(program, jnp.ones(4, jnp.float64)) == []
