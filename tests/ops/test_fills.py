"""jaxdev/ops/creation/fills.py: ones/zeros/full, their _like and new_ forms, and the deterministic fill
of new memory, against CPU PyTorch."""

from __future__ import annotations

import warnings

import pytest
import torch
from jaxdev_testing import JAX, assert_same

import jaxdev
from jaxdev import tensor

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
    allocation (test_arange_past_memory_fails_at_once)."""
    with pytest.raises(RuntimeError, match=r"Storage size calculation overflowed with sizes=\[4611686018427387904\]"):
        torch.arange(0, 2**62, 1, device=JAX)


@pytest.mark.per_op_mode("the allocation fails at the op; fused mode allocates in the segment's program, at the flush")
def test_arange_past_memory_fails_at_once():
    """The allocation fails there and then (one program would fail later, asynchronously)."""
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
