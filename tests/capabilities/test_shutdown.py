"""A jaxdev process exits as fast as torch and jax alone (jaxdev/capabilities/shutdown.py).

The time from a script's last line to its exit is CPython's finalization: four full garbage
collections, each traversing every tracked object still alive. These tests count those objects
instead of timing the exit, which on a loaded machine varies by a factor of two between runs: the
count is exact, and the exit time follows it (see jaxdev/capabilities/shutdown.py for the measurements).
"""

from __future__ import annotations

import gc

from jaxdev_testing import describe_exit, run_python

from jaxdev.capabilities import shutdown

_BASELINE = """
import gc, torch, jax.numpy as jnp
(jnp.ones(3) + 1).block_until_ready()
torch.ones(3) + 1
print("TRACKED", len(gc.get_objects()))
"""

_JAXDEV = """
import gc, os

class Finalized:
    def __init__(self, name, cyclic):
        self.name, self.me = name, (self if cyclic else None)

    def __del__(self, write=os.write):
        write(1, f"FINALIZED {self.name}\\n".encode())

before = Finalized("before", cyclic=False)
import torch

x = torch.randn(8, 4, device="jax")
y = ((x @ x.T).relu().sum() + x.mean()).cpu()
model = torch.compile(torch.nn.Linear(4, 4).to("jax"), backend="jax")
model(x).sum().cpu()
plain, cyclic = Finalized("plain", cyclic=False), Finalized("cyclic", cyclic=True)
out = open(PATH, "w")
out.write("written at exit")

def keeps_main_in_a_cycle():
    return out

print("TRACKED", len(gc.get_objects()), flush=True)
"""


def _tracked(proc) -> int:
    assert proc.returncode == 0, describe_exit(proc)
    return int(next(ln for ln in proc.stdout.splitlines() if ln.startswith("TRACKED")).split()[1])


def test_exit_traverses_no_more_than_torch_and_jax_alone_and_finalizes_the_program(tmp_path):
    """After eager ops and a torch.compile the heap is 1.8x torch + jax's (torch._dynamo and sympy
    come in with fake tensors); exit's collections must traverse no more than torch + jax's, and the
    program's own objects and unclosed files are still finalized at exit."""
    baseline = _tracked(run_python(_BASELINE, env={"TORCH_DEVICE_BACKEND_AUTOLOAD": "0"}, timeout=300))
    path = tmp_path / "unclosed.txt"
    proc = run_python(_JAXDEV.replace("PATH", repr(str(path))), timeout=300)
    assert _tracked(proc) <= baseline, (_tracked(proc), baseline)
    finalized = {ln.split(" ", 1)[1] for ln in proc.stdout.splitlines() if ln.startswith("FINALIZED")}
    assert finalized == {"before", "plain", "cyclic"}
    assert path.read_text() == "written at exit"


def test_fast_exit_can_be_turned_off(monkeypatch):
    frozen = gc.get_freeze_count()
    monkeypatch.setenv(shutdown.ENV, "0")
    shutdown.install()
    assert gc.get_freeze_count() == frozen
