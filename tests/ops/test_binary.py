"""jaxdev/ops/binary/: dtype refusals, numbers beside half tensors, division, powers, complex alpha,
against CPU PyTorch."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from closeness import three_way
from jaxdev_testing import JAX, assert_same, check, like_cpu, on_both, raises_as_cpu

from jaxdev.ops.kit import capabilities

pytestmark = pytest.mark.usefixtures("no_fallback")

# --- Binary ops refuse the operand dtypes CPU's kernels refuse, with CPU's error, where jnp would compute
# something (complex lt, maximum, atan2; hypot of integers) or raise an error of its own (bitwise ops of
# floats, copysign and hypot of complex).


_OPS = ["maximum", "minimum", "fmax", "fmin", "bitwise_and", "bitwise_or", "bitwise_xor", "atan2", "hypot"]
_OPS += ["copysign", "eq", "ne", "lt", "le", "gt", "ge", "logical_and", "logical_or", "logical_xor"]
_DTYPES = [torch.complex64, torch.float32, torch.bfloat16, torch.int32, torch.bool]


def _outcome(fn, *args):
    try:
        r = fn(*args)
    except Exception as e:
        return ("raised", type(e), str(e))
    return ("ok", r.dtype, r.cpu())


@pytest.mark.parametrize("dtype", _DTYPES, ids=str)
@pytest.mark.parametrize("name", _OPS)
def test_binary_ops_accept_and_refuse_dtypes_as_cpu_does(name, dtype):
    torch.manual_seed(0)
    a, b = (torch.randn(6) * 3).to(dtype), (torch.randn(6) * 3).to(dtype)
    fn = getattr(torch, name)
    for args in ((a, b), (a, 2)) if name in ("lt", "eq", "bitwise_and", "copysign") else ((a, b),):
        want = _outcome(fn, *args)
        got = _outcome(fn, *[x.to("jax") if isinstance(x, torch.Tensor) else x for x in args])
        assert got[:2] == want[:2], (got, want)
        if want[0] == "raised":
            assert got[2] == want[2]
        else:
            torch.testing.assert_close(got[2], want[2], equal_nan=True)


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.bfloat16, torch.int8])
def test_floor_divide_in_place_runs_on_jax(dtype):
    """`x //= y` (floor_divide_.Tensor) had no kernel: its overload name does not pair it with
    floor_divide.default, so it ran on the CPU fallback."""

    def divide(d):
        x = (torch.arange(-12, 12).reshape(4, 6) * 3).to(dtype).to(d)
        y = torch.tensor([5, -4, 7, 2, -3, 9]).to(dtype).to(d)
        x //= y
        return x

    like_cpu(divide)
    like_cpu(lambda d: torch.arange(6.0, device=d).floor_divide_(torch.ones(2, 6, device=d)))
    # read back: a division by zero is a value check, which fused eager raises at the next sync (README)
    like_cpu(lambda d: torch.arange(6, device=d).floor_divide_(torch.zeros(6, dtype=torch.long, device=d)).cpu())


def t(device, values, dtype=None):
    return torch.tensor(values, device=device, dtype=dtype)


def _halves(device, dtype):
    return t(device, [1.0, 2.0, 3.0, 256.0, 0.5, -1.0], dtype)


# Half and bfloat16 tensors with a Python number or a float32 0-dim tensor: TensorIterator casts the
# number to the tensor's dtype first (so half 1 == 1.0001), except where CPU's kernel reads it unrounded
# (mul and the divisions).
SCALAR_OPS = {
    "eq": lambda a, b: a == b,
    "lt": lambda a, b: a < b,
    "ge": lambda a, b: a >= b,
    "add": lambda a, b: a + b,
    "sub": lambda a, b: a - b,
    "rsub": lambda a, b: b - a,
    "mul": lambda a, b: a * b,
    "div": lambda a, b: a / b,
    "fmod": torch.fmod,
    "remainder": torch.remainder,
    "floor_divide": lambda a, b: a // b,
    "div trunc": lambda a, b: torch.div(a, b, rounding_mode="trunc"),
    "atan2": torch.atan2,
    "hypot": torch.hypot,
}


TAKES_TENSORS_ONLY = {"atan2", "hypot"}


@pytest.mark.parametrize("number", [1.0001, 1.001, 0.1, 2.7, 3.3333])
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize(
    "name, as_tensor",
    [
        (name, as_tensor)
        for name in SCALAR_OPS
        for as_tensor in (False, True)
        if as_tensor or name not in TAKES_TENSORS_ONLY
    ],
)
def test_numbers_beside_half_tensors(name, as_tensor, dtype, number):
    outs = []
    for device in ("cpu", JAX):
        other = t(device, number) if as_tensor else number
        outs.append(SCALAR_OPS[name](_halves(device, dtype), other))
    assert_same(outs[1], outs[0])


BINARY = {
    "logaddexp": (torch.logaddexp, torch.randn(6) * 20, torch.randn(6) * 20),
    "logaddexp_inf": (
        torch.logaddexp,
        torch.tensor([float("inf"), -float("inf"), 1.0]),
        torch.tensor([float("inf"), -float("inf"), -float("inf")]),
    ),
    "logaddexp_complex": (
        torch.logaddexp,
        torch.randn(5, dtype=torch.complex64),
        torch.randn(5, dtype=torch.complex64),
    ),
    "logaddexp2": (torch.logaddexp2, torch.randn(6) * 20, torch.randn(6) * 20),
    "nextafter": (torch.nextafter, torch.tensor([0.0, 1.0, -1.0, 3.0]), torch.tensor([1.0, 0.0, -2.0, 3.0])),
    "heaviside": (torch.heaviside, torch.tensor([-1.0, 0.0, 2.0, 0.0]), torch.tensor([0.5, 0.25, 0.5, 1.0])),
    "floor_divide": (torch.floor_divide, torch.tensor([7.0, -7.0, 7.5, -0.0]), torch.tensor([2.0, 2.0, -2.0, 3.0])),
    "floor_divide_int": (torch.floor_divide, torch.tensor([7, -7, 9, -9]), torch.tensor([2, 2, -4, 4])),
    "floor_divide_scalar": (lambda a: torch.floor_divide(a, 3), torch.tensor([7, -7, 9, -9])),
    "rsub_alpha": (lambda a, b: torch.rsub(a, b, alpha=2), torch.randn(5), torch.randn(5)),
    "nan_to_num": (
        lambda a: torch.nan_to_num(a, nan=1.5, posinf=9.0),
        torch.tensor([float("nan"), float("inf"), -float("inf"), 2.0]),
    ),
    "nan_to_num_default": (
        torch.nan_to_num,
        torch.tensor([float("nan"), float("inf"), -float("inf"), 2.0], dtype=torch.float16),
    ),
}


@pytest.mark.parametrize("name", list(BINARY))
def test_binary_like_cpu(name):
    fn, *inputs = BINARY[name]
    check(fn, *inputs, grad=False)


@pytest.mark.parametrize(
    "divide",
    [
        torch.floor_divide,
        lambda a, b: torch.div(a, b, rounding_mode="floor"),
        lambda a, b: torch.div(a, b, rounding_mode="trunc"),
        lambda a, b: a.div_(b, rounding_mode="floor"),
        torch.remainder,
    ],
    ids=["floor_divide", "div floor", "div trunc", "div_ floor", "remainder"],
)
def test_integer_division_by_zero_raises_like_cpu(divide):
    with pytest.raises(Exception) as on_cpu:
        divide(torch.tensor([1]), torch.tensor([0]))
    with pytest.raises(on_cpu.type, match=str(on_cpu.value)):
        divide(torch.tensor([1], device=JAX), torch.tensor([0], device=JAX)).cpu()


# --- pow(Tensor, Scalar): CPU's specialised exponents -------------------------------------------------


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
@pytest.mark.parametrize("exponent", [0, 1, 2, 3, -2, -1, 0.5, -0.5, True, False, 2.001, 3.0078125])
def test_pow_scalar_specialised_exponents_bit_exact(dtype, exponent):
    vals = [0.0, -0.0, 1.0, -1.0, 2.5, -3.5, 1e-30, 1e30, math.inf, -math.inf, math.nan, 1e-8]
    x = torch.cat([torch.tensor(vals), torch.randn(64, generator=torch.Generator().manual_seed(1)) * 3]).to(dtype)
    # sqrt and rsqrt (XLA's, as the sqrt and rsqrt kernels) and the general power are 1 ulp from libm's
    ulp = torch.finfo(dtype).eps
    rtol = ulp if exponent in (0.5, -0.5) or (dtype != torch.bfloat16 and exponent in (2.001, 3.0078125)) else 0
    assert_same(x.to(JAX).pow(exponent), x.pow(exponent), rtol=rtol)


@pytest.mark.parametrize("dtype", [torch.complex64, torch.complex128])
@pytest.mark.parametrize("exponent", [0, 1, 2, 3, -2, -1, 0.5, 2.0, 1.5])
def test_pow_scalar_complex_like_cpu(dtype, exponent):
    z = torch.randn(200, dtype=dtype, generator=torch.Generator().manual_seed(2)) * 2
    eps = torch.finfo(z.real.dtype).eps
    assert_same(z.to(JAX).pow(exponent), z.pow(exponent), rtol=8 * eps, atol=0)
    if exponent in (0, 1):
        z = torch.tensor([complex(math.nan, 1), complex(math.inf, -math.inf), 0j], dtype=dtype)
        assert_same(z.to(JAX).pow(exponent), z.pow(exponent))


def test_pow_scalar_complex_square_is_a_product():
    # exp(2 log z) was 7x less exact than z * z on complex64
    z = torch.randn(400, dtype=torch.complex64, generator=torch.Generator().manual_seed(3))
    jax_err, cpu_err = three_way(lambda t: t.pow(2), [z], torch.complex64, atol=1e-7, rtol=1e-7)
    assert jax_err <= 2 * cpu_err + 0.01


def _gen(seed=0):
    return torch.Generator().manual_seed(seed)


# --- pow_(Scalar): the in-place of pow.Tensor_Scalar (its name pairs it with pow.Scalar) ----------


@pytest.mark.parametrize("exponent", [0.3, -0.5, 0.5, -1.0, 2.0, 3.0, -2.0, 1.5])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
def test_pow_inplace_scalar_as_out_of_place(dtype, exponent):
    # 128 elements: CPU's vector loop covers them all, so the values do not depend on its scalar tail
    x = (torch.rand(128, generator=_gen(7)) * 10 + 0.5).to(dtype)
    tol = {"rtol": 1e-6} if dtype == torch.float32 else {}  # float32 std::pow vs XLA's: an ulp
    assert_same(x.to(JAX).pow(exponent), x.pow(exponent), **tol)
    inplace = x.to(JAX)
    inplace.pow_(exponent)
    assert_same(inplace, x.clone().pow_(exponent), **tol)


def test_pow_inplace_scalar_checks_as_cpu():
    with pytest.raises(RuntimeError, match="can't be cast"):
        torch.arange(1, 4, device=JAX).pow_(0.5)
    x = torch.arange(1, 4, device=JAX)
    x.pow_(2)
    assert_same(x, torch.arange(1, 4) ** 2)


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
    raises_as_cpu(fn)
    on_both(
        lambda d: torch.add(torch.tensor([True, False], device=d), torch.tensor([False, True], device=d), alpha=True)
    )


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.complex128])
@pytest.mark.parametrize("other", [False, True, "tensor"])
def test_mul_by_a_bool_keeps_inf_times_zero_nan(dtype, other):
    x = torch.tensor([math.inf, -math.inf, math.nan, 1.0, -0.0], dtype=torch.float64).to(dtype)
    if dtype.is_complex:
        x = x + 0j
    mask = torch.tensor([False, True, False, False, True])
    on_both(lambda d: torch.mul(x.to(d), mask.to(d) if other == "tensor" else other))
    on_both(lambda d: torch.mul(mask.to(d) if other == "tensor" else torch.tensor(other, device=d), x.to(d)))


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


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.int8, torch.uint8])
def test_integer_pow_wraps_as_cpu_for_every_exponent_bit(dtype):
    # JAX's integer power reads only an exponent's low 6 bits: 2 ** 64 gave 1 (CPU 0) and (-55) ** 127
    # another wrapped value than CPU's (found by OpInfo's reference inputs, __rpow__ int64)
    info = torch.iinfo(dtype)
    g = torch.Generator().manual_seed(0)
    base = torch.randint(max(info.min, -300), min(info.max, 300), (500,), generator=g).to(dtype)
    exponent = torch.randint(0, min(info.max, 300), (500,), generator=g).to(dtype)
    base[:3], exponent[:3] = torch.tensor([2, -1, 3]).to(dtype), torch.tensor([64, 65, 127]).to(dtype)
    assert torch.equal(torch.pow(base.to("jax"), exponent.to("jax")).cpu(), torch.pow(base, exponent))
    assert torch.equal(torch.pow(base.to("jax"), 127).cpu(), torch.pow(base, 127))
    assert torch.equal(torch.pow(3, exponent.to("jax")).cpu(), torch.pow(3, exponent))


@pytest.mark.parametrize("dtype", [torch.float64, torch.float16, torch.int64, torch.uint8])
def test_number_remainder_tensor_on_jax_as_cpu(dtype):
    # remainder.Scalar_Tensor (`7 % t`, __rmod__) ran on the CPU fallback (OpInfo's reference inputs)
    x = (torch.randn(50, generator=torch.Generator().manual_seed(0)) * 20).to(dtype)
    x = torch.where(x == 0, torch.ones_like(x), x)
    for number in (7, -3, 2.5, 0):
        got, want = (number % x.to(JAX)).cpu(), number % x
        assert got.dtype == want.dtype and torch.equal(got, want)


_DIVISIONS = {
    "by a number": lambda x, y: x / 3.7,
    "by a 0-d tensor": lambda x, y: x / y[0, 0],
    "by a broadcast column": lambda x, y: x / y[:, :1],
    "in place by a number": lambda x, y: x.clone().div_(0.1),
    "gradient's spacing": lambda x, y: torch.gradient(x, spacing=3.7, dim=1)[0],
    "addcdiv by a column": lambda x, y: torch.addcdiv(x, x, y[:, :1], value=0.3),
}


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("case", list(_DIVISIONS), ids=str)
def test_division_by_a_broadcast_divisor_is_cpus_true_division(case, dtype):
    """XLA's simplifier made a / broadcast(b) into a * (1 / b): 1 ulp off CPU for ~40 % of float32
    elements (x / 3.7; PyTorch's test_gradient_all failed on it). Bit for bit as CPU now."""
    if dtype == torch.float64 and capabilities.fact("float64_emulated"):
        pytest.skip("float64 is float32 pairs on this platform (a TPU): its divisions are not IEEE float64's")
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(16, 40, generator=gen).to(dtype)
    y = (torch.rand(16, 40, generator=gen) + 0.5).to(dtype)
    want = _DIVISIONS[case](x, y)
    got = _DIVISIONS[case](x.to(JAX), y.to(JAX)).cpu()
    assert torch.equal(got, want), f"{(got != want).sum().item()} of {want.numel()} elements differ"


@pytest.mark.parametrize("op", ["__ilshift__", "__irshift__"])
def test_in_place_shifts_check_overlap_first_as_cpu(op):
    """`x[:-1] <<= x[1:]` raised CPU's dtype error on jax (the CPU fallback's copies hid the overlap);
    CPU checks the overlap first (PyTorch's test_shift_mem_overlap)."""
    results = []
    for device in ("cpu", JAX):
        x = torch.rand(3, device=device)
        n = torch.tensor([5, 6, 7], dtype=torch.int32, device=device)
        for target, other in ((x[:-1], x[1:]), (n, torch.tensor(1, device=device))):
            try:
                results.append(getattr(target, op)(other).cpu().tolist())
            except (RuntimeError, NotImplementedError) as e:
                results.append(str(e))
    assert results[:2] == results[2:]


@pytest.mark.tpu_fact("float32 division is not IEEE's on a TPU")
@pytest.mark.parametrize("mode", ["trunc", "floor"])
def test_rounded_division_of_exact_multiples_where_division_is_approximate(mode, tpu_policy, tpu_division):
    """a / b an integer k in IEEE's division: a TPU's quotient a few ulps below k truncated to k - 1
    (with the division emulated 2 ulps off, 1,024 ulps from CPU in benchmarks/tpu_emulated_ulps.py);
    trunc and floor divide through cpu_numerics.divide, CPU's quotient."""
    g = torch.Generator().manual_seed(5)
    b = torch.rand(20_000, generator=g) * 200 - 100
    a = torch.randint(-1000, 1000, (20_000,), generator=g).float() * b
    assert_same(torch.div(a.to(JAX), b.to(JAX), rounding_mode=mode), torch.div(a, b, rounding_mode=mode))


@pytest.mark.tpu_fact("XLA's TPU functions are accurate absolutely, not to the result (log 3,084 ulps from CPU's)")
def test_logaddexp2_takes_jaxdevs_functions_where_chosen(tpu_policy, tpu_division, tpu_functions):
    """jnp.logaddexp2 is XLA's exp2 and log1p: with XLA's functions 1,000 ulps off (tests/tpu_functions.py)
    it was 78,667 ulps from CPU here; CPU's formula on jaxdev's functions, 6 (where the result cancels
    toward 0), within 2 away from it. Equal infinities and NaN as CPU's."""
    g = torch.Generator().manual_seed(6)
    a, b = torch.rand(2, 20_000, generator=g) * 200 - 100
    inf, nan = math.inf, math.nan
    a = torch.cat([a, torch.tensor([0.0, inf, -inf, nan, inf, -inf, 1.0])])
    b = torch.cat([b, torch.tensor([0.0, inf, -inf, 1.0, -inf, inf, nan])])
    want = torch.logaddexp2(a, b).numpy()
    got = torch.logaddexp2(a.to(JAX), b.to(JAX)).cpu().numpy()
    assert np.array_equal(np.isnan(got), np.isnan(want))
    finite = np.isfinite(want)
    assert np.array_equal(got[~finite & ~np.isnan(want)], want[~finite & ~np.isnan(want)])
    ulps = np.abs(got[finite].astype(np.float64) - want[finite]) / np.spacing(np.abs(want[finite]))
    assert ulps[np.abs(want[finite]) > 1].max() <= 2 and ulps.max() <= 8


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16])
def test_rounding_divisions_are_cpus_bits(dtype):
    """div(rounding_mode=trunc/floor) and floor_divide as CPU computes them: a broadcast divisor divided,
    not multiplied by its reciprocal (float64 -1.0019e8 / 1.0334e-9 truncated was 1 ulp off); a half
    tensor by a tensor in Half arithmetic, each operation rounded (float16 1179 / 2.6796875 truncated
    is 440, 439 from float32's quotient), by a 0-d tensor or a number in float."""
    g = torch.Generator().manual_seed(0)
    a = (torch.randn(50, 1, generator=g, dtype=torch.float64) * 1000).to(dtype)
    b = (torch.randn(40, generator=g, dtype=torch.float64) * 3).to(dtype)
    same = dict(rtol=0, atol=0, equal_nan=True)
    for divisor in (b, b[3], 2.7):
        jax_divisor = divisor.to(JAX) if isinstance(divisor, torch.Tensor) else divisor
        for mode in ("trunc", "floor"):
            want = torch.div(a, divisor, rounding_mode=mode)
            torch.testing.assert_close(torch.div(a.to(JAX), jax_divisor, rounding_mode=mode).cpu(), want, **same)
        torch.testing.assert_close(
            torch.floor_divide(a.to(JAX), jax_divisor).cpu(), torch.floor_divide(a, divisor), **same
        )


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("alpha", [0.3, -2.1, 3])
def test_half_add_and_sub_take_alpha_in_the_tensors_dtype(dtype, alpha):
    """CPU's float16/bfloat16 add, sub, rsub and foreach add multiply by alpha converted to the dtype,
    computing in float (alpha kept a float put 15-54 % of the elements an ulp or more off). 1024
    elements: CPU's vectorized loop covers them all (its scalar tail rounds each step in half)."""
    g = torch.Generator().manual_seed(3)
    a, b = ((torch.randn(1024, generator=g) * 3).to(dtype) for _ in range(2))
    aj, bj = a.to(JAX), b.to(JAX)
    for op in (torch.add, torch.sub, torch.rsub):
        assert_same(op(aj, bj, alpha=alpha), op(a, b, alpha=alpha))
    for got, want in zip(
        torch._foreach_add([aj, bj], [bj, aj], alpha=alpha), torch._foreach_add([a, b], [b, a], alpha=alpha)
    ):
        assert_same(got, want)
