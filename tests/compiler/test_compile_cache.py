"""A second process compiling the same model loads AOTAutograd's graphs (jaxdev/compiler/aot_cache.py)
and their programs (program_cache.py) from jaxdev's cache instead of tracing them again, and computes
the same bits. Asserted by the caches' counters, not by timing."""

from __future__ import annotations

import json
import os
import pickle
import shutil

import pytest
import torch
from jaxdev_testing import describe_exit, run_python

import jaxdev  # noqa: F401
from jaxdev.compiler import aot_cache
from jaxdev.graphs import program_cache
from jaxdev.graphs.program import GraphProgram
from jaxdev.programs import cache

# A training step (forward+backward graph, then the optimizer's graphs) and an inference graph with
# an input mutation; prints the cache counters and every value as exact hex.
_CHILD = """
import json, sys, torch, jaxdev
from torch import nn
from jaxdev.compiler.stats import STATS
from jaxdev.graphs import program_cache
from jaxdev.programs import cache
{patch}
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4)).to("jax")
opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
x, y = torch.randn({batch}, 8).to("jax"), torch.randint(0, 4, ({batch},)).to("jax")

@torch.compile(backend="jax")
def forward_backward():
    loss = nn.functional.cross_entropy(model(x), y)
    loss.backward()
    return loss

opt_step = torch.compile(opt.step, backend="jax")
losses = []
for _ in range(3):
    opt.zero_grad(set_to_none=True)
    losses.append(forward_backward().item())
    opt_step()

buf = torch.zeros(4, device="jax")
@torch.compile(backend="jax")
def infer(v):
    buf.add_(v.sum(0))
    return (v * 2).tanh()
with torch.no_grad():
    out = infer(x[:, :4])

values = [*losses, *out.cpu().flatten().tolist(), *buf.cpu().tolist()]
values += [v for p in model.parameters() for v in p.detach().cpu().flatten().tolist()]
print(json.dumps({{"hits": STATS.hits, "compiled": STATS.compiled,
                   "loaded": program_cache.STATS.hits, "saved": program_cache.STATS.saves,
                   "values": [float(v).hex() for v in values]}}))
"""


_PROGRAMS_SAVED = (
    "the child's graphs' programs are saved and loaded (program_cache): fused eager compiles its segments' programs"
    " instead, so it saves none (the graphs themselves are cached as in per-op mode)"
)


def _run(cache_dir, patch: str = "", batch: int = 5, **env) -> dict:
    proc = run_python(
        _CHILD.format(patch=patch, batch=batch),
        env={
            "JAXDEV_CACHE_DIR": str(cache_dir),
            "TORCHINDUCTOR_CACHE_DIR": str(cache_dir / "inductor"),
            "JAXDEV_COMPILE_CACHE": "on",  # off by default (cache.compile_caches_on)
            **env,
        },
        timeout=600,
    )
    assert proc.returncode == 0, describe_exit(proc)
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def filled(tmp_path_factory):
    """One first process over an empty cache (each test gets its own copy of what it left): the child
    processes are most of this file's time, so they are not paid again per test."""
    root = tmp_path_factory.mktemp("filled")
    first = _run(root)
    return root, first


def _copy_of(filled, tmp_path):
    root, first = filled
    shutil.copytree(root, tmp_path / "cache")
    return tmp_path / "cache", first


@pytest.mark.per_op_mode(_PROGRAMS_SAVED)
def test_a_first_process_fills_the_cache(filled):
    root, first = filled
    assert first["hits"] == 0 and first["compiled"] >= 3  # forward+backward, optimizer, inference
    assert first["loaded"] == 0 and first["saved"] >= 4  # their programs (the backward is one too)
    assert os.listdir(os.path.join(root, aot_cache.SUBDIR)), "no cache entries written"
    assert not os.path.exists(os.path.join(root, "inductor", "aotautograd"))  # jaxdev's own place


def test_a_second_process_loads_the_graphs_and_computes_the_same_bits(filled, tmp_path):
    cache_dir, first = _copy_of(filled, tmp_path)
    second = _run(cache_dir)
    assert second["compiled"] == 0, second
    assert second["hits"] == first["compiled"]
    assert second["loaded"] == first["saved"] and second["saved"] == 0
    assert second["values"] == first["values"]


