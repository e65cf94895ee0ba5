"""Timing shared by the benchmarks: jaxdev and its reference, measured alike in one process."""

from __future__ import annotations

import statistics
import time

import jax
import torch

from jaxdev import tensor


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
            # tensor.read, not jaxdev.to_jax: an array handed out is never donated to a later write.
            jax.block_until_ready(tensor.read(r) if isinstance(r, torch.Tensor) else r)
            best[side] = min(best[side], (time.perf_counter() - t0) / per)
    return best[0], best[1]


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
