"""jaxdev/ops/creation/: factories and fills, ranges (arange, linspace, logspace), windows, triangle
indices, against CPU PyTorch."""

from __future__ import annotations

import math
import warnings

import pytest
import torch
from jaxdev_testing import JAX, assert_same, like_cpu, on_both, raises_as_cpu, result_or_error_as_cpu

import jaxdev
from jaxdev import tensor
from jaxdev.compiler.program import EagerGraphWarning

# --- ones/zeros/full and their _like and new_ forms: one jitted fill on jax for a plain request, PyTorch's
# composite for the rest; dtype, shape, strides, values and errors as on CPU, with no fallback.


X = torch.randn(3, 4)

CASES = {
    "ones_like": lambda d: torch.ones_like(X.to(d)),
    "zeros_like": lambda d: torch.zeros_like(X.to(d)),
    "full_like": lambda d: torch.full_like(X.to(d), 2.5),
    "ones_like transposed": lambda d: torch.ones_like(X.to(d).t()),
    "zeros_like sliced": lambda d: torch.zeros_like(X.to(d)[:, ::2]),
    "full_like transposed int8": lambda d: torch.full_like(X.to(d).t(), 7, dtype=torch.int8),
    "full_like overflowing int8": lambda d: torch.full_like(X.to(d), 300, dtype=torch.int8),
    "ones_like bool": lambda d: torch.ones_like(X.to(d), dtype=torch.bool),
    "zeros_like transposed contiguous": lambda d: torch.zeros_like(X.to(d).t(), memory_format=torch.contiguous_format),
    "ones_like channels_last": lambda d: torch.ones_like(
        torch.ones(2, 3, 4, 5).to(d, memory_format=torch.channels_last)
    ),
    "ones_like size-1 strides": lambda d: torch.ones_like(torch.ones(3, 1).to(d).t()),
    "zeros_like to cpu": lambda d: torch.zeros_like(X.to(d), device="cpu"),
    "zeros": lambda d: torch.zeros(2, 3, device=d),
    "ones empty": lambda d: torch.ones(0, 3, device=d),
    "ones half": lambda d: torch.ones(2, dtype=torch.float16, device=d),
    "ones complex": lambda d: torch.ones(3, dtype=torch.complex64, device=d),
    "full bool": lambda d: torch.full((2,), True, device=d),
    "full int": lambda d: torch.full((2,), 3, device=d),
    "full complex": lambda d: torch.full((2,), 1 + 2j, device=d),
    "full float": lambda d: torch.full((3, 1), 1.5, device=d),
    "full past int64": lambda d: torch.full((2,), 2**70, device=d),
    "full nan int32": lambda d: torch.full((2,), float("nan"), dtype=torch.int32, device=d),
    "zeros negative": lambda d: torch.zeros(-1, device=d),
    "ones negative": lambda d: torch.ones(-2, device=d),
    "full negative": lambda d: torch.full((3, -1), 1.0, device=d),
    "zeros overflowing": lambda d: torch.zeros(2**62, 8, device=d),
    "new_zeros": lambda d: X.to(d).new_zeros((2, 5)),
    "new_ones int64": lambda d: X.to(d).new_ones(3, dtype=torch.int64),
    "new_full": lambda d: X.to(d).new_full((2, 2), -1),
    "new_zeros negative": lambda d: X.to(d).new_zeros((-1,)),
}


@pytest.mark.parametrize("name", list(CASES))
def test_factory_like_cpu(name):
    jaxdev.reset_fallback_counts()
    make = CASES[name]
    try:
        expected = make("cpu")
    except (RuntimeError, OverflowError) as cpu_error:
        with pytest.raises(type(cpu_error)) as jax_error:
            make(JAX)
        assert str(jax_error.value) == str(cpu_error)
        return
    got = make(JAX)
    if expected.device.type == "cpu" and got.device.type == "cpu":  # device="cpu" asked for
        torch.testing.assert_close(got, expected, equal_nan=True)
    else:
        assert_same(got, expected, check_stride=True)
    assert not jaxdev.fallback_counts()


def test_plain_factories_are_one_fill():
    """A plain request makes its values in one jitted fill, not empty's zeros then fill_'s write."""
    writes = []
    original = tensor.write
    try:
        tensor.write = lambda *a, **k: writes.append(a) or original(*a, **k)
        torch.ones_like(torch.ones(4, device=JAX))
        torch.zeros(3, device=JAX)
        torch.full((2, 2), 5.0, device=JAX)
        torch.ones(4, device=JAX).new_full((3,), 2)
    finally:
        tensor.write = original
    assert writes == []


