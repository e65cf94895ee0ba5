"""Dtypes, values and shapes CPU's kernels refuse: the same error (type and words) as CPU PyTorch, or the
same values where CPU accepts them. Before, jax computed something for them (abs of bool, softmax of
integers, max of complex, lerp of mixed dtypes, alpha past the dtype, cumsum_ with another dtype) or
raised jnp's and XLA's own errors (remainder of bools, floor of complex, vector_norm's inf norm of an
empty tensor, a Python int past int64 as a jitted argument)."""

from __future__ import annotations

import pytest
import torch
from jaxdev_testing import same_outcome


def t(device, values, dtype=None):
    return torch.tensor(values, device=device, dtype=dtype)


def bools(d):
    return t(d, [True, False])


def longs(d):
    return t(d, [1, 2])


def cplx(d):
    return t(d, [1j, 2])


def empty(d, *shape, dtype=None):
    return torch.empty(*shape, device=d, dtype=dtype)


def ones(d, *shape, dtype=None):
    return torch.ones(*shape, device=d, dtype=dtype)


BOOL_CASES = {
    "abs_": lambda d: t(d, [True]).abs_(),
    "abs": lambda d: t(d, [True]).abs(),
    "abs, empty": lambda d: empty(d, 0, dtype=torch.bool).abs(),
    "argmax": lambda d: torch.argmax(bools(d)),
    "argmin": lambda d: torch.argmin(bools(d)),
    "argmax dim": lambda d: torch.argmax(bools(d), 0),
    "argmax 0-dim": lambda d: torch.argmax(t(d, True)),
    "argmax empty dim": lambda d: torch.argmax(empty(d, 0, 3, dtype=torch.bool), 1),
    "median": lambda d: torch.median(bools(d)),
    "median dim": lambda d: torch.median(bools(d), 0),
    "median 0-dim": lambda d: torch.median(t(d, True)),
    "median 0-dim dim": lambda d: torch.median(t(d, True), 0),
    "nanmedian": lambda d: torch.nanmedian(bools(d)),
    "nanmedian dim": lambda d: torch.nanmedian(bools(d), 0),
    "kthvalue": lambda d: torch.kthvalue(bools(d), 1),
    "kthvalue 0-dim": lambda d: torch.kthvalue(t(d, True), 1),
    "kthvalue empty": lambda d: torch.kthvalue(empty(d, 0, dtype=torch.bool), 1),
    "pow": lambda d: torch.pow(bools(d), bools(d)),
    "pow, number base": lambda d: torch.pow(True, bools(d)),
    "pow, bool exponent": lambda d: torch.pow(bools(d), True),
    "pow, int exponent": lambda d: torch.pow(bools(d), 2),
    "mm": lambda d: torch.mm(t(d, [[True]]), t(d, [[True]])),
    "matmul": lambda d: torch.matmul(t(d, [[True]]), t(d, [[True]])),
    "mm, empty": lambda d: torch.mm(empty(d, 2, 0, dtype=torch.bool), empty(d, 0, 2, dtype=torch.bool)),
    "bmm": lambda d: torch.bmm(t(d, [[[True]]]), t(d, [[[True]]])),
    "addmm": lambda d: torch.addmm(t(d, [[True]]), t(d, [[True]]), t(d, [[True]])),
    "baddbmm": lambda d: torch.baddbmm(t(d, [[[True]]]), t(d, [[[True]]]), t(d, [[[True]]])),
    "dot": lambda d: torch.dot(bools(d), bools(d)),
    "mv": lambda d: torch.mv(t(d, [[True]]), t(d, [True])),
    "mv, inner dim 0": lambda d: torch.mv(empty(d, 2, 0, dtype=torch.bool), empty(d, 0, dtype=torch.bool)),
    "bmm, inner dim 0": lambda d: torch.bmm(empty(d, 1, 2, 0, dtype=torch.bool), empty(d, 1, 0, 2, dtype=torch.bool)),
    "dot, empty": lambda d: torch.dot(empty(d, 0, dtype=torch.bool), empty(d, 0, dtype=torch.bool)),
    "addmv": lambda d: torch.addmv(t(d, [True]), t(d, [[True]]), t(d, [True])),
    "cumsum dtype=bool": lambda d: torch.cumsum(ones(d, 2), 0, dtype=torch.bool),
    "cumsum 0-dim dtype=bool": lambda d: torch.cumsum(t(d, 1.0), 0, dtype=torch.bool),
    "floor_divide": lambda d: torch.floor_divide(bools(d), bools(d)),
    "floor_divide by True": lambda d: torch.floor_divide(bools(d), True),
    "remainder": lambda d: torch.remainder(bools(d), bools(d)),
    "remainder by True": lambda d: torch.remainder(bools(d), True),
    "remainder of True": lambda d: torch.remainder(True, bools(d)),
    "remainder by 2": lambda d: torch.remainder(bools(d), 2),
    "fmod": lambda d: torch.fmod(bools(d), bools(d)),
    "fmod by True": lambda d: torch.fmod(bools(d), True),
    "%": lambda d: bools(d) % bools(d),
    "div floor": lambda d: torch.div(bools(d), bools(d), rounding_mode="floor"),
    "div trunc": lambda d: torch.div(bools(d), bools(d), rounding_mode="trunc"),
    "div trunc by 2": lambda d: torch.div(bools(d), 2, rounding_mode="trunc"),
    "floor": lambda d: torch.floor(bools(d)),
    "ceil": lambda d: torch.ceil(bools(d)),
    "trunc": lambda d: torch.trunc(bools(d)),
    "round": lambda d: torch.round(bools(d)),
    "round decimals": lambda d: torch.round(bools(d), decimals=1),
    "frac": lambda d: torch.frac(bools(d)),
    "relu": lambda d: torch.relu(bools(d)),
    "softmax": lambda d: torch.softmax(bools(d), 0),
    "lerp": lambda d: torch.lerp(bools(d), bools(d), 0.5),
    "logcumsumexp": lambda d: torch.logcumsumexp(bools(d), 0),
    "cumsum_": lambda d: ones(d, 3, dtype=torch.bool).cumsum_(0),
    "cumprod_": lambda d: ones(d, 3, dtype=torch.bool).cumprod_(0),
}

