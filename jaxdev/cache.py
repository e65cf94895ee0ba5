"""JAX's persistent compilation cache, on by default for everything jaxdev compiles.

Every eager kernel signature and every compiled graph is an XLA executable; without a persistent
cache each new process compiles them all again (seconds to minutes for a real model's first step).
With it, a second process loads them from disk.

    JAXDEV_CACHE_DIR=/path     where the cache lives (default ~/.cache/jaxdev/xla)
    JAXDEV_CACHE_DIR=off       no persistent cache (also "" or "0")

A cache directory the user set for JAX before importing jaxdev wins. Executables are cached
whatever their compile time or size: jaxdev's eager kernels compile in tens of milliseconds each,
under JAX's default one-second floor, and they are most of what a first step compiles.

The cache is bounded (JAXDEV_CACHE_MAX_BYTES, default 4 GiB, least recently used entries go first),
and that matters beyond disk space: only a bounded JAX cache takes a file lock around its reads and
writes; unbounded, one process can read an entry another is still writing.
"""

from __future__ import annotations

import os

import jax

ENV = "JAXDEV_CACHE_DIR"
MAX_BYTES_ENV = "JAXDEV_CACHE_MAX_BYTES"
DEFAULT_MAX_BYTES = 4 << 30
DEFAULT_DIR = os.path.join(os.path.expanduser("~"), ".cache", "jaxdev", "xla")
_OFF = ("", "0", "off", "none", "false")


def directory() -> str | None:
    """The cache directory in use (None: no persistent cache)."""
    return jax.config.jax_compilation_cache_dir or None


def configure() -> None:
    if jax.config.jax_compilation_cache_dir:
        return  # the user configured JAX's cache themselves
    value = os.environ.get(ENV)
    if value is not None and value.strip().lower() in _OFF:
        return
    jax.config.update("jax_compilation_cache_dir", value or DEFAULT_DIR)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
    if jax.config.jax_compilation_cache_max_size < 0:  # unbounded: no lock between processes
        jax.config.update("jax_compilation_cache_max_size", int(os.environ.get(MAX_BYTES_ENV, DEFAULT_MAX_BYTES)))
