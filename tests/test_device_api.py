"""torch.jax's memory, stream and event API, torch.accelerator for jax, and the PrivateUse1 conflict
with torchax."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch


def test_memory_api_counts_the_device_arrays():
    torch.jax.empty_cache()
    before = torch.jax.memory_allocated()
    x = torch.ones(1000, 250, device="jax")  # 1,000,000 bytes
    assert torch.jax.memory_allocated() - before >= 1_000_000
    assert torch.jax.max_memory_allocated() >= torch.jax.memory_allocated()
    assert torch.jax.memory_reserved() >= torch.jax.memory_allocated() - 1
    free, total = torch.jax.mem_get_info()
    assert 0 < free <= total
    stats = torch.jax.memory_stats()
    assert stats["allocated_bytes.all.current"] >= 1_000_000
    del x
    torch.jax.empty_cache()
    assert torch.jax.memory_allocated() < before + 1_000_000
    torch.jax.reset_peak_memory_stats()
    assert torch.jax.max_memory_allocated() <= before + 1_000_000
    assert isinstance(torch.jax.get_device_name(), str) and torch.jax.get_device_properties().total_memory == total


def test_torch_accelerator_answers_for_jax():
    assert torch.accelerator.current_accelerator().type == "jax"
    assert torch.accelerator.device_count() >= 1 and torch.accelerator.current_device_index() == 0
    torch.ones(3, device="jax")
    torch.accelerator.synchronize()  # PyTorch's own call raises for a Python backend
    assert torch.accelerator.memory_allocated() == torch.jax.memory_allocated()
    free, total = torch.accelerator.get_memory_info()
    assert 0 < free <= total == torch.jax.mem_get_info()[1]
    torch.accelerator.empty_cache()


def test_events_time_device_work():
    start, end = torch.jax.Event(enable_timing=True), torch.jax.Event(enable_timing=True)
    with torch.jax.stream(torch.jax.Stream()):
        start.record()
        (torch.randn(64, 64, device="jax") @ torch.randn(64, 64, device="jax")).sum()
        end.record()
    end.synchronize()
    assert start.elapsed_time(end) >= 0
    assert torch.jax.current_stream() == torch.jax.default_stream()
    with pytest.raises(RuntimeError, match="enable_timing"):
        torch.jax.Event().elapsed_time(torch.jax.Event())


# A stand-in for torchax (which does not install beside torch 2.13): its import renames PrivateUse1
# to "jax", as torchax's does.
_STUB = 'import torch\ntorch.utils.rename_privateuse1_backend("jax")\n'


@pytest.mark.parametrize(
    "first,second,message",
    [
        ("jaxdev", "torchax", "torchax cannot be imported in a process that imported jaxdev"),
        ("torchax", "jaxdev", "jaxdev cannot be imported in a process that imported torchax"),
    ],
)
def test_torchax_and_jaxdev_refuse_each_other_in_one_sentence(tmp_path, first, second, message):
    (tmp_path / "torchax").mkdir()
    (tmp_path / "torchax" / "__init__.py").write_text(_STUB)
    env = {**os.environ, "PYTHONPATH": str(tmp_path), "TORCH_DEVICE_BACKEND_AUTOLOAD": "0"}
    out = subprocess.run(
        [sys.executable, "-c", f"import {first}; import {second}"], capture_output=True, text=True, env=env, timeout=300
    )
    assert out.returncode != 0
    assert out.stderr.strip().splitlines()[-1] == f"jaxdev.device.PrivateUse1Taken: {message}: both register " + (
        "PyTorch's PrivateUse1 device as 'jax', and a process has one; use one of them per process"
    )


class _AssertingEngine:
    """Stands in for PyTorch's engine on a machine with CUDA: raises the assert a CUDA backward meets
    once PrivateUse1 is registered (pytorch/pytorch#161129; no GPU here to meet it for real)."""

    def run_backward(self, *args, **kwargs):
        raise RuntimeError(
            "opt_ready_stream && opt_parent_stream INTERNAL ASSERT FAILED at "
            '"/pytorch/torch/csrc/autograd/engine.cpp":1084, please report a bug to PyTorch.'
        )


def test_a_foreign_accelerators_backward_fails_in_one_sentence(monkeypatch):
    from torch.autograd.variable import Variable

    from jaxdev.capabilities.accelerators import OneAcceleratorEngine

    engine = Variable._execution_engine
    assert isinstance(engine, OneAcceleratorEngine)
    x = torch.ones(3, device="jax", requires_grad=True)
    (x * 2).sum().backward()  # the engine still runs jax and CPU backward passes
    assert x.grad.cpu().tolist() == [2, 2, 2]
    assert torch.autograd.grad((x * 3).sum(), x)[0].cpu().tolist() == [3, 3, 3]
    assert isinstance(engine.is_checkpoint_valid(), bool)
    monkeypatch.setattr(engine, "_engine", _AssertingEngine())
    with pytest.raises(RuntimeError, match=r"^a backward pass through tensors of another accelerator") as info:
        (x * 2).sum().backward()
    assert "INTERNAL ASSERT" not in str(info.value) and info.value.__cause__ is None
    monkeypatch.undo()
    with pytest.raises(RuntimeError, match="does not require grad"):  # other errors pass through untouched
        torch.ones(2, device="jax").sum().backward()
