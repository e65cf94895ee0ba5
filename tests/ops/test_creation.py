"""jaxdev/ops/creation/: factories (fills: test_fills.py), ranges (arange, linspace, logspace), windows, triangle
indices, against CPU PyTorch."""

from __future__ import annotations

import math
import warnings

import pytest
import torch
from jaxdev_testing import JAX, assert_same, like_cpu, on_both, raises_as_cpu, result_or_error_as_cpu

from jaxdev.graphs.program import EagerGraphWarning

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
