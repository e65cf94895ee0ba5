"""Fused eager gives the numbers kernels hand to their jitted bodies to its program as data, as per-op
mode's jit does (jaxdev/fused/literals.py): XLA cannot fold them, so x * (1 + 0j), x + 0, x * -1, x / 1
compute as in per-op mode (c10's complex product, IEEE's signed zeros and NaN signs)."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch
from jaxdev_testing import bits_list

import jaxdev
from jaxdev.fused import literals

VALUES = [math.inf, -math.inf, math.nan, 1.0, -0.0, 0.0, 2.5]


pytestmark = pytest.mark.usefixtures("per_op_after")


CASES = {
    "x * True": lambda x: x * True,  # c10: (inf + 0i)(1 + 0i) = inf + NaN i; folded: inf + 0i
    "x * 1": lambda x: x * 1,
    "x * (1 + 0j)": lambda x: x * (1 + 0j),
    "x / 1": lambda x: x / 1,
    "x + 0": lambda x: x + 0,  # -0.0 + 0 is +0.0; folded: -0.0
    "x - 0": lambda x: x - 0,
    "x * -1": lambda x: x * -1,  # x86 keeps a NaN's sign through a multiply; folded into a negation: flipped
    "rsub": lambda x: torch.rsub(x, 0.0),  # its alpha 1 multiplies
    "add alpha": lambda x: torch.add(x, x, alpha=1),
}


@pytest.mark.parametrize("dtype", [torch.float16, torch.float32, torch.float64, torch.complex64, torch.complex128])
@pytest.mark.parametrize("name", sorted(CASES))
def test_fused_results_are_per_op_results(name, dtype):
    fn = CASES[name]
    x = torch.tensor(VALUES, dtype=torch.float64)
    x = (x + 1j * x.flip(0)).to(dtype) if dtype.is_complex else x.to(dtype)
    with jaxdev.eager_mode("op"):
        expected = _outcome(fn, x)
    with jaxdev.eager_mode("fused"):
        got = _outcome(fn, x)
    assert got == expected


def _outcome(fn, x):
    try:
        return bits_list(fn(x.to("jax")))
    except NotImplementedError as e:  # no complex32 multiply, in both modes
        return str(e)


_body = jax.jit(lambda a, b: a * b)
_index = jax.jit(lambda a, i: jax.lax.dynamic_slice(a, (i,), (1,)))


def test_lifted_literals_are_the_numbers_that_reach_floating_arithmetic():
    """A float or complex always; an integer or bool where the body converts it to a float; an index not."""

    def fn(x):
        return _body(x, 2.0), _body(x, 1), _body(x, True), _index(x, 1), _body(x.astype(jnp.int64), 3)

    jaxpr, lifted = literals.lift(jax.make_jaxpr(fn)(jnp.ones(4)).jaxpr)
    assert [(np.dtype(v.aval.dtype).kind, v.val) for v in lifted] == [("f", 2.0), ("i", 1), ("b", True)]
    assert len(jaxpr.invars) == 1 + 3


_FLAG = [1.0]


def _scaled(x):
    return _body(x, _FLAG[0])


def test_a_program_traced_again_takes_the_kernels_numbers_of_then():
    """When jax traces again (its caches cleared: a test's TPU policy), the kernels run again as they do
    under plain jax.jit, and numbers they hand over differently build the program anew."""
    run = literals.jit(_scaled)
    x = jnp.arange(3.0)
    assert run(x).tolist() == [0.0, 1.0, 2.0]
    _FLAG[0] = -2.0
    try:
        assert run(x).tolist() == [0.0, 1.0, 2.0]  # traced once: as jax.jit, not traced again
        jax.clear_caches()
        assert run(x).tolist() == [-0.0, -2.0, -4.0]
    finally:
        _FLAG[0] = 1.0


def test_a_program_built_inside_a_trace_keeps_concrete_numbers():
    """A flush inside a jax trace (a jitted function reading a pending tensor) builds its program there:
    the numbers it keeps are arrays, not the trace's tracers (a later call leaked them)."""
    run = literals.jit(lambda x: _body(x, 3.0))
    x = jnp.arange(3.0)
    assert jax.jit(lambda x: run(x))(x).tolist() == [0.0, 3.0, 6.0]
    assert run(x).tolist() == [0.0, 3.0, 6.0]