_VALUES = (-0.5, -1, 1.5, 70000, 2**33, 2**64 - 1, float("inf"), float("nan"), 300.0, 1j, True, 0.5)
_DTYPES = (torch.uint16, torch.uint32, torch.uint64, torch.float8_e4m3fn, torch.float8_e5m2, torch.bool, torch.int8)


@pytest.mark.parametrize("dtype", _DTYPES)
def test_full_checks_and_converts_numbers_as_cpu(dtype):
    """c10's checked conversion of the fill value (uint16/32/64 were unchecked), its saturating
    float8_e4m3fn (XLA: NaN past 448) and a complex value's truth for bool (1j: True)."""
    for value in _VALUES:
        outcomes = []
        for d in ("cpu", JAX):
            try:
                outcomes.append(torch.full((2,), value, dtype=dtype, device=d).cpu().double().tolist())
            except RuntimeError as e:
                outcomes.append(str(e))
        assert str(outcomes[1]) == str(outcomes[0]), value


def test_float8_e4m3fn_conversion_saturates_as_cpu():
    v = torch.tensor([70000.0, 449.0, 465.0, 480.0, float("inf"), -float("inf"), float("nan"), -1e6, 240.5])
    expected = v.to(torch.float8_e4m3fn).float()
    got = v.to(JAX).to(torch.float8_e4m3fn).cpu().float()
    torch.testing.assert_close(got, expected, equal_nan=True, rtol=0, atol=0)


ARANGES = [
    (8,),
    (0, 5),
    (1, 10, 3),
    (10, 1, -2),
    (0, 5, 0.5),
    (0.5, 5),
    (0, 5, 0.5, torch.int32),
    (0, 1, 0.1, torch.float16),
    (0, 1, 0.1, torch.bfloat16),
    (0, 10, 1, torch.uint8),
    (True, 5),
    (0, 0),
    (5, 0),
    (0, 5, 0),
    (0, float("inf")),
    (-3, 3, 1, torch.int8),
    (0, 2**40, 2**38),
    (0, 5, 1, torch.bool),
    (0, 5, 1, torch.complex64),
    (1, 5, 1.5, torch.int64),
]


@pytest.mark.parametrize("case", ARANGES, ids=str)
def test_arange_like_cpu(case):
    """arange in one program (its composite made an empty tensor, grew it and wrote into it): values,
    inferred dtype and errors as CPU's."""
    jaxdev.reset_fallback_counts()
    args = [a for a in case if not isinstance(a, torch.dtype)]
    kwargs = {"dtype": case[-1]} if isinstance(case[-1], torch.dtype) else {}
    try:
        expected = torch.arange(*args, **kwargs)
    except (RuntimeError, ValueError) as cpu_error:
        with pytest.raises(type(cpu_error)) as jax_error:
            torch.arange(*args, device=JAX, **kwargs)
        assert str(jax_error.value) == str(cpu_error)
        return
    assert_same(torch.arange(*args, device=JAX, **kwargs), expected)
    assert not jaxdev.fallback_counts()


def test_arange_too_large_raises_at_once_as_cpu():
    """Past a GiB arange takes the composite's order: the byte count checked (CPU's message), then the
    allocation, which fails there and then (one program would fail later, asynchronously)."""
    with pytest.raises(RuntimeError, match=r"Storage size calculation overflowed with sizes=\[4611686018427387904\]"):
        torch.arange(0, 2**62, 1, device=JAX)
    with pytest.raises(torch.OutOfMemoryError):  # CPU: RuntimeError from its allocator (2**54 bytes)
        torch.arange(0, 2**50, 0.25, device=JAX)


