"""Fused eager tells numbers apart by type and bits (jaxdev/fused/number_keys.py), not by ==: -0.0 after
0.0 (and 0.0 after -0.0) in the same place of the same op gets its own program and CPU's signs, on the
native replay guard's path and on the full key's; a NaN argument replays its program instead of
compiling at every call; 1, 1.0 and True stay apart."""

from __future__ import annotations

import math
import warnings

import pytest
import torch
from jaxdev_testing import bits_list

import jaxdev
from jaxdev.fused import recorder

STATS = recorder.STATS


pytestmark = pytest.mark.usefixtures("per_op_after")


# op(x, number) -> a result whose bits show the number's sign
CASES = {
    "pow": lambda x, v: torch.pow(v, x),  # pow(-0.0, -1) is -inf, pow(0.0, -1) inf
    "full": lambda x, v: torch.full(x.shape, v, device=x.device),
    "clamp": lambda x, v: torch.clamp(x, min=v),  # clamp(-0.0, min=0.0) is 0.0
    "fill_": lambda x, v: x.clone().fill_(v),
    "complex_mul": lambda x, v: x.to(torch.complex64) * complex(1.0, v),  # 1 - 0j: imaginary parts' signs
    "div": lambda x, v: torch.div(x, v),  # an integer tensor's divisor stays in the key (not lifted)
}


@pytest.mark.parametrize("order", [(0.0, -0.0), (-0.0, 0.0)], ids=["positive_first", "negative_first"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_signed_zeros_in_the_same_place_keep_their_signs(name, order):
    """Each op called in a loop with one zero, then the other, then the first again: every call as CPU's,
    bit for bit (the second zero used to replay the first one's program)."""
    fn = CASES[name]
    x = torch.tensor([-1.0, -3.0, 2.0, -0.0, 0.0]) if name != "div" else torch.tensor([-1, 3, 0])
    sequence = [*order, *order]
    expected = [bits_list(fn(x, v)) for v in sequence]
    with jaxdev.eager_mode("fused"):
        xj = x.to("jax")
        got = [bits_list(fn(xj, v)) for v in sequence]
    assert got == expected


def test_zeros_replay_their_own_programs():
    """Each sign of zero settles to its own program; the same zero again replays it (by the native guard
    where it is in use: the trie expects the child taken last), the other one does not."""
    x = torch.tensor([-1.0, 2.0]).to("jax")
    with jaxdev.eager_mode("fused"):
        for v in (0.0, -0.0):
            torch.pow(v, x).cpu()
        before = (STATS.programs, STATS.replayed)
        for v in (0.0, 0.0, -0.0, -0.0, 0.0, 0.0):
            assert bits_list(torch.pow(v, x)) == bits_list(torch.pow(v, x.cpu()))
    assert STATS.programs == before[0]
    if jaxdev.native.module is not None:
        assert STATS.replayed > before[1]


@pytest.mark.parametrize("nan", [math.nan, -math.nan], ids=["nan", "negative_nan"])
def test_a_nan_argument_replays_its_program(nan):
    """A fresh NaN each call (`float('nan')` is a new object, never == another) replays one program, and
    the op is not taken out as "called with other numbers every time"."""
    x = torch.tensor([1.0, -2.0, 0.5]).to("jax")
    with jaxdev.eager_mode("fused"), warnings.catch_warnings():
        warnings.simplefilter("error")  # the storm guard's warning would fail the test
        built = []
        for _ in range(6):
            before = STATS.programs
            value = float(str(nan))  # a new object every time
            got = torch.copysign(torch.clamp(x, max=value), value)
            assert bits_list(got) == bits_list(torch.copysign(torch.clamp(x.cpu(), max=value), value))
            built.append(STATS.programs - before)
    assert built[1:] == [0] * 5, built


def test_one_and_true_and_one_point_zero_stay_apart():
    """1, 1.0 and True are equal under == but give other dtypes: each keeps its own program in turn."""
    x = torch.tensor([1, 2, 3], dtype=torch.int32)
    for _ in range(2):
        for v in (1, 1.0, True, 1 + 0j):
            expected = torch.add(x, v)
            with jaxdev.eager_mode("fused"):
                got = torch.add(x.to("jax"), v).cpu()
            assert got.dtype == expected.dtype and torch.equal(got, expected), (v, got, expected)


def test_key_parts_keep_signs_and_nans():
    """The recorder's key parts themselves: equal under == exactly where the bits are."""
    seg = recorder.Segment()

    def part(v):
        key: list = []
        seg.ref(v, key, [])
        return key[0]

    assert part(0.0) != part(-0.0)
    assert part(math.nan) == part(float("nan"))
    assert part(math.nan) != part(-math.nan)
    assert part(1.5) == part(1.5) == (float, 1.5)
    assert part(complex(1, 0.0)) != part(complex(1, -0.0))
    assert part(complex(math.nan, 1)) == part(complex(float("nan"), 1))
    assert len({part(1), part(1.0), part(True), part(1 + 0j)}) == 4
