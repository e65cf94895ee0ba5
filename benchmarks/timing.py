"""Timing shared by the benchmarks: jaxdev and its reference, measured alike in one process."""

from __future__ import annotations

import time

import jax
import torch

import jaxdev


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
            jax.block_until_ready(jaxdev.to_jax(r) if isinstance(r, torch.Tensor) else r)
            best[side] = min(best[side], (time.perf_counter() - t0) / per)
    return best[0], best[1]