@pytest.mark.parametrize(
    "src", [torch.int8, torch.uint8, torch.int16, torch.int32, torch.int64, torch.float16, torch.bfloat16]
)
@pytest.mark.parametrize("dst", [torch.float8_e4m3fn, torch.float8_e4m3fnuz, torch.float8_e5m2, torch.float8_e5m2fnuz])
def test_float8_conversion_from_each_dtype_as_cpu(src, dst):
    """c10 makes a float8 of an integer through float (XLA's CPU conversion of int8 gave -64 for every
    value), and float8_e4m3fn saturates."""
    if src == torch.uint8:
        v = torch.tensor([250, 3, 0, 1, 17, 255, 200], dtype=src)
    elif src == torch.int8:
        v = torch.tensor([-12, -88, 3, 0, 96, -64, 1, 127, -128], dtype=src)
    else:
        v = torch.tensor([500, -600, 3, 0, 100, 447, 1, 30000, -30000]).to(src)
    expected = v.to(dst).float()
    got = v.to(JAX).to(dst).cpu().float()
    torch.testing.assert_close(got, expected, equal_nan=True, rtol=0, atol=0)


aten = torch.ops.aten


# --- kaiser_window: PyTorch's factory calls a CPU kernel stub with no jax entry ----------------------------


@pytest.mark.usefixtures("no_fallback")
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("args", [(5,), (8, False), (6, True, 3.5), (7, False, -2.0), (2, False, 0.0), (300,)])
def test_kaiser_window_like_cpu(dtype, args):
    tol = {torch.float32: 2e-6, torch.float64: 1e-13, torch.float16: 1e-3, torch.bfloat16: 8e-3}[dtype]
    like_cpu(lambda d: torch.kaiser_window(*args, dtype=dtype, device=d), rtol=tol, atol=tol)


@pytest.mark.usefixtures("no_fallback")
def test_kaiser_window_overloads_and_edges():
    like_cpu(lambda d: aten.kaiser_window.default(9, device=d), rtol=2e-6, atol=2e-6)
    like_cpu(lambda d: aten.kaiser_window.periodic(9, False, device=d), rtol=2e-6, atol=2e-6)
    like_cpu(lambda d: aten.kaiser_window.beta(9, True, 4.0, device=d), rtol=2e-6, atol=2e-6)
    for n in (0, 1):
        like_cpu(lambda d, n=n: torch.kaiser_window(n, dtype=torch.float64, device=d))
    like_cpu(lambda d: torch.kaiser_window(3, True, float("inf"), device=d))  # NaN, as CPU
    like_cpu(lambda d: torch.kaiser_window(-1, device=d))  # RuntimeError (the composite's own check)
    like_cpu(lambda d: torch.kaiser_window(3, dtype=torch.complex64, device=d))  # arange's NotImplementedError
    w = torch.kaiser_window(4, dtype=torch.float64, device=JAX, requires_grad=True)
    assert w.requires_grad and w.is_leaf


@pytest.mark.usefixtures("no_fallback")
def test_kaiser_window_out_like_cpu():
    for dtype in (torch.float32, torch.float64):
        like_cpu(
            lambda d, t=dtype: aten.kaiser_window.beta_out(6, False, 2.5, out=torch.empty(0, dtype=t, device=d)),
            rtol=2e-6,
            atol=2e-6,
        )
        like_cpu(lambda d, t=dtype: aten.kaiser_window.out(5, out=torch.empty(3, dtype=t, device=d)), atol=2e-6)
        like_cpu(
            lambda d, t=dtype: aten.kaiser_window.periodic_out(5, False, out=torch.empty(0, dtype=t, device=d)),
            atol=2e-6,
        )
    like_cpu(lambda d: aten.kaiser_window.out(5, out=torch.empty(0, dtype=torch.int64, device=d)))


@pytest.mark.usefixtures("no_fallback")
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.int64, torch.int8, torch.uint8])
def test_logspace_like_cpu(dtype):
    for start, end, steps, base in [
        (0, 2, 5, 2.0),
        (-1, 3.3, 7, 10.0),
        (2, -3, 6, 3.0),
        (0.1, 10.7, 9, 2.5),
        (1, 1, 1, 2),
    ]:
        if dtype == torch.uint8 and start < 0:
            continue
        on_both(lambda d, a=(start, end, steps, base): torch.logspace(*a, dtype=dtype, device=d), rtol=1e-6)


@pytest.mark.usefixtures("no_fallback")
@pytest.mark.parametrize("below", [True, False])
def test_triangle_indices_like_cpu(below):
    fn = torch.tril_indices if below else torch.triu_indices
    for row, col, offset in [(3, 4, 1), (4, 3, -1), (0, 3, 0), (3, 3, -5), (5, 5, 10)]:
        on_both(lambda d, a=(row, col, offset): fn(*a, device=d))


