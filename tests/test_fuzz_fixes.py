"""Regressions for the differences the hostile-input fuzz (tests/fuzz_cases.py, seed 20261201, 3000
cases) found: each test compares jax with CPU, values or the exception class (and message)."""

from __future__ import annotations

import math

import pytest
import torch
from jaxdev_testing import on_both

import jaxdev
from jaxdev import dtypes


@pytest.fixture(autouse=True)
def _no_fallback(monkeypatch):
    monkeypatch.setenv("JAXDEV_FALLBACK", "error")
    jaxdev.reset_fallback_counts()
    yield
    assert jaxdev.fallback_counts() == {}


def _raises_as_cpu(fn):
    """fn(device) raises on CPU, and on jax with the same class and message."""
    err = on_both(fn)
    assert isinstance(err, Exception), "CPU did not raise"
    cpu = None
    try:
        fn(torch.device("cpu"))
    except Exception as e:
        cpu = e
    assert str(err) == str(cpu), f"jax: {err!r}, CPU: {cpu!r}"


# --- float -> integer conversion of values out of range (copy_, to, sum(dtype=), cumsum(dtype=)) ---

_OUT_OF_RANGE = [300.0, -1.0, -129.0, 255.9, 256.0, 70000.0, -40000.0, 65536.5, 3000000007.0, -3000000007.0,
                 5e9 + 3, 2.0**40 + 5, -(2.0**40) - 5, 2.0**31, -(2.0**31), 2.0**31 + 1, 2.0**63, -(2.0**63),
                 1e30, -1e30, math.nan, math.inf, -math.inf, -0.5, 0.99, -0.0]  # fmt: skip
_INTS = [torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64, torch.bool]
_FLOATS = [torch.float16, torch.bfloat16, torch.float32, torch.float64, torch.complex64, torch.complex128]


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


@pytest.mark.skipif(not dtypes._X86, reason="CPU PyTorch's conversion was measured (and is emulated) on x86")
def test_reductions_with_an_integer_dtype_convert_as_cpu():
    x = torch.tensor([[300.5, -1.0, 1e10], [70000.0, math.nan, -40000.0]], dtype=torch.complex128)
    for dt in (torch.int16, torch.uint8, torch.int32):
        on_both(lambda d, dt=dt: x.to(d).sum(dtype=dt))
        on_both(lambda d, dt=dt: x.to(d).sum(0, dtype=dt))
        on_both(lambda d, dt=dt: x.real.to(d).cumsum(1, dtype=dt))
    on_both(lambda d: torch.tensor(3e9, dtype=torch.float32, device=d).cumsum(-1, dtype=torch.int32))


def test_linspace_with_an_integer_dtype_converts_its_ends_first():
    for dt in (torch.uint8, torch.int8, torch.int16, torch.int64):
        for args in [(-1, 10, 5), (-3, 4, 7), (250, -10, 6), (0.5, 3.7, 4), (-1, 10, 2)]:
            on_both(lambda d, a=args, dt=dt: torch.linspace(*a, dtype=dt, device=d))
    on_both(lambda d: torch.linspace(0, 1, 1, dtype=torch.bool, device=d))
    _raises_as_cpu(lambda d: torch.linspace(0, 1, 3, dtype=torch.bool, device=d))


# --- argument checks --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "fn",
    [
        lambda d: torch.add(torch.ones(2, dtype=torch.complex128, device=d), torch.ones(2, device=d), alpha=True),
        lambda d: torch.add(torch.ones(2, dtype=torch.int16, device=d), -0.0, alpha=True),
        lambda d: torch.add(torch.ones(2, dtype=torch.int64, device=d), torch.ones(2, device=d).long(), alpha=False),
        lambda d: torch.sub(torch.ones(2, device=d), 1.0, alpha=True),
    ],
)
def test_a_bool_alpha_is_refused_unless_the_result_is_bool(fn):
    _raises_as_cpu(fn)
    on_both(
        lambda d: torch.add(torch.tensor([True, False], device=d), torch.tensor([False, True], device=d), alpha=True)
    )


@pytest.mark.parametrize("shifts,dims", [([5, 1], [0, 0]), ([-2], [-1]), (1, 0)])
def test_roll_of_a_0_dim_tensor_along_a_dim_is_an_index_error(shifts, dims):
    _raises_as_cpu(lambda d: torch.roll(torch.tensor(3.0, device=d), shifts, dims))
    on_both(lambda d: torch.roll(torch.tensor(3.0, device=d), 1))


