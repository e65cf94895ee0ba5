"""Fixtures of the op tests: `tpu_policy`, the TPU's program facts on this process's platform;
`tpu_division`, every float32 division lowered as inexactly as a TPU's (both: tests/tpu_emulation.py,
which benchmarks/tpu_emulated_ulps.py shares); `tpu_functions`, XLA's float32 functions 1,000 ulps off
(tests/tpu_functions.py: a tracer of kernels that still reach them where jaxdev's are chosen)."""

from __future__ import annotations

import pytest
import tpu_emulation
import tpu_functions as tracer


@pytest.fixture
def tpu_policy():
    """The TPU's program facts on this process's platform and its own float32 functions (JAXDEV_MATH
    auto picks them off CPU), with every program traced and lowered afresh while they hold; and a list
    of the (from, to) dtypes of each convert the usual lowering was asked for."""
    with tpu_emulation.policy() as seen:
        yield seen


@pytest.fixture
def tpu_division():
    """Every float32 division XLA is given, `/` in a kernel as much as division.divide's own, lowered
    as inexactly as a TPU divides (tpu_emulation.inexact). Programs traced afresh."""
    with tpu_emulation.division():
        yield


@pytest.fixture
def tpu_sqrt():
    """Every float32 sqrt XLA is given lowered 2 ulps off, as a TPU's (tpu_emulation.sqrt)."""
    with tpu_emulation.sqrt():
        yield


@pytest.fixture
def tpu_functions():
    """XLA's float32 and complex64 exp, log, tanh, atan2, pow ... (tpu_functions.XLA_FUNCTIONS) lowered
    1,000 ulps off: a kernel that reaches them where jaxdev's functions are chosen (a TPU) shows.
    Programs traced afresh."""
    with tracer.functions():
        yield
