"""Fused eager keys every op by what its kernel reads besides its arguments (jaxdev/fused/context.py):
the default dtype, the deterministic algorithms and their fill, the thread count, the float32 matmul
precision. An op met under other settings is learnt and compiled under them; a change between two ops
flushes the ops before it; a segment's program is traced under the settings its ops were recorded with."""

from __future__ import annotations

import warnings

import pytest
import torch

import jaxdev
from jaxdev.fused import context, recorder
from jaxdev.ops.kit import cpu_numerics

STATS = recorder.STATS


@pytest.fixture(autouse=True)
def _settings_restored():
    dtype, threads = torch.get_default_dtype(), torch.get_num_threads()
    deterministic, warn_only = (
        torch.are_deterministic_algorithms_enabled(),
        torch.is_deterministic_algorithms_warn_only_enabled(),
    )
    fill, precision = torch.utils.deterministic.fill_uninitialized_memory, torch.get_float32_matmul_precision()
    yield
    jaxdev.eager_mode("op")
    torch.jax.synchronize()
    torch.set_default_dtype(dtype)
    torch.set_num_threads(threads)
    torch.use_deterministic_algorithms(deterministic, warn_only=warn_only)
    torch.utils.deterministic.fill_uninitialized_memory = fill
    torch.set_float32_matmul_precision(precision)


def _deterministic(on: bool) -> None:
    torch.use_deterministic_algorithms(on)
    torch.utils.deterministic.fill_uninitialized_memory = True


def test_the_native_settings_are_the_python_twins():
    assert context.now() == context._python()
    torch.set_float32_matmul_precision("medium")
    _deterministic(True)
    assert context.now() == context._python()


def test_an_empty_tensor_is_filled_as_the_settings_say_at_each_call():
    """use_deterministic_algorithms with fill_uninitialized_memory fills new memory with NaN; an empty
    tensor's program learnt without it replayed zeros."""
    got = []
    with jaxdev.eager_mode("fused"), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # deterministic mode's own notes
        for on in (False, True, False, True):
            _deterministic(on)
            got.append(torch.empty(3, device="jax").add(1).isnan().tolist())
    assert got == [[False] * 3, [True] * 3, [False] * 3, [True] * 3]


def test_the_thread_count_decides_as_on_cpu():
    """Which elements CPU's half i0e computes with its scalar op depends on the thread count."""
    x = (torch.rand(3 * cpu_numerics.GRAIN_SIZE + 50, generator=torch.Generator().manual_seed(1)) * 30).to(
        torch.bfloat16
    )
    for threads in (1, 3, 1):
        torch.set_num_threads(threads)
        expected = torch.special.i0e(x)
        with jaxdev.eager_mode("fused"):
            got = torch.special.i0e(x.to("jax")).cpu()
        assert torch.equal(got.view(torch.int16), expected.view(torch.int16)), threads


def test_a_change_of_settings_flushes_the_ops_before_it():
    x = torch.arange(4.0).to("jax")
    with jaxdev.eager_mode("fused"):
        y = x * 2
        flushes = STATS.flushes
        torch.set_float32_matmul_precision("medium")
        z = y + 1
        assert STATS.flushes == flushes + 1  # y's segment ran under the settings it was recorded with
        assert z.tolist() == [1.0, 3.0, 5.0, 7.0]


def test_a_segment_runs_under_the_settings_its_ops_were_recorded_with():
    """Settings changed after the last op and before the read: the program is traced under the old."""
    ints = torch.arange(3).to("jax")
    with jaxdev.eager_mode("fused"):
        _deterministic(True)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            empty = torch.empty(2, device="jax").mul(1)
        half = ints * 0.5  # a Python float takes the default dtype: float32 here
        _deterministic(False)
        torch.set_default_dtype(torch.float64)
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # no op-by-op fallback for a result laid out otherwise
            assert empty.isnan().tolist() == [True, True]
            assert half.dtype == torch.float32 and half.tolist() == [0.0, 0.5, 1.0]
