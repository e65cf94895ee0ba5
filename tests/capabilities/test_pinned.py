"""Pinned memory, and the rest of what PyTorch asks of the current accelerator, with jax being it.

With jaxdev installed, `import torch` makes jax the accelerator of every process: a CPU-only script
that pins memory (DataLoader(pin_memory=True)) must keep working (jaxdev/capabilities/pinned.py).
"""

from __future__ import annotations

import gc
import os
import subprocess
import sys
import warnings

import numpy as np
import pytest
import torch
import torch.utils.checkpoint as checkpoint
from jaxdev_testing import describe_exit, run_python
from torch.utils.data import DataLoader, TensorDataset

from jaxdev import native
from jaxdev.core import placement as placements

needs_native = pytest.mark.skipif(native.module is None, reason=f"native module not in use: {native.unavailable}")

CPU_ONLY_SCRIPT = """
import torch
from torch.utils.data import DataLoader, TensorDataset

if __name__ == "__main__":
    data = TensorDataset(torch.arange(12.0).reshape(6, 2), torch.arange(6))
    for workers in (0, 2):
        sums = []
        for x, y in DataLoader(data, batch_size=3, pin_memory=True, num_workers=workers):
            sums.append((float(x.sum()), int(y.sum()), x.is_pinned(), y.is_pinned()))
        print(workers, sums)
    print(torch.accelerator.current_accelerator(), torch.ones(3).pin_memory().is_pinned())
"""


def test_cpu_only_script_pins_memory_under_autoload(tmp_path):
    """A script that never names jax, in a fresh process where `import torch` loads jaxdev."""
    script = tmp_path / "train.py"
    script.write_text(CPU_ONLY_SCRIPT)
    env = {k: v for k, v in os.environ.items() if k != "TORCH_DEVICE_BACKEND_AUTOLOAD"}
    out = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=300, env=env, cwd=tmp_path
    )
    assert out.returncode == 0, describe_exit(out)
    assert "os.fork()" not in out.stderr  # the workers fork before JAX starts a thread
    pinned_flag = native.module is not None
    batches = f"[(15.0, 3, {pinned_flag}, {pinned_flag}), (51.0, 12, {pinned_flag}, {pinned_flag})]"
    assert out.stdout.splitlines() == [f"0 {batches}", f"2 {batches}", f"jax {pinned_flag}"]


@needs_native
def test_pin_memory_and_is_pinned():
    x = torch.arange(10.0)
    assert not x.is_pinned()
    p = x.pin_memory()
    assert p.is_pinned() and torch.equal(p, x) and p.data_ptr() != x.data_ptr()
    assert p.pin_memory() is p  # already pinned: itself, as on CUDA
    assert p[3:].is_pinned() and p.view(2, 5).t().is_pinned()
    assert p.untyped_storage().is_pinned() and x.untyped_storage().pin_memory().is_pinned()
    t = x.view(2, 5).t()
    assert t.pin_memory().stride() == t.stride()  # CUDA's layout: the source's strides
    assert torch.empty(4, pin_memory=True).is_pinned()
    assert torch.tensor([1, 2], pin_memory=True).is_pinned()
    assert not torch.ones(2, device="jax").is_pinned()
    assert not p.clone().is_pinned()  # a clone is ordinary memory


@needs_native
def test_pin_memory_keeps_autograd():
    x = torch.ones(3, requires_grad=True)
    (x.pin_memory() * 2).sum().backward()
    assert x.grad.tolist() == [2.0, 2.0, 2.0]


@needs_native
@pytest.mark.parametrize("device", ["", "jax"])
def test_dataloader_pin_memory(device):
    data = TensorDataset(torch.arange(8.0), torch.arange(8))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # pin_memory_device is deprecated (PyTorch's words)
        batches = list(DataLoader(data, batch_size=4, pin_memory=True, pin_memory_device=device))
    assert [(x.is_pinned(), y.is_pinned()) for x, y in batches] == [(True, True)] * 2
    assert [x.to("jax", non_blocking=True).sum().item() for x, _ in batches] == [6.0, 22.0]


