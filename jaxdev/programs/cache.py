"""JAX's persistent compilation cache, on by default for everything jaxdev compiles.

Every eager kernel signature and every compiled graph is an XLA executable; without a persistent
cache each new process compiles them all again (seconds to minutes for a real model's first step).
With it, a second process loads them from disk.

    JAXDEV_CACHE_DIR=/path       where the cache lives (default ~/.cache/jaxdev/xla)
    JAXDEV_CACHE_DIR=off         no persistent cache (also "" or "0")
    JAXDEV_CACHE_MAX_BYTES=N     the size jaxdev trims the cache to (default 4 GiB)

A cache directory the user set for JAX before importing jaxdev wins. Executables are cached
whatever their compile time or size: jaxdev's eager kernels compile in tens of milliseconds each,
under JAX's default one-second floor, and they are most of what a first step compiles.

Why jaxdev bounds the cache itself instead of setting `jax_compilation_cache_max_size`: JAX's
bounded cache lists the whole directory and reads one access-time file per entry on every write
(measured: with 22,000 entries each new kernel took 80 ms longer to compile, 0.10 s against
0.024 s), so a cold start of N kernels costs O(N^2) file reads; and it fails outright ("Error
writing persistent compilation cache entry ... -atime") on entries an unbounded cache wrote. So JAX
runs the cache unbounded (entries are written whole and read without a lock; a read that meets an
entry still being written fails to decompress, and JAX warns and compiles instead), and jaxdev trims
the directory to JAXDEV_CACHE_MAX_BYTES, least recently used entries first, in a background thread
at most once an hour.

The compiled path (`torch.compile(backend="jax")`) keeps AOTAutograd's graphs and jaxdev's traced
programs in the same directory, under `aotautograd/` and `programs/` (jaxdev/compiler/aot_cache.py,
jaxdev/graphs/program_cache.py; opt-in: JAXDEV_COMPILE_CACHE, `compile_caches_on`):
the trim counts and deletes their files with JAX's, and removes the folders it empties.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import os
import sys
import threading
import time

import jax

ENV = "JAXDEV_CACHE_DIR"
MAX_BYTES_ENV = "JAXDEV_CACHE_MAX_BYTES"
DEFAULT_MAX_BYTES = 4 << 30
DEFAULT_DIR = os.path.join(os.path.expanduser("~"), ".cache", "jaxdev", "xla")
TRIM_EVERY_S = 3600
_STAMP = ".jaxdev-trimmed"
_OFF = ("", "0", "off", "none", "false")
# torch.compile(backend="jax")'s caches and the eager executables (jaxdev/programs/exec_cache.py), trimmed with JAX's
COMPILED_SUBDIRS = ("aotautograd", "programs", "executables")


def directory() -> str | None:
    """The cache directory in use (None: no persistent cache)."""
    return jax.config.jax_compilation_cache_dir or None


def max_bytes() -> int:
    return int(os.environ.get(MAX_BYTES_ENV, DEFAULT_MAX_BYTES))


# torch.compile(backend="jax")'s caches (AOTAutograd's graphs, jaxdev's traced programs): opt-in.
COMPILE_CACHE_ENV = "JAXDEV_COMPILE_CACHE"
_COMPILE_CACHE_OFF = ("", "0", "off", "none", "false", "no")


def compile_caches_on() -> bool:
    """Off unless JAXDEV_COMPILE_CACHE is set to a true value (on, 1): measured interleaved in fresh
    processes (benchmarks/first_step.py --with-cache-off), the caches cost more than they save today:
    the LM's first compiled step cold 20.6 s with them against 6.5 s without, warm 6.6 s against 5.2 s
    (a hit still pays AOTAutograd's key, which hashes torch's source, plus unpickling and export
    wrappers; a cold process exports and lowers each program twice). JAX's own XLA cache stays on."""
    value = os.environ.get(COMPILE_CACHE_ENV)
    return directory() is not None and value is not None and value.strip().lower() not in _COMPILE_CACHE_OFF


# jaxdev's package folder (this file is jaxdev/programs/cache.py)
_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@functools.cache
def fingerprint() -> str:
    """The name of the compiled caches' entries folder: changes with jaxdev's source (every .py and .cpp
    file under the package), torch, jax, jaxlib, Python."""
    import jaxlib
    import torch

    h = hashlib.sha256()
    for part in (torch.__version__, torch.version.git_version, jax.__version__, jaxlib.__version__, sys.version):
        h.update(str(part).encode())
    root = _PACKAGE
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for name in sorted(files):
            if name.endswith((".py", ".cpp")):
                path = os.path.join(folder, name)
                h.update(os.path.relpath(path, root).encode())
                with open(path, "rb") as f:
                    h.update(f.read())
    return h.hexdigest()[:16]


def configure() -> None:
    """JAX's persistent cache in JAXDEV_CACHE_DIR, unless the user set one or turned it off (jaxdev's
    executable cache, exec_cache.py, asks `directory()` at each program: it is on wherever this is)."""
    if jax.config.jax_compilation_cache_dir:
        return  # the user configured JAX's cache themselves
    value = os.environ.get(ENV)
    if value is not None and value.strip().lower() in _OFF:
        return
    path = value or DEFAULT_DIR
    jax.config.update("jax_compilation_cache_dir", path)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
    if jax.config.jax_compilation_cache_max_size < 0 and _due(path):
        threading.Thread(target=trim, args=(path, max_bytes()), name="jaxdev-cache-trim", daemon=True).start()


def _due(path: str) -> bool:
    try:
        return time.time() - os.stat(os.path.join(path, _STAMP)).st_mtime > TRIM_EVERY_S
    except OSError:
        return True


def trim(path: str, limit: int) -> int:
    """Delete the least recently used entries of the cache at `path` until it holds at most `limit`
    bytes; returns the bytes deleted. Recency is the later of a file's access and modification
    times (JAX's unbounded cache marks nothing on a hit; the file system's atime does, where it is
    kept). Safe beside other processes: a deleted entry is compiled again by whoever needs it."""
    entries, total = [], 0
    try:
        for folder in _folders(path):
            with os.scandir(folder) as listing:
                for item in listing:
                    if item.name.startswith(".") or not item.is_file(follow_symlinks=False):
                        continue
                    stat = item.stat(follow_symlinks=False)
                    entries.append((max(stat.st_atime, stat.st_mtime), stat.st_size, item.path))
                    total += stat.st_size
        os.makedirs(path, exist_ok=True)
        with open(os.path.join(path, _STAMP), "w"):
            pass
    except OSError:
        return 0
    deleted = 0
    for _, size, file in sorted(entries):
        if total - deleted <= limit:
            break
        try:
            os.remove(file)
            deleted += size
        except OSError:
            pass  # another process removed it first
    for folder in reversed(_folders(path)[1:]):
        with contextlib.suppress(OSError):
            os.rmdir(folder)  # emptied (a fingerprint nothing uses any more); a folder in use keeps files
    return deleted


def _folders(path: str) -> list[str]:
    """`path` and, below it, the compiled path's caches (jaxdev/compiler/aot_cache.py and
    program_cache.py: one folder per jaxdev fingerprint, AOTAutograd's a folder per key), parents first."""
    folders = [path]
    for sub in COMPILED_SUBDIRS:
        for folder, dirs, _ in os.walk(os.path.join(path, sub)):
            dirs.sort()
            folders.append(folder)
    return folders
