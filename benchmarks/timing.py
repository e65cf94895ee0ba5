"""Timing shared by the benchmarks: jaxdev and its reference, measured alike in one process."""

from __future__ import annotations

import ctypes
import os
import statistics
import sys
import time

import jax
import torch

from jaxdev import tensor

_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3  # glibc's mallopt parameters (malloc.h)


def steady_allocator() -> str:
    """Keeps the memory this process frees for its next allocation, and says how the allocator runs.

    glibc's malloc hands a freed buffer above its mmap threshold back to the system, and the next one
    page-faults in afresh. The threshold moves with what the process freed before, so which side of a
    comparison pays the faults depended on the process's history: a 4 MiB transpose, synced per call,
    took 860 us with 387 faults on jaxdev's side and 590 us with 269 on JAX's in one process, and 240
    and 190 us with 7 faults each once steady. Same-code ratios moved 1.2x-4x between runs. With fixed,
    high thresholds neither side pays that lottery. JAXDEV_BENCH_MALLOC=default keeps glibc's own
    behaviour (what a user's process gets unless it sets MALLOC_MMAP_THRESHOLD_ and
    MALLOC_TRIM_THRESHOLD_ itself)."""
    if os.environ.get("JAXDEV_BENCH_MALLOC") == "default":
        return "malloc: glibc's defaults (JAXDEV_BENCH_MALLOC=default)"
    if not sys.platform.startswith("linux"):
        return "malloc: the platform's own"
    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:
        return "malloc: the platform's own (no glibc)"
    for threshold in (1 << 30, 32 << 20):  # older glibc caps the mmap threshold at 32 MiB
        if libc.mallopt(_M_MMAP_THRESHOLD, threshold) and libc.mallopt(_M_TRIM_THRESHOLD, 2 * threshold):
            return f"malloc: steady (mmap threshold {threshold >> 20} MiB; JAXDEV_BENCH_MALLOC=default for glibc's own)"
    return "malloc: glibc's defaults (mallopt refused)"


ALLOCATOR = steady_allocator()  # before any benchmark allocates its inputs


def time_pair(dev, ref, repeat: int, batches: int) -> tuple[float, float]:
    """Seconds per call of `dev` and of `ref`: batches of the two alternate (so load on the machine
    falls on both alike), every result is waited for, and each side's fastest batch counts (the
    least disturbed: what the code costs, not what the neighbours cost)."""
    per = max(repeat // batches, 1)
    best = [float("inf"), float("inf")]
    for _ in range(batches):
        for side, fn in enumerate((dev, ref)):
            t0 = time.perf_counter()
            for _ in range(per):
                r = fn()
            _wait(r)
            best[side] = min(best[side], (time.perf_counter() - t0) / per)
    return best[0], best[1]


def _wait(r) -> None:
    """Wait for a result: a jax array, a jax tensor, a CPU tensor (done already), or a tuple's first."""
    if isinstance(r, (tuple, list)):
        r = r[0]
    if isinstance(r, torch.Tensor):
        if r.device.type == "jax":  # tensor.read, not jaxdev.to_jax: an array handed out is never donated
            jax.block_until_ready(tensor.read(r))
    else:
        jax.block_until_ready(r)


def median_seconds(fn, wait, repeat: int, warmup: int = 3) -> float:
    """Median seconds of `wait(fn())` over `repeat` timed calls, after `warmup` untimed ones (a training
    step or one large op, where each call is long enough to time alone)."""
    for _ in range(warmup):
        wait(fn())
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        wait(fn())
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def print_steps(results: dict, base: str) -> None:
    """The step-time table of mlp_step.py and optimizer_step.py: each variant's milliseconds and the
    ratio of `base`'s time to it, then the CPU fallbacks jaxdev counted."""
    import jaxdev

    print(f"{'variant':<24} {'ms/step':>9} {base + ' / this':>30}")
    for name, seconds in results.items():
        print(f"{name:<24} {seconds * 1e3:>9.2f} {results[base] / seconds:>30.2f}")
    print(f"CPU fallbacks during the jaxdev steps: {sum(jaxdev.fallback_counts().values())}")
