"""jaxdev's executable cache (jaxdev/programs/exec_cache.py, keys: jaxdev/programs/program_keys.py): a program met again
loads the executable an earlier compile wrote, with the same bits; its key moves with everything the
program depends on; a damaged entry is compiled again, not a crash."""

from __future__ import annotations

import os
import random
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch

from jaxdev.programs import cache, exec_cache, program_keys


@pytest.fixture
def store(tmp_path, monkeypatch):
    """The executable cache in a folder of its own, on for the test (whatever the environment says)."""
    monkeypatch.setattr(cache, "directory", lambda: str(tmp_path))
    monkeypatch.delenv(exec_cache.ENV, raising=False)
    return tmp_path


def _nonce() -> float:
    """A constant no earlier process compiled: JAX's own persistent cache cannot serve the program (an
    executable it deserialized is not written again: see exec_cache._call_impl_python)."""
    return random.Random().uniform(1.0, 2.0)


def _program(nonce: float):
    """A fresh jitted function each call (a new trace, so jit's in-memory caches miss)."""
    return jax.jit(lambda x, y: jnp.sin(x * nonce) @ y + jnp.cumsum(x, axis=0))


def _on_cpu(values):
    """An argument of a program a child process must load: placed on JAX's CPU backend (the child runs
    there where this process holds a TPU: tests/conftest.py), committed there as the child commits its
    own (the key holds placement and commitment)."""
    return jax.device_put(np.asarray(values), jax.devices("cpu")[0])


def _entries(folder) -> list[str]:
    return [os.path.join(d, f) for d, _, files in os.walk(folder) for f in files if not f.startswith(".")]


def test_a_loaded_executable_gives_the_bits_a_compile_gives(store):
    nonce = _nonce()
    x, y = jnp.asarray(np.random.default_rng(0).standard_normal((16, 16), np.float32)), jnp.ones((16, 16))
    saves, hits, entries = exec_cache.STATS.saves, exec_cache.STATS.hits, len(_entries(store))
    compiled = np.asarray(_program(nonce)(x, y))
    assert exec_cache.STATS.saves == saves + 1 and len(_entries(store)) == entries + 1
    loaded = np.asarray(_program(nonce)(x, y))
    assert exec_cache.STATS.hits == hits + 1
    assert compiled.tobytes() == loaded.tobytes()
    again = _program(nonce)
    assert again(x, y).tobytes() == again(x, y).tobytes() == compiled.tobytes()  # jit's fast path after the load


def test_a_damaged_entry_is_compiled_again_and_rewritten(store):
    nonce = _nonce()
    x, y = jnp.ones((8, 8)), jnp.eye(8)
    before = set(_entries(store))
    want = np.asarray(_program(nonce)(x, y))
    (entry,) = set(_entries(store)) - before
    with open(entry, "wb") as f:
        f.write(b"not an executable")
    hits, saves = exec_cache.STATS.hits, exec_cache.STATS.saves
    assert np.asarray(_program(nonce)(x, y)).tobytes() == want.tobytes()
    assert exec_cache.STATS.hits == hits and exec_cache.STATS.saves == saves + 1
    with open(entry, "rb") as f:
        assert f.read() != b"not an executable"


def test_entries_live_under_the_fingerprint_and_a_new_fingerprint_misses(store, monkeypatch):
    backend = jax.devices()[0].client
    base = exec_cache.fingerprint(backend)
    monkeypatch.setenv("XLA_FLAGS", "--xla_cpu_enable_fast_math=false")
    assert exec_cache.fingerprint(backend) != base
    monkeypatch.delenv("XLA_FLAGS")
    assert exec_cache._fingerprint("cpu", "a", (), ()) != exec_cache._fingerprint("cpu", "b", (), ())
    nonce = _nonce()
    x, y = jnp.ones((4, 4)), jnp.eye(4)
    _program(nonce)(x, y)
    assert {os.path.dirname(e) for e in _entries(store)} == {os.path.join(str(store), exec_cache.SUBDIR, base)}
    monkeypatch.setattr(exec_cache, "fingerprint", lambda backend: "another-jax")
    hits, entries = exec_cache.STATS.hits, len(_entries(store))
    _program(nonce)(x, y)
    assert exec_cache.STATS.hits == hits  # a new jax, jaxlib or backend never reads the old folder
    assert len(_entries(store)) == entries + 1


