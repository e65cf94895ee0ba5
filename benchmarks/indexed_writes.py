"""Indexed writes of 8 rows into a 64 MiB and a 512 MiB float32 storage, in one process: jaxdev's
in-place ops (`x[idx] = rows`, index_copy_, index_add_, scatter_, ...) against the same write in a
jitted JAX function that donates its input.

A write that costs what it writes takes the same time at both sizes (the ratio column, 512 over 64
MiB, near 1); one that copies the storage takes 8x as long at the larger one. jaxdev gives the
storage's buffer to the write when nothing else can see it (jaxdev/ops/kit/indexed_writes.py); "in place"
says whether the storage kept its buffer through a call. masked_scatter_ reads a mask of the
storage's size, on CPU too: it cannot cost less than a pass over it.

    python benchmarks/indexed_writes.py [--repeat 40] [--sizes 64,512]
"""

from __future__ import annotations

import argparse
import time

import jax
import jax.numpy as jnp
import torch
from timing import ALLOCATOR, time_pair

import jaxdev
from jaxdev import tensor

COLUMNS = 1024
ROWS = 8
BUDGET_S = 4.0  # seconds of jaxdev calls a case may take at most (calls above --repeat's are not made)


def cases(rows: int):
    """name -> (jaxdev write(x), JAX update(a, *args) -> a, its args). The rows written are
    arguments of the JAX update, as they are of jaxdev's program."""
    idx = torch.arange(ROWS) * (rows // ROWS) + 3  # 8 rows spread over the storage
    src = torch.randn(ROWS, COLUMNS)
    grid = idx[:, None].expand(ROWS, COLUMNS).contiguous()  # scatter_'s index: those rows, every column
    mask = torch.zeros(rows, COLUMNS, dtype=torch.bool)
    mask[idx] = True
    flat = (idx[:, None] * COLUMNS + torch.arange(COLUMNS)).reshape(-1)
    j_idx, j_src, j_grid, j_mask, j_flat = (t.to("jax") for t in (idx, src, grid, mask, flat))
    a_idx, a_src, a_mask, a_flat = (jaxdev.to_jax(t) for t in (j_idx, j_src, j_mask, j_flat))
    cols = jnp.arange(COLUMNS)[None, :]

    def masked(a, m, s):  # the mask's i-th true element takes the source's i-th
        take = jnp.clip(jnp.cumsum(m.reshape(-1)) - 1, 0, s.size - 1)
        return jnp.where(m.reshape(-1), s.reshape(-1)[take], a.reshape(-1)).reshape(a.shape)

    return {
        "x[idx] = rows": (lambda x: x.__setitem__(j_idx, j_src), lambda a, i, s: a.at[i].set(s), (a_idx, a_src)),
        "index_put_ accumulate": (
            lambda x: x.index_put_((j_idx,), j_src, accumulate=True),
            lambda a, i, s: a.at[i].add(s),
            (a_idx, a_src),
        ),
        "index_copy_": (lambda x: x.index_copy_(0, j_idx, j_src), lambda a, i, s: a.at[i].set(s), (a_idx, a_src)),
        "index_add_": (
            lambda x: x.index_add_(0, j_idx, j_src, alpha=0.5),
            lambda a, i, s: a.at[i].add(s * 0.5),
            (a_idx, a_src),
        ),
        "index_fill_": (lambda x: x.index_fill_(0, j_idx, 2.0), lambda a, i: a.at[i].set(2.0), (a_idx,)),
        "scatter_": (
            lambda x: x.scatter_(0, j_grid, j_src),
            lambda a, i, s: a.at[i[:, None], cols].set(s),
            (a_idx, a_src),
        ),
        "scatter_add_": (
            lambda x: x.scatter_add_(0, j_grid, j_src),
            lambda a, i, s: a.at[i[:, None], cols].add(s),
            (a_idx, a_src),
        ),
        "scatter_reduce_ amax": (
            lambda x: x.scatter_reduce_(0, j_grid, j_src, "amax"),
            lambda a, i, s: a.at[i[:, None], cols].max(s),
            (a_idx, a_src),
        ),
        "masked_scatter_": (lambda x: x.masked_scatter_(j_mask, j_src), masked, (a_mask, a_src)),
        "put_": (
            lambda x: x.put_(j_flat, j_src.reshape(-1)),
            lambda a, i, s: a.reshape(-1).at[i].set(s.reshape(-1)).reshape(a.shape),
            (a_flat, a_src),
        ),
    }


def buffer(x: torch.Tensor) -> int:
    return tensor.box_of(x)._array.unsafe_buffer_pointer()


def time_case(rows: int, write, update, args, repeat: int) -> tuple[float, float, bool]:
    """Seconds per call of jaxdev's write and of the donated JAX update, and whether jaxdev's storage
    kept its buffer through a call."""
    x = torch.zeros(rows, COLUMNS, device="jax") + 0  # + 0: a buffer XLA owns
    fn = jax.jit(update, donate_argnums=(0,))
    state = {"a": jnp.zeros((rows, COLUMNS), jnp.float32) + 0}

    def dev():
        write(x)
        return x

    def ref():
        state["a"] = fn(state["a"], *args)
        return state["a"]

    for _ in range(2):  # compile both sides
        dev(), jax.block_until_ready(ref())
    before = buffer(x)
    t0 = time.perf_counter()
    jax.block_until_ready(tensor.read(dev()))
    once = time.perf_counter() - t0
    kept = buffer(x) == before
    # Calls a side that copies (or reads a whole mask) takes seconds at 512 MiB: fewer of them, at least 3.
    repeat = max(3, min(repeat, int(BUDGET_S / max(once, 1e-6))))
    t_dev, t_ref = time_pair(
        dev, ref, repeat, batches=min(repeat, 20)
    )  # many short batches: the least disturbed counts
    return t_dev, t_ref, kept


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=40)
    parser.add_argument("--sizes", default="64,512", help="storage sizes in MiB, smallest first")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    print(f"jax {jax.__version__} on {jax.devices()[0].platform}; float32, {ROWS} rows of {COLUMNS}; {ALLOCATOR}")
    results: dict = {}
    for mib in sizes:
        rows = (mib << 20) // (4 * COLUMNS)
        for name, (write, update, a) in cases(rows).items():
            results.setdefault(name, {})[mib] = time_case(rows, write, update, a, args.repeat)
    small, large = sizes[0], sizes[-1]
    head = f"{'write':<24}" + "".join(f"{f'jaxdev {m} MiB':>17}{f'JAX {m} MiB':>14}" for m in sizes)
    print(head + f"{'ratio':>8}{'vs JAX':>10}{'in place':>10}")
    for name, by_size in results.items():
        row = "".join(f"{by_size[m][0] * 1e6:>14.1f} us{by_size[m][1] * 1e6:>11.1f} us" for m in sizes)
        ratio = by_size[large][0] / by_size[small][0]
        versus = by_size[large][0] / by_size[large][1]
        kept = "yes" if all(by_size[m][2] for m in sizes) else "no"
        print(f"{name:<24}{row}{ratio:>7.2f}x{versus:>9.1f}x{kept:>10}")
    print(f"ratio: jaxdev at {large} MiB over {small} MiB; vs JAX: jaxdev over the donated JAX update at {large} MiB")


if __name__ == "__main__":
    main()
