"""Tables of single calls across op families (floor division, shifts, moments, searchsorted, logsumexp,
repeat, complex and integer ops, norms, samplers' argument checks), each against CPU PyTorch: the same
values, dtype and shape, or the same error."""

from __future__ import annotations

import math
import warnings

import pytest
import torch
from jaxdev_testing import JAX, assert_same, check, on_both

INF, NAN = math.inf, math.nan


def t(device, values, dtype=None):
    return torch.tensor(values, device=device, dtype=dtype)


CASES = {
    "inf // 2": lambda d: t(d, [INF, -INF]) // 2,
    "x // inf": lambda d: t(d, [-5.0, 7.5]) // INF,
    "floor division by +-inf": lambda d: torch.div(t(d, [-5.0, 7.5]), t(d, [INF, -INF]), rounding_mode="floor"),
    "floor division signs": lambda d: (
        t(d, [5.0, -5.0, 5.5, -5.5, 0.3, 0.0, -0.0]) // t(d, [-2.0, 2.0, 0.1, -0.1, 0.1, -3.0, 3.0])
    ),
    "half floor division by inf": lambda d: t(d, [INF, -3.0], torch.float16) // t(d, [2.0, INF], torch.float16),
    "uint8 >> 8": lambda d: t(d, [255, 7], torch.uint8) >> t(d, [8, 9], torch.uint8),
    "uint8 >> 70": lambda d: t(d, [255, 7], torch.uint8) >> 70,
    "int8 >> 9": lambda d: t(d, [-100, 77], torch.int8) >> t(d, [9, 8], torch.int8),
    "std, correction past the count": lambda d: torch.std(torch.arange(6.0, device=d).reshape(2, 3), 1, correction=3),
    "var, correction past the count": lambda d: torch.var(t(d, [1.0, 2.0]), correction=5),
    "var of a constant, correction past the count": lambda d: torch.var(t(d, [1.0, 1.0]), correction=5),
    "addcmul of ints, value=1.9": lambda d: torch.addcmul(t(d, [1, 2]), t(d, [1, 2]), t(d, [1, 2]), value=1.9),
    "addcmul of ints, value=-1.9": lambda d: torch.addcmul(t(d, [1, 2]), t(d, [1, 2]), t(d, [1, 2]), value=-1.9),
    "index_add of ints, alpha=2.5": lambda d: torch.zeros(3, dtype=torch.long, device=d).index_add(
        0, t(d, [0, 0]), t(d, [1, 2]), alpha=2.5
    ),
    "any over no dims": lambda d: torch.any(t(d, [[0.0, 1.0], [2.0, 0.0]]), dim=()),
    "all over no dims, keepdim": lambda d: torch.all(t(d, [[0.0, 1.0], [2.0, 0.0]]), dim=[], keepdim=True),
    "searchsorted, NaN boundary": lambda d: torch.searchsorted(t(d, [1.0, 3.0, NAN]), t(d, [NAN, 4.0, 0.0, 3.0])),
    "searchsorted right, NaN boundary": lambda d: torch.searchsorted(
        t(d, [1.0, 3.0, NAN]), t(d, [NAN, 4.0]), right=True
    ),
    "searchsorted, no boundaries": lambda d: torch.searchsorted(torch.empty(0, device=d), t(d, [1.0, 2.0])),
    "searchsorted, bool": lambda d: torch.searchsorted(t(d, [False, True]), t(d, [True])),
    "searchsorted, sorter": lambda d: torch.searchsorted(
        t(d, [3.0, 1.0, 2.0]), t(d, [0.0, 1.5, 4.0]), sorter=t(d, [1, 2, 0])
    ),
    "nextafter, half": lambda d: torch.nextafter(
        t(d, [1.0, 2.0, 0.0, -1.0], torch.float16), t(d, [2.0, 1.0, 1.0, -2.0], torch.float16)
    ),
    "nextafter, bfloat16": lambda d: torch.nextafter(
        t(d, [1.0, 2.0, 0.0], torch.bfloat16), t(d, [2.0, 1.0, 1.0], torch.bfloat16)
    ),
    "median of an empty int64 tensor": lambda d: torch.median(torch.empty(0, dtype=torch.int64, device=d)),
    "nanmedian of an empty int32 tensor": lambda d: torch.nanmedian(torch.empty(0, dtype=torch.int32, device=d)),
    "median of an empty bool tensor": lambda d: torch.median(torch.empty(0, dtype=torch.bool, device=d)),
    "logit of complex": lambda d: torch.logit(t(d, [0.5j])),
    # nonzero_static of an empty input: jnp.argwhere padded with zeros whatever fill_value said
    "nonzero_static of an empty input": lambda d: torch.nonzero_static(torch.empty(5, 0, 5, device=d), size=1),
    "nonzero_static of an empty input, fill_value": lambda d: torch.nonzero_static(
        torch.empty(0, device=d), size=3, fill_value=7
    ),
    "nonzero_static of an empty input, size 0": lambda d: torch.nonzero_static(torch.empty(0, 2, device=d), size=0),
    "nonzero_static of a 0-dim input": lambda d: torch.nonzero_static(t(d, 0.0), size=2, fill_value=4),
    "nonzero_static, padded": lambda d: torch.nonzero_static(t(d, [[0, 1], [3, 0]]), size=4, fill_value=-9),
    # logsumexp: one program rounding each of CPU's steps as its separate ops do
    "logsumexp, half": lambda d: torch.logsumexp(
        (torch.randn(4, 50, generator=torch.Generator().manual_seed(0)) * 5).half().to(d), 1
    ),
    "logsumexp, bfloat16": lambda d: torch.logsumexp(
        (torch.randn(4, 50, generator=torch.Generator().manual_seed(0)) * 5).bfloat16().to(d), 1
    ),
    "logsumexp of ints": lambda d: torch.logsumexp(torch.arange(6, device=d).reshape(2, 3), 1),
    "logsumexp with infinities and NaN": lambda d: torch.logsumexp(
        t(d, [[INF, 1.0], [-INF, -INF], [INF, -INF], [NAN, 1.0]]), 1
    ),
    "logsumexp over an empty dim": lambda d: torch.logsumexp(torch.empty(3, 0, device=d), 1),
    "logsumexp over no dims": lambda d: torch.logsumexp(torch.ones(2, 3, device=d), ()),
    "logsumexp, complex": lambda d: torch.logsumexp(
        torch.randn(3, 4, dtype=torch.complex64, generator=torch.Generator().manual_seed(0)).to(d), 1
    ),
    # repeat: one tile instead of CPU's empty + strided view + copy
    "repeat": lambda d: torch.arange(6.0, device=d).reshape(2, 3).repeat(3, 1, 2),
    "repeat of a transposed view": lambda d: torch.arange(6.0, device=d).reshape(2, 3).t().repeat(2, 1),
    "repeat of a 0-dim tensor": lambda d: torch.tensor(1.0, device=d).repeat(3),
    "repeat by zero": lambda d: torch.arange(6.0, device=d).reshape(2, 3).repeat(2, 0),
    "repeat by fewer dims": lambda d: torch.ones(2, 3, device=d).repeat(2),
    "repeat by a negative count": lambda d: torch.ones(2, 3, device=d).repeat(-1, 2),
    # an empty result XLA cannot hold (its sizes multiply past int64): compiling the tile aborted the process
    "repeat to [2**62, 3, 0]": lambda d: torch.ones(2, dtype=torch.complex128, device=d).repeat(2**62, 3, 0),
    "logsumexp into an int64 out=": lambda d: torch.logsumexp(
        torch.ones(2, 3, device=d), 1, out=torch.empty(2, dtype=torch.long, device=d)
    ),
}