def test_off_switch_and_programs_without_a_stable_key(store, monkeypatch):
    monkeypatch.setenv(exec_cache.ENV, "off")
    _program(_nonce())(jnp.ones((2, 2)), jnp.eye(2))
    assert _entries(store) == []
    monkeypatch.delenv(exec_cache.ENV)
    x = jnp.ones(2, jnp.float32)
    unkeyed, before = exec_cache.STATS.unkeyed, _entries(store)
    nonce = _nonce()
    shape = jax.ShapeDtypeStruct((2,), jnp.float32)
    out = jax.jit(lambda x: jax.pure_callback(lambda a: np.asarray(a) * nonce, shape, x))(x)
    assert np.allclose(out, nonce)  # a host callback's Python function has no stable key: compiled as before
    assert exec_cache.STATS.unkeyed == unkeyed + 1 and _entries(store) == before


def test_jaxdev_kernels_run_from_the_cache_like_compiled_ones(store):
    nonce = _nonce()
    a = torch.randn(5, 7, generator=torch.Generator().manual_seed(0))
    want = ((a * nonce).t()[::2] + 1).sum(0)
    x = a.to("jax")
    first = ((x * nonce).t()[::2] + 1).sum(0).cpu()
    hits = exec_cache.STATS.hits
    jax.clear_caches()  # as jaxdev's executable bound does (jaxdev/programs/executables.py)
    second = ((x * nonce).t()[::2] + 1).sum(0).cpu()
    assert exec_cache.STATS.hits > hits
    assert torch.equal(first, second) and torch.allclose(first, want)


_CHILD = """
import importlib.util, io, os, sys
import jax, jax.numpy as jnp, numpy as np
from jax._src import pjit
from jax.experimental import serialize_executable
jax.config.update("jax_enable_x64", True)
spec = importlib.util.spec_from_file_location("program_keys", sys.argv[1])
program_keys = importlib.util.module_from_spec(spec)
spec.loader.exec_module(program_keys)
keys = []
original = pjit._pjit_call_impl_python
def hook(*args, **params):
    keys.append(program_keys.program_key(args, params))
    return original(*args, **params)
pjit._pjit_call_impl_python = hook
nonce = float(sys.argv[3])
x, y = (jax.device_put(v, jax.devices()[0]) for v in (np.linspace(-3, 3, 256).reshape(16, 16), np.ones((16, 16))))
fresh = jax.jit(lambda x, y: jnp.sin(x * nonce) @ y + jnp.cumsum(x, axis=0))(x, y)
entry = os.path.join(sys.argv[2], keys[-1])
with open(entry, "rb") as f:
    unloaded = serialize_executable._JaxPjrtUnpickler(io.BytesIO(f.read()), jax.devices()[0].client).load()
loaded = unloaded.load().unsafe_call(x, y)[0]
print("SAME", np.asarray(fresh).tobytes() == np.asarray(loaded).tobytes())
"""


def test_a_new_process_finds_the_entry_by_the_same_key_and_loads_the_same_bits(store):
    """The key is the same in another process (no ids, no hash seeds), and the executable this process
    wrote runs there with the bits that process compiles itself. The child imports only jax (the key
    module by its path), to stay fast."""
    nonce = _nonce()
    x, y = _on_cpu(np.linspace(-3, 3, 256).reshape(16, 16)), _on_cpu(np.ones((16, 16)))
    before = set(_entries(store))
    _program(nonce)(x, y)
    (entry,) = set(_entries(store)) - before
    code = [sys.executable, "-c", _CHILD, program_keys.__file__, os.path.dirname(entry), repr(nonce)]
    env = dict(os.environ, JAX_ENABLE_X64="1")
    out = subprocess.run(code, capture_output=True, text=True, timeout=120, env=env)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["SAME", "True"]