# --- linspace / logspace with 0-dim tensor ends, traced under torch.compile --------------------------

RANGE_CASES = [
    # (start, end, steps, dtype)
    (torch.tensor(-3.7), torch.tensor(12.2), 10, None),
    (torch.tensor(2.5, dtype=torch.float64), 7.0, 7, torch.float32),
    (-1.0, torch.tensor(4, dtype=torch.int64), 5, torch.float64),
    (torch.tensor(-1), torch.tensor(300), 9, torch.int64),
    (torch.tensor(-1), torch.tensor(30), 4, torch.uint8),  # -1 wraps to 255 in uint8
    (torch.tensor(-3.7), torch.tensor(12.2), 10, torch.float16),
    (torch.tensor(0.5), torch.tensor(2.0), 6, torch.bfloat16),
    (torch.tensor(1 + 2j), torch.tensor(-3.0 + 0j), 5, None),
    (torch.tensor(True), torch.tensor(False), 3, torch.float32),
    (torch.tensor(3.0), torch.tensor(1.0), 1, torch.int8),
    (torch.tensor(3.0), torch.tensor(1.0), 0, None),
    (torch.tensor(float("nan")), torch.tensor(1.0), 4, None),
]


@pytest.mark.usefixtures("no_fallback")
@pytest.mark.parametrize("op", [torch.linspace, torch.logspace])
@pytest.mark.parametrize("case", range(len(RANGE_CASES)))
def test_tensor_ends_trace_like_cpu(op, case):
    start, end, steps, dtype = RANGE_CASES[case]
    kwargs = {} if dtype is None else {"dtype": dtype}
    if op is torch.logspace:
        kwargs["base"] = 2.0
    expected = op(start, end, steps, **kwargs)
    on_jax = [v.to(JAX) if isinstance(v, torch.Tensor) else v for v in (start, end)]
    with warnings.catch_warnings():
        warnings.simplefilter("error", EagerGraphWarning)  # one XLA program, no op-by-op run
        compiled = torch.compile(lambda a, b: op(a, b, steps, device=JAX, **kwargs) * 1, backend="jax")
        got = compiled(*on_jax)
    assert_same(got, expected * 1, rtol=1e-2 if dtype in (torch.float16, torch.bfloat16) else 1e-6, atol=1e-6)
    assert_same(op(*on_jax, steps, device=JAX, **kwargs), expected, rtol=1e-2, atol=1e-6)  # eager, same path as before


@pytest.mark.usefixtures("no_fallback")
def test_tensor_ends_value_checks_under_compile():
    """A traced end that does not fit the dtype raises CPU's error when the result is read."""
    compiled = torch.compile(lambda a, b: torch.linspace(a, b, 4, dtype=torch.int8, device=JAX) * 1, backend="jax")
    with pytest.raises(RuntimeError, match="value cannot be converted to type int8_t without overflow"):
        torch.linspace(torch.tensor(1000.0), torch.tensor(1.0), 4, dtype=torch.int8)
    with pytest.raises(RuntimeError, match="value cannot be converted to type int8_t without overflow"):
        compiled(torch.tensor(1000.0, device=JAX), torch.tensor(1.0, device=JAX)).cpu()
    assert compiled(torch.tensor(-5.0, device=JAX), torch.tensor(1.0, device=JAX)).cpu().tolist() == [-5, -3, -1, 1]


@pytest.mark.usefixtures("no_fallback")
def test_tensor_ends_must_be_0_dim():
    for op in (torch.linspace, torch.logspace):
        result_or_error_as_cpu(lambda d, op=op: op(torch.ones(1, device=d), torch.tensor(1.0, device=d), 3, device=d))
        result_or_error_as_cpu(lambda d, op=op: op(torch.tensor(0.0, device=d), torch.ones(2, device=d), 3, device=d))
        result_or_error_as_cpu(lambda d, op=op: op(torch.ones(1, device=d), 1.0, 3, device=d))


MAKERS = {
    "expanded row": lambda d, dt: torch.arange(6, device=d).to(dt).reshape(1, 6).expand(4, 6),
    "stride-0 storage": lambda d, dt: torch.empty_strided((10,), (0,), device=d, dtype=dt),
    "two broadcast dims": lambda d, dt: torch.ones(3, 1, 1, device=d, dtype=dt).expand(3, 4, 5),
    "overlapping as_strided": lambda d, dt: torch.zeros(6, device=d, dtype=dt).as_strided((3, 2), (1, 1)),
    "transposed broadcast": lambda d, dt: torch.ones(1, 5, device=d, dtype=dt).expand(4, 5).t(),
}