@pytest.mark.per_op_mode(_PROGRAMS_SAVED)
def test_another_layout_traces_its_own_program(filled, tmp_path):
    """Another batch size: the forward, backward and inference graphs and programs are new; the
    optimizer's (same parameters) come from the cache."""
    cache_dir, first = _copy_of(filled, tmp_path)
    other = _run(cache_dir, batch=6)
    assert other["compiled"] >= 2 and other["compiled"] + other["hits"] == first["compiled"]
    assert other["saved"] >= 3 and other["saved"] + other["loaded"] == first["saved"]


def test_the_cache_can_be_turned_off(filled, tmp_path):
    """Off, nothing is read or written; and the values are those of the cached path."""
    off = _run(tmp_path, JAXDEV_COMPILE_CACHE="off")
    assert off["hits"] == 0 and off["compiled"] >= 3 and off["loaded"] == off["saved"] == 0
    assert not os.path.exists(os.path.join(tmp_path, aot_cache.SUBDIR))
    assert not os.path.exists(os.path.join(tmp_path, program_cache.SUBDIR))
    on = filled[1]  # the same child over an empty cache, on
    assert on["compiled"] == off["compiled"] and on["values"] == off["values"]


@pytest.mark.per_op_mode(_PROGRAMS_SAVED)
def test_another_jaxdev_misses(filled, tmp_path):
    """Entries are keyed by jaxdev's source, torch, jax and jaxlib (the fingerprint)."""
    cache_dir, first = _copy_of(filled, tmp_path)
    other = _run(cache_dir, patch="cache.fingerprint = lambda: 'another-jaxdev'")
    assert other["hits"] == 0 and other["compiled"] == first["compiled"]
    assert other["loaded"] == 0 and other["saved"] == first["saved"]
    assert other["values"] == first["values"]
    assert len(os.listdir(os.path.join(cache_dir, aot_cache.SUBDIR))) == 2
    assert len(os.listdir(os.path.join(cache_dir, program_cache.SUBDIR))) == 2


def test_the_fingerprint_follows_the_source():
    fp = cache.fingerprint()
    assert len(fp) == 16 and fp == cache.fingerprint()


def test_a_program_pickles_as_its_graph():
    def f(x):
        return x.sin().cpu(), x.cos()

    gm = torch.fx.symbolic_trace(f)
    program = GraphProgram(gm, "inference")
    program.output_devices = ["cpu", "jax"]  # what FakeTensor's metadata gives; lost by pickling the graph
    program.specialisations[("layout",)] = object()  # compiled state is not pickled
    again = pickle.loads(pickle.dumps(program))
    assert again.name == "inference" and again.output_devices == ["cpu", "jax"]
    assert again.specialisations == {} and again._boxed_call
    x = torch.randn(3)
    torch.testing.assert_close(again.gm(x)[1], x.cos())


@pytest.mark.parametrize("value", ["off", "0", "", None])
def test_off_values(monkeypatch, value):
    if value is None:  # unset: off by default
        monkeypatch.delenv(cache.COMPILE_CACHE_ENV, raising=False)
    else:
        monkeypatch.setenv(cache.COMPILE_CACHE_ENV, value)
    assert not cache.compile_caches_on()


def test_on(monkeypatch):
    monkeypatch.setenv(cache.COMPILE_CACHE_ENV, "on")
    assert cache.compile_caches_on() == (cache.directory() is not None)


def test_a_program_keeps_its_planned_layouts_through_pickling():
    """The trace lays new results out as AOTAutograd planned them (node.meta["val"], planned.py);
    pickling a graph drops node metadata, so the program keeps each node's layout itself."""

    def f(x):
        return x.t().contiguous() + 1

    gm = torch.fx.symbolic_trace(f)
    nodes = list(gm.graph.nodes)
    nodes[1].meta["val"] = torch.empty_strided((3, 2), (1, 3), device="meta")  # planned column-major
    again = pickle.loads(pickle.dumps(GraphProgram(gm, "forward")))
    val = list(again.gm.graph.nodes)[1].meta["val"]
    assert val.shape == (3, 2) and val.stride() == (1, 3) and val.device.type == "meta"
    assert all("val" not in n.meta for i, n in enumerate(again.gm.graph.nodes) if i != 1)