@pytest.mark.parametrize("dims", [[-1, -1, -(2**40)], [0, 0], [1, 1, 9], [0, -2]])
def test_flip_reports_a_repeated_dim_before_an_out_of_range_one(dims):
    _raises_as_cpu(lambda d: torch.flip(torch.zeros(2, 3, device=d), dims))
    _raises_as_cpu(lambda d: torch.flip(torch.tensor(1.0, device=d), dims))


_B = torch.tensor(True)


@pytest.mark.parametrize(
    "lo,hi", [(True, True), (True, None), (None, False), (_B, _B), (_B, None), (None, _B), (0, None), (1, _B)]
)
def test_clamp_of_bool_tensors_is_refused_as_on_cpu(lo, hi):
    def fn(d):
        on = [v.to(d) if isinstance(v, torch.Tensor) else v for v in (lo, hi)]
        return torch.clamp(torch.tensor([True, False], device=d), *on)

    on_both(fn)


@pytest.mark.parametrize("lo,hi", [(-math.inf, torch.tensor(1 + 1j)), (1 + 1j, None), (1 + 0j, None), (None, 2j)])
def test_clamp_with_a_complex_bound_is_not_implemented(lo, hi):
    def fn(d):
        on = [v.to(d) if isinstance(v, torch.Tensor) else v for v in (lo, hi)]
        return torch.clamp(torch.tensor([3, -2], dtype=torch.int8, device=d), *on)

    on_both(fn)


# --- sum/prod out=, mul by a bool, masked_fill's scalar ------------------------------------------------


@pytest.mark.parametrize(
    "fn",
    [
        lambda d: torch.sum(
            torch.ones(3, 2, device=d, dtype=torch.int32),
            1,
            dtype=torch.int8,
            out=torch.empty(3, dtype=torch.complex64, device=d),
        ),
        lambda d: torch.sum(torch.ones(3, 2, device=d), 1, dtype=torch.float64, out=torch.empty(3, device=d)),
        lambda d: torch.prod(torch.ones(3, 2, device=d), 1, dtype=torch.int8, out=torch.empty(3, device=d)),
        lambda d: torch.sum(torch.tensor(1 + 2j, device=d), 0, out=torch.empty(0, device=d)),
        lambda d: torch.sum(
            torch.full((2, 3), 100.7, dtype=torch.float16, device=d), 1, out=torch.empty((), dtype=torch.int8, device=d)
        ),
        lambda d: torch.prod(torch.full((2, 3), 1 + 1j, device=d), 1, out=torch.empty(2, device=d)),
        lambda d: torch.sum(torch.full((2, 3), 0.5, device=d), 1, out=torch.empty(2, dtype=torch.bool, device=d)),
    ],
)
def test_sum_and_prod_out_take_outs_dtype_and_check_dtype(fn):
    on_both(fn)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.complex128])
@pytest.mark.parametrize("other", [False, True, "tensor"])
def test_mul_by_a_bool_keeps_inf_times_zero_nan(dtype, other):
    x = torch.tensor([math.inf, -math.inf, math.nan, 1.0, -0.0], dtype=torch.float64).to(dtype)
    if dtype.is_complex:
        x = x + 0j
    mask = torch.tensor([False, True, False, False, True])
    on_both(lambda d: torch.mul(x.to(d), mask.to(d) if other == "tensor" else other))
    on_both(lambda d: torch.mul(mask.to(d) if other == "tensor" else torch.tensor(other, device=d), x.to(d)))


@pytest.mark.parametrize("dtype", [torch.int32, torch.uint8, torch.bool, torch.float16])
@pytest.mark.parametrize("value", [2**31, -(2**31) - 1, math.inf, math.nan, 1e10, 2.5, 1 + 1j, 300, -1])
def test_masked_fill_checks_a_scalar_value_whatever_the_mask(dtype, value):
    for mask in ([True, False, True], [False, False, False]):
        on_both(lambda d, m=mask: torch.zeros(3, dtype=dtype, device=d).masked_fill(torch.tensor(m, device=d), value))