INT_CASES = {
    "softmax": lambda d: torch.softmax(longs(d), 0),
    "softmax dtype=int64": lambda d: torch.softmax(longs(d), 0, dtype=torch.int64),
    "softmax dtype=float32": lambda d: torch.softmax(longs(d), 0, dtype=torch.float32),
    "softmax int32": lambda d: torch.softmax(t(d, [1, 2], torch.int32), 0),
    "softmax 0-dim": lambda d: torch.softmax(t(d, 1), 0),
    "softmax empty": lambda d: torch.softmax(empty(d, 0, dtype=torch.long), 0),
    "softmax not the last dim": lambda d: torch.softmax(t(d, [[1, 2]]), 0),
    "log_softmax": lambda d: torch.log_softmax(longs(d), 0),
    "log_softmax dtype=int64": lambda d: torch.log_softmax(longs(d), 0, dtype=torch.int64),
    "log_softmax not the last dim": lambda d: torch.log_softmax(t(d, [[1, 2]]), 0),
    "lerp": lambda d: torch.lerp(longs(d), longs(d), 0.5),
    "lerp tensor weight": lambda d: torch.lerp(longs(d), longs(d), longs(d)),
    "lerp empty": lambda d: torch.lerp(empty(d, 0, dtype=torch.long), empty(d, 0, dtype=torch.long), 0.5),
    "frac": lambda d: torch.frac(longs(d)),
    "frac empty": lambda d: torch.frac(empty(d, 0, dtype=torch.long)),
    "logcumsumexp": lambda d: torch.logcumsumexp(longs(d), 0),
    "logcumsumexp 0-dim": lambda d: torch.logcumsumexp(t(d, 1), 0),
    "round decimals=-2": lambda d: torch.round(t(d, [1234]), decimals=-2),
    "round decimals=2": lambda d: torch.round(t(d, [1234]), decimals=2),
    "round decimals=0": lambda d: torch.round(t(d, [1234]), decimals=0),
    "round": lambda d: torch.round(t(d, [1234])),
    "floor": lambda d: torch.floor(longs(d)),
}