@pytest.mark.parametrize("name", list(CASES))
def test_as_on_cpu(name):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # var's "degrees of freedom is <= 0"
        try:
            expected = CASES[name]("cpu")
        except Exception as cpu_error:
            with pytest.raises(type(cpu_error)) as raised:
                CASES[name](JAX)
            assert str(raised.value) == str(cpu_error)
            return
        actual = CASES[name](JAX)
    assert actual.dtype == expected.dtype and actual.shape == expected.shape
    if expected.is_floating_point():  # zeros' and infinities' signs; a NaN's sign is the machine's (x86 makes -NaN)
        numbers = ~expected.isnan()
        assert torch.equal(torch.signbit(actual.cpu())[numbers], torch.signbit(expected)[numbers])
    assert_same(actual, expected)


# --- complex numbers, integer ops, norms, factories, samplers ------------------------------------------


def _same_error(fn):
    """CPU raises; jax raises the same type with the same message."""
    err = on_both(fn)
    with pytest.raises(type(err)) as cpu:
        fn(torch.device("cpu"))
    assert str(err) == str(cpu.value)


COMPLEX_AND_INTEGER = {
    "angle_real": (torch.angle, torch.tensor([-2.0, -0.0, 0.0, 3.0, float("nan"), -float("inf")])),
    "angle_int": (torch.angle, torch.tensor([-2, 0, 3])),
    "angle_complex": (torch.angle, torch.randn(6, dtype=torch.complex64)),
    "conj_physical": (torch.conj_physical, torch.randn(4, dtype=torch.complex128)),
    "complex": (torch.complex, torch.randn(3, 1), torch.randn(4)),
    "polar": (torch.polar, torch.rand(5, dtype=torch.float64), torch.randn(5, dtype=torch.float64)),
    "left_shift": (
        torch.bitwise_left_shift,
        torch.tensor([1, 2, 3, -1], dtype=torch.int8),
        torch.tensor([1, 8, -1, 7], dtype=torch.int8),
    ),
    "right_shift": (
        torch.bitwise_right_shift,
        torch.tensor([-100, 2, 3, -5], dtype=torch.int8),
        torch.tensor([1, 8, -1, 100], dtype=torch.int8),
    ),
    "shift_int64_by_64": (lambda a: a << 64, torch.tensor([1, -1])),
    "gcd": (torch.gcd, torch.tensor([0, -4, 6, -(2**63), 0, 17]), torch.tensor([0, 6, -4, 0, -(2**63), 0])),
    "lcm": (
        torch.lcm,
        torch.tensor([0, -4, 6, 3, 100], dtype=torch.int16),
        torch.tensor([0, 6, -4, 0, 3], dtype=torch.int16),
    ),
    "frexp_subnormal": (
        lambda t: torch.frexp(t),
        torch.tensor([1e-45, 5e-324, 0.0, -0.0, float("inf"), float("nan"), -1e-310, 3.0], dtype=torch.float64),
    ),
    "frexp_float32_subnormal": (lambda t: torch.frexp(t), torch.tensor([1e-39, -1.4e-45, 1.1754942e-38, 6.5])),
    "frexp_half": (lambda t: torch.frexp(t), torch.tensor([6e-8, 1e-5, -3.0, 65504.0], dtype=torch.float16)),
    "cross": (lambda a, b: torch.linalg.cross(a, b, dim=0), torch.randn(3, 4), torch.randn(3, 1)),
    "norm_dtype": (lambda t: torch.norm(t, p=3, dim=1, dtype=torch.float64), torch.randn(3, 4)),
    "pairwise_distance": (torch.nn.functional.pairwise_distance, torch.randn(3, 5), torch.randn(3, 5)),
    "renorm": (lambda t: torch.renorm(t, 2, 0, 1.0), torch.randn(4, 3) * 3),
    "renorm_half": (lambda t: torch.renorm(t, 1.5, 1, 0.5), torch.randn(3, 4, 5, dtype=torch.float16)),
    "channel_shuffle": (lambda t: torch.nn.functional.channel_shuffle(t, 3), torch.randn(2, 6, 2, 2)),
    "nonzero_static": (lambda t: torch.nonzero_static(t, size=5, fill_value=7), torch.tensor([[0, 1], [1, 1]])),
    "nonzero_static_cut": (lambda t: torch.nonzero_static(t, size=1), torch.tensor([0.0, 1.0, 2.0])),
    "hash_tensor": (lambda t: torch.hash_tensor(t, dim=1).view(torch.int64), torch.randn(3, 5, dtype=torch.float64)),
    "bincount": (torch.bincount, torch.tensor([1, 1, 3, 0, 7])),
    "bincount_weights": (lambda t, w: torch.bincount(t, w, minlength=10), torch.tensor([1, 1, 3]), torch.rand(3)),
    "bincount_half_weights": (torch.bincount, torch.tensor([2, 0]), torch.tensor([0.5, 1.0], dtype=torch.float16)),
    "cov": (torch.cov, torch.randn(3, 6)),
}