@pytest.mark.parametrize("dtype", [torch.int8, torch.uint8, torch.int32, torch.float16, torch.float32, torch.bool])
@pytest.mark.parametrize(
    "value",
    [(300.0, torch.bfloat16), (100.7, torch.float32), (-129, torch.int64), (-5, torch.int64), (1e6, torch.float64),
     (math.inf, torch.float32), (math.nan, torch.float64), (1 + 2j, torch.complex64), (3.0 + 0j, torch.complex128),
     (7, torch.int16)],
    ids=str,
)  # fmt: skip
def test_a_zero_dim_tensor_value_is_checked_like_cpus_scalar(dtype, value):
    """masked_fill with a 0-dim tensor value, and index_put_ of one through a bool mask (masked_fill on
    CPU): CPU reads the value and converts it with c10's checked conversion (300.0 into int8 raises)."""
    v, vdt = value
    mask = [True, False, True, False]
    on_both(
        lambda d: torch.zeros(4, dtype=dtype, device=d).masked_fill(
            torch.tensor(mask, device=d), torch.tensor(v, dtype=vdt, device=d)
        )
    )
    on_both(
        lambda d: torch.zeros(4, dtype=dtype, device=d).index_put_(
            (torch.tensor(mask, device=d),), torch.tensor(v, dtype=vdt, device=d)
        )
    )


def test_a_zero_dim_tensor_value_is_checked_inside_a_compiled_program():
    def fill(x, m, v):
        return x.masked_fill(m, v) + 1

    compiled = torch.compile(fill, backend="jax", fullgraph=True)
    x, m = torch.zeros(4, dtype=torch.int8, device="jax"), torch.tensor([True, False, True, False], device="jax")
    assert compiled(x, m, torch.tensor(7.9, device="jax")).tolist() == [8, 1, 8, 1]
    with pytest.raises(RuntimeError, match="value cannot be converted to type int8_t without overflow"):
        compiled(x, m, torch.tensor(300.0, device="jax")).tolist()  # a program's checks are read with its values


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64, torch.uint8, torch.int8, torch.float32, torch.float16])
@pytest.mark.parametrize(
    "args",
    [(-2, 2**50, math.inf), (0.0, 10.0, math.inf), (0, 2**50, 1e30), (0, 5, 2**63 - 1), (0, 5, math.nan),
     (0, math.inf, 1), (0, 5, 0.5), (0.5, 7.9, 1.5), (-3.7, 4, 2), (10, 0, -2.5), (0, 300, 7)],
)  # fmt: skip
def test_arange_with_an_integral_dtype_takes_its_scalars_as_int64(args, dtype):
    on_both(lambda d: torch.arange(*args, dtype=dtype, device=d))


_C = [complex(math.inf, 0), 1 + 0j, complex(0, math.inf), 1 + 1j, complex(math.nan, 0), complex(-math.inf, 2)]


@pytest.mark.parametrize("dtype", [torch.complex64, torch.complex128])
@pytest.mark.parametrize(
    "fn",
    [
        lambda a, b: a + b,
        lambda a, b: b - a,
        lambda a, b: torch.sub(a, b, alpha=2),
        lambda a, b: torch.add(a, b, alpha=1 + 1j),
        lambda a, b: a.real + b,
        lambda a, b: torch.rsub(a, b),
        lambda a, b: a + math.inf,
    ],
)
def test_complex_add_and_sub_multiply_by_alpha_as_cpu(fn, dtype):
    a, b = torch.tensor(_C, dtype=dtype), torch.tensor(_C[::-1], dtype=dtype)
    on_both(lambda d: fn(a.to(d), b.to(d)))


@pytest.mark.parametrize("args", [(math.nan, 10, 5), (1 + 2j, 3 - 1j, 7), (complex(math.inf, 0), 1, 4), (0, 2j, 3)])
def test_complex_linspace_scales_its_step_by_a_real_index(args):
    on_both(lambda d: torch.linspace(*args, dtype=torch.complex64, device=d), rtol=1.3e-6, atol=1e-5)


@pytest.mark.parametrize(
    "shape,pad",
    [((5, 0, 0, 4), [-3, 5, 1, 2, 5, -3, 2, 5]), ((2, 3), [-4, 1]), ((2, 3), [1, -4]), ((2, 3), [-3, -1]),
     ((2, 3), [2, -3, -1, 0]), ((1, 2, 3), [0, -1, -5, 7]), ((3,), [-3, 5]), ((2, 3), [-2, -1, 1, 0])],
)  # fmt: skip
def test_constant_pad_narrows_for_negative_pads_first(shape, pad):
    x = torch.arange(float(math.prod(shape))).reshape(shape)
    on_both(lambda d: torch.nn.functional.pad(x.to(d), pad))