@needs_native
@pytest.mark.parametrize("how", ["to", "copy_"])
def test_non_blocking_from_pinned_is_a_copy(how):
    src = torch.arange(4096.0).pin_memory()
    if how == "to":
        y = src.to("jax", non_blocking=True)
    else:
        y = torch.empty(4096, device="jax").copy_(src, non_blocking=True)
    torch.jax.synchronize()
    src.fill_(-1.0)  # after the transfer is done the result is its own
    assert torch.equal(y.cpu(), torch.arange(4096.0))


@needs_native
def test_non_blocking_source_freed_early():
    src = torch.arange(1 << 16, dtype=torch.float32).pin_memory()
    y = src.to("jax", non_blocking=True)
    del src
    gc.collect()
    junk = [torch.full((1 << 16,), -1.0).pin_memory() for _ in range(4)]  # reuse of freed memory shows
    assert torch.equal(y.cpu(), torch.arange(1 << 16, dtype=torch.float32)) and len(junk) == 4


@needs_native
def test_accelerator_transfer_hands_jax_the_pinned_buffer(monkeypatch):
    """On a GPU or TPU jax.device_put copies into device memory: it gets the pinned buffer itself and the
    call returns while the transfer runs. (On this CPU device it would alias instead, hence the patch.)"""
    seen = []
    real_put = placements.jax.device_put

    def put(x, placement=None, **kwargs):
        seen.append(x)
        return real_put(np.array(x), placement, **kwargs)  # a copy: the CPU device must not alias it

    monkeypatch.setattr(placements, "_copies_to_device_memory", lambda placement: True)
    monkeypatch.setattr(placements.jax, "device_put", put)
    src = torch.arange(6.0).pin_memory()
    y = src.to("jax", non_blocking=True)
    assert len(seen) == 1 and seen[0].ctypes.data == src.data_ptr()
    assert torch.equal(y.cpu(), torch.arange(6.0))
    seen.clear()
    src.to("jax")  # blocking: the usual copy
    torch.arange(6.0).to("jax", non_blocking=True)  # not pinned: the usual copy
    src.to(torch.bfloat16).pin_memory().to("jax", non_blocking=True)  # numpy has no bfloat16
    assert all(s.ctypes.data != src.data_ptr() for s in seen)


def test_only_device_memory_takes_the_pinned_buffer():
    """JAX's CPU device (and a host memory kind) may alias an aligned host buffer instead of copying it:
    there the transfer from pinned memory copies first, as any other."""
    jax = placements.jax
    assert placements._copies_to_device_memory(None) == (jax.devices()[0].platform != "cpu")
    cpu = jax.sharding.SingleDeviceSharding(jax.devices("cpu")[0])
    assert not placements._copies_to_device_memory(cpu)
    assert not placements._copies_to_device_memory(jax.devices("cpu")[0])


def test_without_native_module_pin_memory_copies():
    out = run_python(
        """
        import warnings
        import torch
        from torch.utils.data import DataLoader, TensorDataset
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            p = torch.arange(3.0).pin_memory()
            q = torch.arange(3.0).pin_memory()
            batches = list(DataLoader(TensorDataset(torch.arange(4.0)), batch_size=2, pin_memory=True))
        print(p.tolist(), p.is_pinned(), [b[0].is_pinned() for b in batches])
        print(sum("pin_memory() returns ordinary memory" in str(x.message) for x in w))
        torch.accelerator.empty_host_cache()  # was a segmentation fault
        torch.accelerator.memory.empty_cache()
        print("done")
        """,
        env={"JAXDEV_NATIVE": "off"},
    )
    assert out.returncode == 0, describe_exit(out)
    assert out.stdout.splitlines() == ["[0.0, 1.0, 2.0] False [False, False]", "1", "done"]


# --- the rest of what PyTorch asks of the current accelerator ------------------------------------


def test_accelerator_basics():
    acc = torch.accelerator
    assert acc.current_accelerator() == torch.device("jax") and acc.is_available()
    assert acc.device_count() == 1 and acc.current_device_index() == 0
    acc.set_device_index(0)
    with acc.device_index(0):
        acc.synchronize()
    assert acc.current_stream().device == torch.device("jax", 0)
    assert torch.get_device_module() is torch.jax