@pytest.mark.usefixtures("no_fallback")
@pytest.mark.parametrize("name", list(COMPLEX_AND_INTEGER))
def test_complex_integer_and_norm_ops_like_cpu(name):
    fn, *inputs = COMPLEX_AND_INTEGER[name]
    exact = {} if inputs[0].is_floating_point() or inputs[0].is_complex() else dict(rtol=0, atol=0)
    check(fn, *inputs, grad=name in ("cross", "norm_dtype", "pairwise_distance", "renorm", "polar"), **exact)


@pytest.mark.usefixtures("no_fallback")
@pytest.mark.parametrize(
    "fn",
    [
        lambda d: torch.complex(torch.ones(2, device=d), torch.zeros(2, device=d, dtype=torch.float64)),
        lambda d: torch.complex(torch.ones(2, device=d, dtype=torch.long), torch.zeros(2, device=d, dtype=torch.long)),
        lambda d: torch.ones(2, device=d) << 1,
        lambda d: torch.gcd(torch.ones(2, device=d, dtype=torch.bool), torch.ones(2, device=d, dtype=torch.bool)),
        lambda d: torch.frexp(torch.ones(2, device=d, dtype=torch.long)),
        lambda d: torch.linalg.cross(torch.ones(2, 2, device=d), torch.ones(2, 2, device=d)),
        lambda d: torch.norm(torch.ones(2, device=d, dtype=torch.long)),
        lambda d: torch.norm(torch.ones(2, 2, device=d, dtype=torch.float64), dim=1, dtype=torch.float32),
        lambda d: torch.renorm(torch.ones(2, 2, device=d), 2, 0, -1.0),
        lambda d: torch.nn.functional.channel_shuffle(torch.ones(2, 5, 1, device=d), 2),
        lambda d: torch.tril_indices(3, 3, dtype=torch.float32, device=d),
        lambda d: torch.logspace(-1.5, 2, 4, dtype=torch.uint8, device=d),
        lambda d: torch.bincount(torch.tensor([-1, 1], device=d)),
        lambda d: torch.bincount(torch.tensor([1, 2], device=d), torch.ones(3, device=d)),
        lambda d: torch.hash_tensor(torch.ones(0, 3, device=d), dim=0),
        lambda d: torch.empty(3, device=d, dtype=torch.long).cauchy_(),
        lambda d: torch.empty(3, device=d).geometric_(1.0),
        lambda d: torch.empty(3, device=d, dtype=torch.bool).geometric_(0.5),
        lambda d: torch.normal(torch.zeros(6, device=d), torch.ones(2, 3, device=d)),
        lambda d: torch.normal(torch.zeros(3, device=d), torch.full((3,), -1.0, device=d)).cpu(),
    ],
)
def test_invalid_input_raises_like_cpu(fn):
    _same_error(fn)