COMPLEX_CASES = {
    "max": lambda d: torch.max(cplx(d)),
    "max complex128": lambda d: torch.max(cplx(d).to(torch.complex128)),
    "max empty": lambda d: torch.max(empty(d, 0, dtype=torch.complex64)),
    "max dim": lambda d: torch.max(cplx(d), 0),
    "min": lambda d: torch.min(cplx(d)),
    "min dim": lambda d: torch.min(cplx(d), 0),
    "aminmax": lambda d: torch.aminmax(cplx(d)),
    "argmax": lambda d: torch.argmax(cplx(d)),
    "argmin": lambda d: torch.argmin(cplx(d)),
    "argmax dim": lambda d: torch.argmax(cplx(d), 0),
    "argmax empty": lambda d: torch.argmax(empty(d, 0, dtype=torch.complex64)),
    "median": lambda d: torch.median(cplx(d)),
    "median dim": lambda d: torch.median(cplx(d), 0),
    "nanmedian": lambda d: torch.nanmedian(cplx(d)),
    "kthvalue": lambda d: torch.kthvalue(cplx(d), 1),
    "round": lambda d: torch.round(cplx(d)),
    "round decimals": lambda d: torch.round(cplx(d), decimals=1),
    "round decimals=0": lambda d: torch.round(cplx(d), decimals=0),
    "relu": lambda d: torch.relu(cplx(d)),
    "relu empty": lambda d: torch.relu(empty(d, 0, dtype=torch.complex64)),
    "softmax": lambda d: torch.softmax(cplx(d), 0),
    "softmax not the last dim": lambda d: torch.softmax(t(d, [[1j, 2]]), 0),
    "log_softmax": lambda d: torch.log_softmax(cplx(d), 0),
    "remainder": lambda d: torch.remainder(cplx(d), cplx(d)),
    "remainder by 2": lambda d: torch.remainder(cplx(d), 2),
    "remainder of a real by 2j": lambda d: torch.remainder(t(d, [1.0]), 2j),
    "fmod": lambda d: torch.fmod(cplx(d), cplx(d)),
    "fmod by 2": lambda d: torch.fmod(cplx(d), 2),
    "floor": lambda d: torch.floor(cplx(d)),
    "floor empty": lambda d: torch.floor(empty(d, 0, dtype=torch.complex64)),
    "ceil": lambda d: torch.ceil(cplx(d)),
    "trunc": lambda d: torch.trunc(cplx(d)),
    "frac": lambda d: torch.frac(cplx(d)),
    "floor_divide": lambda d: torch.floor_divide(cplx(d), cplx(d)),
    "floor_divide by 2": lambda d: torch.floor_divide(cplx(d), 2),
    "div floor": lambda d: torch.div(cplx(d), cplx(d), rounding_mode="floor"),
    "div trunc": lambda d: torch.div(cplx(d), cplx(d), rounding_mode="trunc"),
    "div trunc by 2": lambda d: torch.div(cplx(d), 2, rounding_mode="trunc"),
    "erf": lambda d: torch.erf(cplx(d)),
    "erf empty": lambda d: torch.erf(empty(d, 0, dtype=torch.complex64)),
    "erfc": lambda d: torch.erfc(cplx(d)),
    "erfinv": lambda d: torch.erfinv(cplx(d)),
    "isposinf": lambda d: torch.isposinf(cplx(d)),
    "isneginf": lambda d: torch.isneginf(cplx(d)),
    "isposinf empty": lambda d: torch.isposinf(empty(d, 0, dtype=torch.complex64)),
    "signbit": lambda d: torch.signbit(cplx(d)),
    "sign": lambda d: torch.sign(cplx(d)),
    "sign empty": lambda d: torch.sign(empty(d, 0, dtype=torch.complex64)),
}

MIXED_CASES = {
    "lerp float32, float64 end": lambda d: torch.lerp(t(d, [1.0]), t(d, [1.0], torch.float64), 0.5),
    "lerp float32, 0-dim float64 end": lambda d: torch.lerp(t(d, [1.0]), t(d, 1.0, torch.float64), 0.5),
    "lerp float64, float32 end": lambda d: torch.lerp(t(d, [1.0], torch.float64), t(d, [1.0]), 0.5),
    "lerp int64, float32 end": lambda d: torch.lerp(longs(d), t(d, [1.0, 2.0]), 0.5),
    "lerp float64 weight": lambda d: torch.lerp(t(d, [1.0]), t(d, [1.0]), t(d, [0.5], torch.float64)),
    "lerp 0-dim float64 weight": lambda d: torch.lerp(t(d, [1.0]), t(d, [3.0]), t(d, 0.5, torch.float64)),
    "lerp complex weight number": lambda d: torch.lerp(t(d, [1.0]), t(d, [2.0]), 0.5j),
    "lerp weight past float": lambda d: torch.lerp(t(d, [1.0]), t(d, [2.0]), 1e39),
}