def test_accelerator_device_capability():
    caps = torch.accelerator.get_device_capability()
    assert {torch.float32, torch.bfloat16, torch.int64, torch.bool, torch.complex64} <= caps["supported_dtypes"]
    assert torch.complex32 not in caps["supported_dtypes"]


@pytest.mark.parametrize("namespace", ["accelerator", "memory"])
def test_accelerator_memory_calls(namespace):
    """torch.accelerator.memory's functions are separate objects from torch.accelerator's: both answer."""
    ns = torch.accelerator if namespace == "accelerator" else torch.accelerator.memory
    x = torch.ones(1024, device="jax")
    assert ns.memory_allocated() >= x.nbytes and ns.max_memory_allocated() >= ns.memory_allocated()
    assert ns.memory_reserved() >= 0 and ns.max_memory_reserved() >= 0
    assert isinstance(ns.memory_stats(), dict)
    free, total = ns.get_memory_info()
    assert 0 < free <= total
    ns.reset_peak_memory_stats()
    ns.reset_accumulated_memory_stats()
    ns.empty_cache()
    ns.empty_host_cache()


@needs_native
def test_hooks_answer_as_the_device_guard():
    assert torch._C._accelerator_hooks_device_count() == 1
    assert torch._C._accelerator_hooks_get_current_device() == 0
    with pytest.raises(RuntimeError, match="jax:1 is not a device jaxdev places tensors on"):
        torch._C._accelerator_hooks_set_current_device(1)


@pytest.mark.parametrize("reentrant", [False, True])
def test_checkpoint_replays_jax_randomness(reentrant):
    """preserve_rng_state saves the jax generator's state (torch.jax._initialized tells checkpoint the
    device is in use), so the recomputed dropout mask is the forward's."""
    x = torch.ones(4, 8, device="jax", requires_grad=True)

    def f(x):
        return torch.nn.functional.dropout(x * 1.0, 0.5, training=True)

    torch.manual_seed(1)
    ref = f(x)
    ref.sum().backward()
    expected, x.grad = x.grad.cpu(), None
    torch.manual_seed(1)
    out = checkpoint.checkpoint(f, x, use_reentrant=reentrant, preserve_rng_state=True)
    out.sum().backward()
    assert torch.equal(out.cpu(), ref.cpu()) and torch.equal(x.grad.cpu(), expected)


def test_checkpoint_device_states():
    devices, states = checkpoint.get_device_states(torch.ones(2, device="jax"))
    assert devices == [0] and len(states) == 1
    checkpoint.set_device_states(devices, states, device_type="jax")


def test_fork_rng_restores_jax_generator():
    torch.manual_seed(5)
    with torch.random.fork_rng(device_type="jax"):
        first = torch.randn(3, device="jax").cpu()
    assert torch.equal(torch.randn(3, device="jax").cpu(), first)


def test_generators():
    assert torch.Generator().device == torch.device("cpu")
    g = torch.Generator("jax").manual_seed(7)
    assert g.device.type == "jax"
    a = torch.randn(3, device="jax", generator=g).cpu()
    assert torch.equal(torch.randn(3, device="jax", generator=torch.Generator("jax").manual_seed(7)).cpu(), a)


def test_autocast_and_grad_scaler():
    assert torch.amp.is_autocast_available("jax")
    a = torch.randn(4, 4, device="jax")
    with torch.autocast("jax", dtype=torch.bfloat16):
        assert (a @ a).dtype == torch.bfloat16
    scaler = torch.amp.GradScaler("jax", init_scale=1024.0)
    lin = torch.nn.Linear(4, 2).to("jax")
    opt = torch.optim.SGD(lin.parameters(), lr=0.1)
    scaler.scale(lin(torch.randn(3, 4, device="jax")).sum()).backward()
    before = lin.weight.detach().cpu()
    lin.weight.grad.fill_(float("inf"))  # an overflow: the step is skipped, the scale halves
    scaler.step(opt)
    scaler.update()
    assert torch.equal(lin.weight.detach().cpu(), before) and scaler.get_scale() == 512.0
