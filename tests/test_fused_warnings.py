"""A kernel's warnings under fused eager are per-op mode's (jaxdev/fused/learn.py): an op whose kernel
warns runs eagerly, so it warns at every call as its kernel decides, and the call that learnt it gives
them once, not once from learning and again from running."""

from __future__ import annotations

import warnings

import pytest
import torch

import jaxdev
from jaxdev.fused import recorder

STATS = recorder.STATS


pytestmark = pytest.mark.usefixtures("per_op_after")


@pytest.fixture(autouse=True)
def _warn_always_off():
    yield
    torch.set_warn_always(False)


def _said(mode: str, fn, calls: int = 3) -> list:
    """The warnings `calls` calls of fn give in `mode`, each call's list."""
    said = []
    with jaxdev.eager_mode(mode):
        for _ in range(calls):
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                fn()
                torch.jax.synchronize()
            said.append([str(w.message).split(" (Triggered internally")[0] for w in caught])
    return said


def _random_past_half():
    # half cannot hold 5000 - 1: CPU's kernel warns at every call
    torch.empty(4, dtype=torch.half, device="jax").random_(0, 5000)


def _arange_resizing():
    # an out of 7 elements resized to 6: arange warns, and runs eagerly in fused mode (it resizes)
    torch.arange(6, out=torch.empty(7, device="jax"))


def _new_complex_half():
    torch.empty(3, dtype=torch.complex32, device="jax")


@pytest.mark.parametrize("fn", [_random_past_half, _arange_resizing], ids=["every call", "eager op"])
def test_every_call_warns_as_in_per_op_mode(fn):
    expected = _said("op", fn)
    assert all(expected) and _said("fused", fn) == expected


def test_a_warning_given_again_under_warn_always():
    """complex32's "experimental" warning is given once, and at every call under set_warn_always (a
    setting in the op's key: fused_context). The call that learns the op gives the kernel's own C++
    warning twice (a nested factory's TORCH_WARN, which reaches Python only as the outer call returns:
    learning's evaluation cannot take it back); every later call gives per-op mode's."""
    torch.set_warn_always(True)
    expected = _said("op", _new_complex_half)
    got = _said("fused", _new_complex_half)
    assert all(expected) and got[1:] == expected[1:] and set(got[0]) == set(expected[0])


def test_an_op_that_does_not_warn_stays_recorded():
    x = torch.ones(4).to("jax")
    with jaxdev.eager_mode("fused"):
        before = dict(STATS.eager)
        for _ in range(3):
            (x * 2).relu().cpu()
        ran = {op for (op, _), n in STATS.eager.items() if n != before.get((op, _), 0)}
        assert not ran & {"aten::mul.Tensor", "aten::relu"}