EMPTY_CASES = {
    "argmax": lambda d: torch.argmax(empty(d, 0, 3)),
    "argmin": lambda d: torch.argmin(empty(d, 0, 3)),
    "argmax keepdim": lambda d: torch.argmax(empty(d, 0, 3), keepdim=True),
    "argmax dim 1": lambda d: torch.argmax(empty(d, 0, 3), 1),
    "aminmax dim 0": lambda d: torch.aminmax(empty(d, 0, 3), dim=0),
    "aminmax dim -2": lambda d: torch.aminmax(empty(d, 0, 3), dim=-2),
    "aminmax 1d dim 0": lambda d: torch.aminmax(empty(d, 0), dim=0),
    "aminmax dim 1": lambda d: torch.aminmax(empty(d, 0, 3), dim=1),
    "aminmax": lambda d: torch.aminmax(empty(d, 0, 3)),
    "aminmax keepdim": lambda d: torch.aminmax(empty(d, 0, 3), keepdim=True),
    "kthvalue": lambda d: torch.kthvalue(empty(d, 0), 1),
    "kthvalue k=0": lambda d: torch.kthvalue(empty(d, 0), 0),
    "kthvalue dim 1": lambda d: torch.kthvalue(empty(d, 3, 0), 1, 1),
    "kthvalue other dim": lambda d: torch.kthvalue(empty(d, 0, 3), 1, 1),
    "vector_norm inf": lambda d: torch.linalg.vector_norm(empty(d, 0, 3), float("inf")),
    "vector_norm -inf": lambda d: torch.linalg.vector_norm(empty(d, 0, 3), float("-inf")),
    "vector_norm -1": lambda d: torch.linalg.vector_norm(empty(d, 0, 3), -1),
    "vector_norm -0.5": lambda d: torch.linalg.vector_norm(empty(d, 0, 3), -0.5),
    "vector_norm 2": lambda d: torch.linalg.vector_norm(empty(d, 0, 3), 2),
    "vector_norm inf dim 0": lambda d: torch.linalg.vector_norm(empty(d, 0, 3), float("inf"), dim=0),
    "vector_norm inf dim -2": lambda d: torch.linalg.vector_norm(empty(d, 0, 3), float("inf"), dim=-2),
    "vector_norm inf dim 1": lambda d: torch.linalg.vector_norm(empty(d, 0, 3), float("inf"), dim=1),
    "vector_norm inf dims (0, 1)": lambda d: torch.linalg.vector_norm(empty(d, 3, 0), float("inf"), dim=(0, 1)),
    "vector_norm inf dims (2, 1)": lambda d: torch.linalg.vector_norm(empty(d, 2, 0, 0), float("inf"), dim=(2, 1)),
    "vector_norm -inf keepdim": lambda d: torch.linalg.vector_norm(empty(d, 0, 3), float("-inf"), dim=0, keepdim=True),
    "vector_norm complex inf": lambda d: torch.linalg.vector_norm(empty(d, 0, dtype=torch.complex64), float("inf")),
    "norm inf": lambda d: torch.norm(empty(d, 0, 3), float("inf")),
    "norm inf dim 0": lambda d: torch.norm(empty(d, 0, 3), float("inf"), dim=0),
    "norm inf dtype": lambda d: torch.norm(empty(d, 0, 3), float("inf"), dtype=torch.float64),
}


def int8(d, v=1):
    return t(d, [v], torch.int8)


