"""Compile storms on boolean masks: `x[mask] = v`, `x[mask]` and `nonzero` over masks with a new
count of true values each time (a loss mask, a padding mask), where a per-count program would
compile on every step. jaxdev against torch CPU and against the same work written in eager JAX
(`jnp.argwhere`, `x.at[...]`), in one process with an empty persistent compilation cache.

    python benchmarks/mask_counts.py [--counts 30] [--size 4096]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

os.environ.setdefault("JAXDEV_CACHE_DIR", tempfile.mkdtemp(prefix="jaxdev-benchmark-cache-"))

import jax
import jax.numpy as jnp
import torch

import jaxdev  # noqa: F401


def masks(size: int, counts: int, offset: int):
    for k in range(offset + 1, offset + counts + 1):
        m = torch.zeros(size, dtype=torch.bool)
        m[torch.randperm(size)[:k]] = True
        yield m


def run_torch(device, kind, size, counts, offset):
    x = torch.zeros(size, device=device)
    for m in masks(size, counts, offset):
        m = m.to(device)
        if kind == "assign":
            x[m] = 1.0
        elif kind == "read":
            x = x[m].sum() + torch.zeros(size, device=device)
        else:
            torch.nonzero(m)
    x.cpu()


def run_jax(kind, size, counts, offset):
    x = jnp.zeros(size)
    for m in masks(size, counts, offset):
        m = jnp.asarray(m.numpy())
        if kind == "assign":
            x = x.at[jnp.nonzero(m)].set(1.0)
        elif kind == "read":
            x = x[m].sum() + jnp.zeros(size)
        else:
            jnp.argwhere(m)
    jax.block_until_ready(x)


def timed(fn, *args):
    start = time.perf_counter()
    fn(*args)
    return time.perf_counter() - start


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--counts", type=int, default=30)
    parser.add_argument("--size", type=int, default=4096)
    args = parser.parse_args()
    print(f"{args.counts} masks of {args.size} elements, each with a new count of true values (seconds, all counts)")
    print(f"{'op':10} {'jaxdev':>9} {'eager JAX':>10} {'torch CPU':>10} {'vs JAX':>8} {'vs CPU':>8}")
    for i, kind in enumerate(("assign", "read", "nonzero")):
        offset = i * args.counts  # new counts for each row: nothing compiled for one row helps another
        j = timed(run_torch, "jax", kind, args.size, args.counts, offset)
        r = timed(run_jax, kind, args.size, args.counts, offset)
        c = timed(run_torch, "cpu", kind, args.size, args.counts, offset)
        print(f"{kind:10} {j:9.3f} {r:10.3f} {c:10.4f} {j / r:7.2f}x {j / c:7.0f}x")


if __name__ == "__main__":
    main()
