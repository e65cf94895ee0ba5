"""torch.jax's memory answers let go of a tensor as soon as the tensor is gone, as CUDA's do: after
`del t`, after the `gc.collect()` that frees a reference cycle, after a backward that freed what it
saved, with no op run in between (jaxdev/capabilities/memory.py, the native module's storage deleter)."""

from __future__ import annotations

import gc
import os
import subprocess
import sys

import pytest
import torch

import jaxdev
from jaxdev import native, tensor

MiB = 1 << 20
needs_native = pytest.mark.skipif(native.module is None, reason="the native module is not in use")


@pytest.fixture(autouse=True)
def settled():
    torch.jax.empty_cache()
    yield


def _computed(t):
    """`t`, its value computed (fused eager mode computes pending ops at a synchronize)."""
    torch.jax.synchronize()
    return t


def test_del_frees_at_once():
    before = torch.jax.memory_allocated()
    t = _computed(torch.ones(1024, 1024, device="jax"))  # 4 MiB
    assert torch.jax.memory_allocated() - before >= 4 * MiB
    del t
    assert torch.jax.memory_allocated() - before < 4 * MiB
    stats = torch.jax.memory_stats()
    assert stats["allocated_bytes.all.current"] - before < 4 * MiB
    assert torch.accelerator.memory_allocated() - before < 4 * MiB


def test_a_pending_fused_result_is_counted():
    """Fused eager: a result recorded and not yet computed counts, as a CUDA kernel's output does from
    its launch (the answer runs the pending ops first; it counted nothing before)."""
    with jaxdev.eager_mode("fused"):
        before = torch.jax.memory_allocated()
        t = torch.ones(1024, 1024, device="jax")  # 4 MiB, recorded
        # (3 MiB: what earlier tests left may be released meanwhile; uncounted, t made the difference 0)
        assert torch.jax.memory_allocated() - before >= 3 * MiB
        assert torch.accelerator.memory_allocated() - before >= 3 * MiB
        del t
        assert torch.jax.memory_allocated() - before < 4 * MiB


def test_peak_is_reset_below_a_deleted_tensor():
    before = torch.jax.memory_allocated()
    t = _computed(torch.ones(1024, 1024, device="jax"))
    assert torch.jax.max_memory_allocated() - before >= 4 * MiB
    del t
    torch.jax.reset_peak_memory_stats()
    assert torch.jax.max_memory_allocated() - before < 4 * MiB


def test_a_cycle_is_freed_by_gc_collect():
    before = torch.jax.memory_allocated()
    cycle = [_computed(torch.ones(1024, 1024, device="jax"))]
    cycle.append(cycle)
    del cycle
    assert torch.jax.memory_allocated() - before >= 4 * MiB  # unreachable, not yet collected
    gc.collect()
    assert torch.jax.memory_allocated() - before < 4 * MiB


@needs_native
def test_a_tensor_freed_by_backward_off_the_gil_is_not_counted():
    """Backward releases the GIL: what it frees is dropped when memory is asked about, not at the next op."""
    x = torch.randn(512, 1024, device="jax", requires_grad=True)
    h = torch.tanh(x)  # tanh saves its result (2 MiB) for backward, its last node before x's grad
    address = h.untyped_storage().data_ptr()
    loss = h.sum()
    del h
    loss.backward()
    del loss
    torch.jax.memory_allocated()
    assert address not in tensor.BOXES


def _consume(t, divisor):
    return t


@needs_native
def test_a_tensor_freed_while_an_exception_unwinds_keeps_that_exception():
    """The argument already on the stack is freed as ZeroDivisionError unwinds it, with the error set:
    its box goes then, and the exception raised is still ZeroDivisionError."""
    before, zero = torch.jax.memory_allocated(), 0
    with pytest.raises(ZeroDivisionError):
        _consume(torch.ones(1024, 1024, device="jax"), 1 // zero)
    assert torch.jax.memory_allocated() - before < 4 * MiB


def test_without_the_native_module_del_frees_at_the_next_question():
    code = (
        "import torch, jaxdev\n"
        "t = torch.ones(1024, 1024, device='jax')\n"
        "torch.jax.synchronize()\n"
        "before = torch.jax.memory_allocated()\n"
        "del t\n"
        "print(before - torch.jax.memory_allocated())\n"
    )
    env = {**os.environ, "JAXDEV_NATIVE": "off"}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    assert int(done.stdout.split()[-1]) >= 4 * MiB