def test_a_jax_whose_internals_moved_keeps_only_its_own_cache(monkeypatch):
    from jax._src import compilation_cache, pjit

    current = pjit._pjit_call_impl_python
    monkeypatch.setattr(exec_cache, "_ORIGINAL", None)
    monkeypatch.delattr(compilation_cache, "extract_executable_and_time")
    exec_cache.install()  # what jaxdev's import runs: nothing is replaced, nothing raises
    assert exec_cache._ORIGINAL is None and pjit._pjit_call_impl_python is current


_LINALG_CHILD = """
import sys
import jax, jax.numpy as jnp, numpy as np
import jaxdev
from jaxdev.programs import exec_cache
nonce = float(sys.argv[1])
a = jax.device_put(np.linspace(-1, 1, 64).reshape(8, 8), jax.devices()[0])  # committed, as the parent's
out = jax.jit(lambda a: jnp.linalg.cholesky(a @ a.T + nonce * jnp.eye(8)))(a)
print("HITS", exec_cache.STATS.hits, np.asarray(out).tobytes().hex())
"""


def test_a_new_process_runs_a_loaded_linalg_program_before_lowering_any(store):
    """LAPACK's function pointers are set by JAX's linalg lowering rules, which a loaded executable
    skips: a process whose first linalg program came from the cache crashed (SIGSEGV) until the first
    hit initialized them (exec_cache._libraries_ready)."""
    nonce = _nonce() + 4
    a = _on_cpu(np.linspace(-1, 1, 64).reshape(8, 8))
    want = jax.jit(lambda a: jnp.linalg.cholesky(a @ a.T + nonce * jnp.eye(8)))(a)
    env = dict(os.environ, JAXDEV_CACHE_DIR=str(store))
    env.pop(exec_cache.ENV, None)
    out = subprocess.run(
        [sys.executable, "-c", _LINALG_CHILD, repr(nonce)], capture_output=True, text=True, timeout=300, env=env
    )
    assert out.returncode == 0, f"exit {out.returncode}: {out.stderr[-2000:]}"
    hits, bits = out.stdout.split()[-2:]
    assert int(hits) >= 1 and bits == np.asarray(want).tobytes().hex()


_SHARED_MODULE_CHILD = """
import numpy as np, jax
import jaxdev
from jaxdev.ops.kit import cpu_arithmetic
a = np.full(1000, 1.5, np.float32)
jax.block_until_ready(jax.lax.add(a, a))
print(float(np.asarray(cpu_arithmetic.fma(a, a, a))[0]))
"""


def test_an_executable_jaxs_cache_gave_one_program_is_kept_whole_for_the_next(store):
    """JAX's in-memory compile cache gives the executable its persistent cache deserialized for one
    program to a later program of the same module under another key (other argument placements):
    that entry was written from the deserialized executable, which XLA:CPU serializes without its
    compiled functions, and the next process failed running it ('Function wrapped_add not found';
    this sequence of plain JAX ops, found by tests/ops/test_cpu_arithmetic.py run twice). Entries now
    take the bytes JAX read (exec_cache._DESERIALIZED)."""
    env = dict(os.environ, JAXDEV_CACHE_DIR=str(store), JAX_PLATFORMS="cpu")
    env.pop(exec_cache.ENV, None)
    for run in ("cold", "warm"):
        out = subprocess.run(
            [sys.executable, "-c", _SHARED_MODULE_CHILD], capture_output=True, text=True, timeout=300, env=env
        )
        assert out.returncode == 0, f"{run}: {out.stderr[-1500:]}"
        assert out.stdout.split()[-1] == "3.75", run
