"""The persistent compilation cache: a second process loads what the first compiled (from JAX's cache,
or jaxdev's executables: tests/test_exec_cache.py)."""

from __future__ import annotations

import os
import subprocess
import sys
import time

_CHILD = """
import jax, torch, jaxdev
events = []
jax.monitoring.register_event_listener(lambda e, **k: events.append(e) if "compilation_cache/cache_" in e else None)
x = torch.arange(12.0, device="jax").reshape(3, 4)
y = (x.t() @ x).softmax(-1).sum(0)
f = torch.compile(lambda a: (a * 2).cos().sum(), backend="jax")
print(y.cpu().tolist(), f(x).item())
print("DIR", jaxdev.programs.cache.directory())
hits = sum(e.endswith("cache_hits") for e in events) + jaxdev.programs.exec_cache.STATS.hits  # JAX's cache, or jaxdev's executables
print("HITS", hits, "MISSES", sum(e.endswith("cache_misses") for e in events))
"""


def _env(cache_dir: str) -> dict:
    """A bare environment (no JAXDEV_* setting of this process leaks in) that still finds jaxdev where
    only PYTHONPATH does (the TPU machine's set-up) and keeps JAX_PLATFORMS (the conftest sends
    children to JAX's CPU backend where this process holds a chip)."""
    env = {"JAXDEV_CACHE_DIR": cache_dir, "PATH": "/usr/bin:/bin"}
    env.update({k: os.environ[k] for k in ("PYTHONPATH", "JAX_PLATFORMS") if k in os.environ})
    return env


def _run(env_value, extra=""):
    env = _env(env_value)
    out = subprocess.run([sys.executable, "-c", extra + _CHILD], capture_output=True, text=True, timeout=300, env=env)
    assert out.returncode == 0, out.stderr[-2000:]
    lines = out.stdout.splitlines()
    directory = next(ln for ln in lines if ln.startswith("DIR")).split(" ", 1)[1]
    _, hits, _, misses = next(ln for ln in lines if ln.startswith("HITS")).split()
    return lines[0], directory, int(hits), int(misses)


def test_a_second_process_compiles_nothing(tmp_path):
    first_values, directory, hits, misses = _run(str(tmp_path))
    assert directory == str(tmp_path) and misses > 0
    second_values, _, hits, misses = _run(str(tmp_path))
    assert second_values == first_values
    assert hits > 0 and misses == 0


def test_cache_can_be_turned_off_and_a_users_own_setting_wins(tmp_path):
    _, directory, hits, misses = _run("off")
    assert directory == "None" and hits == misses == 0
    own = tmp_path / "mine"
    _, directory, _, _ = _run(
        str(tmp_path / "ours"), extra=f"import jax; jax.config.update('jax_compilation_cache_dir', {str(own)!r})\n"
    )
    assert directory == str(own)


def test_jax_runs_the_cache_unbounded_and_jaxdev_trims_it(tmp_path):
    """JAX's own bound re-reads the whole directory on every write (quadratic cold starts): it stays
    off, and jaxdev.programs.cache.trim keeps the directory under JAXDEV_CACHE_MAX_BYTES, oldest first."""
    code = "import jax, jaxdev; print(jax.config.jax_compilation_cache_max_size)"
    env = _env(str(tmp_path))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env)
    assert out.stdout.split() == ["-1"], out.stderr[-2000:]

    from jaxdev.programs import cache

    now = time.time()
    for age, name in enumerate(["new", "mid", "old", "oldest"]):
        entry = tmp_path / f"jit_{name}-cache"
        entry.write_bytes(b"x" * 1000)
        os.utime(entry, (now - 1000 * age, now - 1000 * age))
    assert cache.trim(str(tmp_path), 2500) == 2000
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("jit_")) == ["jit_mid-cache", "jit_new-cache"]
    assert not cache._due(str(tmp_path))  # trimmed just now: the next process leaves it alone
    assert cache.trim(str(tmp_path), 10**9) == 0


def test_trim_covers_the_compiled_paths_caches(tmp_path):
    """The compiled path's entries (aotautograd/, programs/, a folder per fingerprint) are trimmed with
    JAX's, oldest first, and a folder left empty goes too."""
    from jaxdev.programs import cache

    now = time.time()
    stale = tmp_path / "programs" / "old-fingerprint"
    live = tmp_path / "aotautograd" / "fingerprint" / "key"
    for folder in (stale, live):
        folder.mkdir(parents=True)
    files = [(tmp_path / "jit_a-cache", 0), (live / "entry", 1000), (stale / "program", 3000)]
    for file, age in files:
        file.write_bytes(b"x" * 1000)
        os.utime(file, (now - age, now - age))
    assert cache.trim(str(tmp_path), 2000) == 1000
    assert not stale.exists() and (live / "entry").exists() and (tmp_path / "jit_a-cache").exists()
    assert cache.trim(str(tmp_path), 1000) == 1000  # the AOTAutograd entry is older than JAX's
    assert not (tmp_path / "aotautograd" / "fingerprint").exists() and (tmp_path / "jit_a-cache").exists()


def test_trim_covers_the_eager_executables(tmp_path):
    """jaxdev's executable cache (executables/<fingerprint>/, jaxdev/programs/exec_cache.py) shares the bound."""
    from jaxdev.programs import cache

    now = time.time()
    folder = tmp_path / "executables" / "fingerprint"
    folder.mkdir(parents=True)
    for file, age in ((tmp_path / "jit_a-cache", 0), (folder / "old", 3000), (folder / "new", 10)):
        file.write_bytes(b"x" * 1000)
        os.utime(file, (now - age, now - age))
    assert cache.trim(str(tmp_path), 2000) == 1000
    assert not (folder / "old").exists() and (folder / "new").exists() and (tmp_path / "jit_a-cache").exists()
