"""A bound on the XLA executables one process holds, so a long session never meets the kernel's
memory-map limit.

Every XLA:CPU executable maps about six memory regions (measured: 600 executables -> +3,700 maps),
and Linux allows a process `vm.max_map_count` of them (65,530 by default). Eager jaxdev compiles one
executable per op signature, and JAX keeps every one it compiled: a process that meets some 10,000
signatures (PyTorch's test suites, a long notebook, an auditor sweep) makes XLA's next mmap fail,
which XLA turns into a segmentation fault in compilation or cache (de)serialisation.

So jaxdev counts the executables JAX compiles or loads, and every `CHECK_EVERY` of them counts the
process's mappings; past half the limit it drops JAX's in-memory executables (`jax.clear_caches()`:
measured 4,170 -> 590 maps). What is still in use is compiled again or loaded from the persistent
cache (milliseconds each). The drop happens only at a safe point: when a result is stored outside
any trace (`tensor.new_storage`), never in the middle of compiling or tracing a program.
"""

from __future__ import annotations

import jax

CHECK_EVERY = 256
_EVENTS = ("/jax/compilation_cache/compile_requests_use_cache", "/jax/core/compile/backend_compile_duration")
_MAPS = "/proc/self/maps"
counted = 0  # executables made since the last check (read inline on the hot path, core/boxes.py)
drops = 0  # how often the executables were dropped (for tests and `jaxdev` diagnostics)


def map_limit() -> int | None:
    """The kernel's limit on this process's memory mappings (None: not Linux)."""
    try:
        with open("/proc/sys/vm/max_map_count") as f:
            return int(f.read())
    except (OSError, ValueError):
        return None


def mapped_regions() -> int | None:
    try:
        with open(_MAPS) as maps:
            return sum(1 for _ in maps)
    except OSError:
        return None


_LIMIT = map_limit()
budget = _LIMIT // 2 if _LIMIT else None


def _count(event: str, *args, **kwargs) -> None:
    global counted
    if event in _EVENTS:
        counted += 1


def due() -> bool:
    """Cheap: whether enough executables appeared since the last look to count the mappings."""
    return counted >= CHECK_EVERY


def check() -> bool:
    """Count the mappings; drop JAX's executables past the budget. Call only outside any trace."""
    global counted, drops
    counted = 0
    if budget is None:
        return False
    regions = mapped_regions()
    if regions is None or regions <= budget:
        return False
    jax.clear_caches()
    drops += 1
    return True


def install() -> None:
    jax.monitoring.register_event_listener(_count)
    jax.monitoring.register_event_duration_secs_listener(_count)