@pytest.mark.usefixtures("no_fallback")
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.int64, torch.bool, torch.complex64])
@pytest.mark.parametrize("make", MAKERS.values(), ids=MAKERS.keys())
@pytest.mark.parametrize("op", ["fill_", "zero_"])
def test_fill_and_zero_write_shared_memory_as_cpu(make, dtype, op):
    value = True if dtype == torch.bool else 7
    results = {}
    for d in ("cpu", "jax"):
        t = make(d, dtype)
        base = t._base if t._base is not None else t
        out = t.fill_(value) if op == "fill_" else t.zero_()
        assert out is t
        results[d] = (t.clone(), base.clone(), t.stride())
    assert_same(results["jax"][0], results["cpu"][0])
    assert_same(results["jax"][1], results["cpu"][1])  # the base (every alias) sees the write
    assert results["jax"][2] == results["cpu"][2]


@pytest.mark.usefixtures("no_fallback")
@pytest.mark.parametrize("view", ["neg", "conj"])
@pytest.mark.parametrize("op", ["fill_", "zero_"])
def test_negative_and_conjugate_views_still_raise_as_cpu(view, op):
    # PyTorch writes a neg/conj view through copy_, which checks the overlap
    for d in ("cpu", "jax"):
        t = torch.zeros(1, 3, device=d, dtype=torch.complex64)
        t = (t._neg_view() if view == "neg" else t.conj()).expand(2, 3)
        with pytest.raises(RuntimeError, match="more than one element of the written-to tensor"):
            t.fill_(2.5) if op == "fill_" else t.zero_()


@pytest.mark.usefixtures("no_fallback")
@pytest.mark.parametrize(
    "write",
    [
        lambda t: t.fill_(torch.tensor(1.0, device=t.device)),
        lambda t: t.add_(1),
        lambda t: t.relu_(),
    ],
    ids=["fill_ with a tensor", "add_", "relu_"],
)
def test_other_in_place_writes_to_shared_memory_still_raise_as_cpu(write):
    for d in ("cpu", "jax"):
        t = torch.randn(1, 6, device=d).expand(6, 6)
        with pytest.raises(RuntimeError, match="more than one element of the written-to tensor"):
            write(t)


@pytest.mark.usefixtures("no_fallback")
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.int64])
@pytest.mark.parametrize("make", MAKERS.values(), ids=MAKERS.keys())
def test_threshold_writes_shared_memory_as_cpu(make, dtype):
    """torch.nn.functional.threshold_ (PyTorch's TestNNDeviceType.test_threshold_inplace_overlap)."""
    results = {}
    for d in ("cpu", "jax"):
        t = make(d, dtype)
        if make is MAKERS["stride-0 storage"]:
            t.fill_(1)  # its memory is uninitialised
        base = t._base if t._base is not None else t
        assert torch.nn.functional.threshold_(t, 0.5, 9) is t
        results[d] = (t.clone(), base.clone())
    assert_same(results["jax"][0], results["cpu"][0])
    assert_same(results["jax"][1], results["cpu"][1])


@pytest.mark.usefixtures("no_fallback")
def test_linspace_with_an_integer_dtype_converts_its_ends_first():
    for dt in (torch.uint8, torch.int8, torch.int16, torch.int64):
        for args in [(-1, 10, 5), (-3, 4, 7), (250, -10, 6), (0.5, 3.7, 4), (-1, 10, 2)]:
            on_both(lambda d, a=args, dt=dt: torch.linspace(*a, dtype=dt, device=d))
    on_both(lambda d: torch.linspace(0, 1, 1, dtype=torch.bool, device=d))
    raises_as_cpu(lambda d: torch.linspace(0, 1, 3, dtype=torch.bool, device=d))


@pytest.mark.usefixtures("no_fallback")
@pytest.mark.parametrize("dtype", [torch.int32, torch.int64, torch.uint8, torch.int8, torch.float32, torch.float16])
@pytest.mark.parametrize(
    "args",
    [(-2, 2**50, math.inf), (0.0, 10.0, math.inf), (0, 2**50, 1e30), (0, 5, 2**63 - 1), (0, 5, math.nan),
     (0, math.inf, 1), (0, 5, 0.5), (0.5, 7.9, 1.5), (-3.7, 4, 2), (10, 0, -2.5), (0, 300, 7)],
)  # fmt: skip
def test_arange_with_an_integral_dtype_takes_its_scalars_as_int64(args, dtype):
    on_both(lambda d: torch.arange(*args, dtype=dtype, device=d))