SCALAR_CASES = {
    "add int8 alpha 300": lambda d: torch.add(int8(d), int8(d), alpha=300),
    "add int8 alpha -129": lambda d: torch.add(int8(d), int8(d), alpha=-129),
    "add int8 alpha 127": lambda d: torch.add(int8(d), int8(d), alpha=127),
    "add uint8 alpha 256": lambda d: torch.add(t(d, [1], torch.uint8), t(d, [1], torch.uint8), alpha=256),
    "add uint8 alpha -1": lambda d: torch.add(t(d, [1], torch.uint8), t(d, [1], torch.uint8), alpha=-1),
    "add int8 number alpha 300": lambda d: torch.add(int8(d), 1, alpha=300),
    "add int8 + 300": lambda d: torch.add(int8(d), 300),
    "add_ int8 alpha 300": lambda d: int8(d).add_(int8(d), alpha=300),
    "add int8 alpha 300 out=": lambda d: torch.add(int8(d), int8(d), alpha=300, out=int8(d, 0)),
    "add half alpha 1e10": lambda d: torch.add(t(d, [1], torch.half), t(d, [1], torch.half), alpha=1e10),
    "add half alpha 70000": lambda d: torch.add(t(d, [1], torch.half), t(d, [1], torch.half), alpha=70000),
    "add half alpha empty": lambda d: torch.add(t(d, [], torch.half), t(d, [], torch.half), alpha=1e10),
    "add bfloat16 alpha 1e39": lambda d: torch.add(t(d, [1], torch.bfloat16), t(d, [1], torch.bfloat16), alpha=1e39),
    "add float32 alpha 1e39": lambda d: torch.add(t(d, [1.0]), t(d, [1.0]), alpha=1e39),
    "add float32 alpha inf": lambda d: torch.add(t(d, [1.0]), t(d, [1.0]), alpha=float("inf")),
    "add complex64 alpha 1e39": lambda d: torch.add(t(d, [1j]), t(d, [1j]), alpha=1e39),
    "add int64 alpha 2**63": lambda d: torch.add(longs(d), longs(d), alpha=2**63),
    "sub int8 alpha 300": lambda d: torch.sub(int8(d), int8(d), alpha=300),
    "rsub int8 alpha 300": lambda d: torch.rsub(int8(d), int8(d), alpha=300),
    "addcmul int8 value 300": lambda d: torch.addcmul(int8(d), int8(d), int8(d), value=300),
    "addcmul int64 value 1.9": lambda d: torch.addcmul(longs(d), longs(d), longs(d), value=1.9),
}
for _dt in (torch.int64, torch.int32, torch.int8, torch.uint8, torch.float32, torch.float16, torch.complex64):
    _name = str(_dt).removeprefix("torch.")
    SCALAR_CASES[f"{_name} + 2**63"] = lambda d, dt=_dt: t(d, [1], dt) + 2**63
    SCALAR_CASES[f"{_name} - 2**63"] = lambda d, dt=_dt: t(d, [1], dt) - 2**63
    SCALAR_CASES[f"{_name} * 2**63"] = lambda d, dt=_dt: t(d, [1], dt) * 2**63
    SCALAR_CASES[f"{_name} + (2**64 - 1)"] = lambda d, dt=_dt: t(d, [1], dt) + (2**64 - 1)
SCALAR_CASES.update(
    {
        "bool + 2**63": lambda d: bools(d) + 2**63,
        "bool - 2**63": lambda d: bools(d) - 2**63,
        "int64 / 2**63": lambda d: longs(d) / 2**63,
        "int64 == 2**63": lambda d: longs(d) == 2**63,
        "int8 == 2**63": lambda d: int8(d, 0) == 2**63,
        "int64 < 2**63": lambda d: longs(d) < 2**63,
        "float32 == 2**63": lambda d: t(d, [1.0]) == 2**63,
        "int64 % 2**63": lambda d: longs(d) % 2**63,
        "fmod int64 2**63": lambda d: torch.fmod(longs(d), 2**63),
        "int64 // 2**63": lambda d: longs(d) // 2**63,
        "div floor int64 2**63": lambda d: torch.div(longs(d), 2**63, rounding_mode="floor"),
        "div trunc float32 2**63": lambda d: torch.div(t(d, [1.0]), 2**63, rounding_mode="trunc"),
        "int64 ** 2**63": lambda d: longs(d) ** 2**63,
        "float32 ** 2**63": lambda d: t(d, [1.0]) ** 2**63,
        "float32 ** 1e39": lambda d: t(d, [2.0]) ** 1e39,
        "complex64 ** 1e39": lambda d: t(d, [1j]) ** 1e39,
        "half ** 1e10": lambda d: t(d, [1.0], torch.half) ** 1e10,
        "int8 ** 300": lambda d: int8(d) ** 300,
        "2**63 ** int64": lambda d: 2**63 ** t(d, [1]),
        "2**63 ** float32": lambda d: 2**63 ** t(d, [1.0]),
        "int64 & 2**63": lambda d: longs(d) & 2**63,
        "int32 & 2**63": lambda d: t(d, [1], torch.int32) & 2**63,
        "2**63 - int64": lambda d: 2**63 - longs(d),
        "copysign float32 2**63": lambda d: torch.ops.aten.copysign.Scalar(t(d, [1.0]), 2**63),
    }
)

