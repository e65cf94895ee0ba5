"""Edge cases where jax once gave other values than CPU without a word (found by a differential hunt
against CPU), and composites now computed as one program (logsumexp, repeat): each case must give
CPU's values, dtype and shape exactly, or CPU's error."""

from __future__ import annotations

import math
import warnings

import pytest
import torch
from jaxdev_testing import JAX, assert_same

INF, NAN = math.inf, math.nan


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
    assert torch.equal(torch.signbit(actual.cpu()), torch.signbit(expected)) if expected.is_floating_point() else True
    assert_same(actual, expected)


def test_logsumexp_gradient_as_on_cpu():
    grads = []
    for device in ("cpu", JAX):
        x = torch.randn(3, 4, generator=torch.Generator().manual_seed(1)).to(device).requires_grad_()
        torch.logsumexp(x, 1).pow(2).sum().backward()
        grads.append(x.grad)
    assert_same(grads[1], grads[0], rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("source", [torch.float16, torch.float32, torch.int64])
@pytest.mark.parametrize("out_dtype", [torch.float32, torch.float64])
def test_logsumexp_into_a_wider_out_computes_in_its_dtype(source, out_dtype):
    """CPU sums, logs and adds in out's dtype: computing in the input's and casting lost precision."""
    x = torch.randn(1000, generator=torch.Generator().manual_seed(0)) * 3
    outs = [
        torch.logsumexp(x.to(source).to(d), 0, out=torch.empty((), dtype=out_dtype, device=d)) for d in ("cpu", JAX)
    ]
    assert_same(outs[1], outs[0], rtol=1e-9 if out_dtype == torch.float64 else 1e-6)