@pytest.mark.usefixtures("no_fallback")
@pytest.mark.parametrize("args", [(math.nan, 10, 5), (1 + 2j, 3 - 1j, 7), (complex(math.inf, 0), 1, 4), (0, 2j, 3)])
def test_complex_linspace_scales_its_step_by_a_real_index(args):
    on_both(lambda d: torch.linspace(*args, dtype=torch.complex64, device=d), rtol=1.3e-6, atol=1e-5)


# --- deterministic fill of new memory (issue 27 item 1) ---------------------------------------------


@pytest.fixture
def deterministic_fill():
    before = torch.are_deterministic_algorithms_enabled(), torch.utils.deterministic.fill_uninitialized_memory
    torch.use_deterministic_algorithms(True)
    torch.utils.deterministic.fill_uninitialized_memory = True
    yield
    torch.use_deterministic_algorithms(before[0])
    torch.utils.deterministic.fill_uninitialized_memory = before[1]


FILLED = {
    "empty float32": lambda d: torch.empty(3, device=d),
    "empty complex64": lambda d: torch.empty(3, dtype=torch.complex64, device=d),
    "empty int16": lambda d: torch.empty(3, dtype=torch.int16, device=d),
    "empty uint64": lambda d: torch.empty(3, dtype=torch.uint64, device=d),
    "empty bool": lambda d: torch.empty(3, dtype=torch.bool, device=d),
    "empty_strided": lambda d: torch.empty_strided((2, 2), (1, 4), device=d),
    "empty_like int32": lambda d: torch.empty_like(torch.ones(2, dtype=torch.int32, device=d)),
    "zeros": lambda d: torch.zeros(3, device=d),
    "resize_ growth": lambda d: torch.arange(3.0, device=d).resize_(6),
    "resize_ growth of an int view": lambda d: torch.arange(4.0, device=d).view(torch.int32).resize_(6),
    "resize_ growth past an offset": lambda d: torch.arange(4.0, device=d)[1:].resize_(5),
}


@pytest.mark.usefixtures("deterministic_fill")
@pytest.mark.parametrize("make", FILLED.values(), ids=FILLED.keys())
def test_deterministic_mode_fills_new_memory_as_cpu(make):
    """Under torch.use_deterministic_algorithms(True) with fill_uninitialized_memory, CPU fills new memory
    with NaN (floating, complex: NaN + 0j), the largest integer or True; jax gave zeros."""
    expected, actual = make("cpu"), make(JAX).cpu()
    assert repr(actual.tolist()) == repr(expected.tolist())  # NaN compares by its repr


@pytest.mark.usefixtures("deterministic_fill")
def test_deterministic_fill_refuses_raw_bit_dtypes_and_stays_off_without_the_flag():
    with pytest.raises(NotImplementedError):
        torch.empty(2, dtype=torch.bits8)
    with pytest.raises(NotImplementedError, match=r"torch\.bits8 holds raw bits"):
        torch.empty(2, dtype=torch.bits8, device=JAX)
    torch.utils.deterministic.fill_uninitialized_memory = False
    assert torch.empty(3, device=JAX).tolist() == [0.0, 0.0, 0.0]  # jax's zeros, no fill program


@pytest.mark.parametrize("shape", [(7,), (2, 2), (2, 3), "transposed"])
def test_arange_out_as_cpu(shape):
    """arange(out=) keeps an out of the right number of elements as it is (shape and strides, values in its
    row-major order) and resizes any other with CPU's own warning; jax resized (2, 3) to (6,), warning
    that an output was resized, and gave no warning for 7 elements."""
    results = {}
    for d in ("cpu", JAX):
        out = torch.empty(3, 2, device=d).t() if shape == "transposed" else torch.empty(*shape, device=d)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            torch.arange(6, out=out)
        said = [str(w.message).split(" (Triggered internally")[0] for w in caught]
        results[d] = (out.shape, out.stride(), out.cpu().tolist(), said)
    assert results[JAX] == results["cpu"]