CUMULATIVE_CASES = {
    "cumsum dtype float64, float32 out": lambda d: torch.cumsum(ones(d, 3), 0, dtype=torch.float64, out=empty(d, 3)),
    "cumsum dtype float32, float64 out": lambda d: torch.cumsum(
        ones(d, 3), 0, dtype=torch.float32, out=empty(d, 3, dtype=torch.float64)
    ),
    "cumsum dtype float64, half out": lambda d: torch.cumsum(
        ones(d, 3), 0, dtype=torch.float64, out=empty(d, 3, dtype=torch.half)
    ),
    "cumsum int8 dtype int64, int8 out": lambda d: torch.cumsum(
        ones(d, 3, dtype=torch.int8), 0, dtype=torch.int64, out=empty(d, 3, dtype=torch.int8)
    ),
    "cumsum, float64 out": lambda d: torch.cumsum(ones(d, 3), 0, out=empty(d, 3, dtype=torch.float64)),
    "cumsum, int64 out": lambda d: torch.cumsum(ones(d, 3), 0, out=empty(d, 3, dtype=torch.int64)),
    "cumsum, bool out": lambda d: torch.cumsum(ones(d, 3), 0, out=empty(d, 3, dtype=torch.bool)),
    "cumsum bool, half out": lambda d: torch.cumsum(ones(d, 3, dtype=torch.bool), 0, out=empty(d, 3, dtype=torch.half)),
    "cumsum dtype float64, out of another shape": lambda d: torch.cumsum(
        ones(d, 3), 0, dtype=torch.float64, out=empty(d, 2)
    ),
    "cumsum bad dim, dtype float64, float32 out": lambda d: torch.cumsum(
        ones(d, 3), 5, dtype=torch.float64, out=empty(d, 3)
    ),
    "cumprod dtype float64, float32 out": lambda d: torch.cumprod(ones(d, 3), 0, dtype=torch.float64, out=empty(d, 3)),
    "cumprod, bool out": lambda d: torch.cumprod(ones(d, 3), 0, out=empty(d, 3, dtype=torch.bool)),
    "cumsum_ dtype float64": lambda d: ones(d, 3).cumsum_(0, dtype=torch.float64),
    "cumsum_ dtype float32": lambda d: ones(d, 3).cumsum_(0, dtype=torch.float32),
    "cumsum_ int8": lambda d: ones(d, 3, dtype=torch.int8).cumsum_(0),
    "cumsum_ int8 dtype int64": lambda d: ones(d, 3, dtype=torch.int8).cumsum_(0, dtype=torch.int64),
    "cumsum_ half dtype bfloat16": lambda d: ones(d, 3, dtype=torch.half).cumsum_(0, dtype=torch.bfloat16),
    "cumsum_ bool dtype complex64": lambda d: ones(d, 3, dtype=torch.bool).cumsum_(0, dtype=torch.complex64),
    "cumsum_ bad dim": lambda d: ones(d, 3).cumsum_(5, dtype=torch.float64),
    "cumprod_ dtype float64": lambda d: ones(d, 3).cumprod_(0, dtype=torch.float64),
    "cumprod_ int16 dtype uint8": lambda d: ones(d, 3, dtype=torch.int16).cumprod_(0, dtype=torch.uint8),
}


@pytest.mark.parametrize("case", list(BOOL_CASES))
def test_bool_inputs_as_on_cpu(case):
    same_outcome(BOOL_CASES[case])


@pytest.mark.parametrize("case", list(INT_CASES))
def test_integer_inputs_as_on_cpu(case):
    same_outcome(INT_CASES[case])


@pytest.mark.parametrize("case", list(COMPLEX_CASES))
def test_complex_inputs_as_on_cpu(case):
    same_outcome(COMPLEX_CASES[case])


@pytest.mark.parametrize("case", list(MIXED_CASES))
def test_mixed_dtypes_as_on_cpu(case):
    same_outcome(MIXED_CASES[case])


@pytest.mark.parametrize("case", list(EMPTY_CASES))
def test_empty_inputs_as_on_cpu(case):
    same_outcome(EMPTY_CASES[case])


@pytest.mark.parametrize("case", list(SCALAR_CASES))
def test_scalars_past_the_dtype_as_on_cpu(case):
    same_outcome(SCALAR_CASES[case])


@pytest.mark.filterwarnings("ignore:An output with one or more elements was resized")
@pytest.mark.parametrize("case", list(CUMULATIVE_CASES))
def test_cumulative_dtypes_as_on_cpu(case):
    same_outcome(CUMULATIVE_CASES[case])
