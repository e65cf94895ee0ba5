"""JAX's persistent compilation cache, on by default for everything jaxdev compiles.

Every eager kernel signature and every compiled graph is an XLA executable; without a persistent
cache each new process compiles them all again (seconds to minutes for a real model's first step).
With it, a second process loads them from disk.

    JAXDEV_CACHE_DIR=/path     where the cache lives (default ~/.cache/jaxdev/xla)
    JAXDEV_CACHE_DIR=off       no persistent cache (also "" or "0")

A cache directory the user set for JAX before importing jaxdev wins. Executables are cached
whatever their compile time or size: jaxdev's eager kernels compile in tens of milliseconds each,
under JAX's default one-second floor, and they are most of what a first step compiles.
"""

from __future__ import annotations

import os

import jax

ENV = "JAXDEV_CACHE_DIR"
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
