"""A decoder's KV cache written one position per step: jaxdev against the same in JAX, in one process.

`cache[:, :, pos] = k` writes a sliver of a large storage. jaxdev gives the storage's buffer to the
write when nothing else can see it (tensor._sole_holder, XLA donation), so a step costs the sliver;
JAX pays the same only when the caller donates (`jax.jit(..., donate_argnums=0)`), and a copy of the
whole cache per step when not. Both references are printed.

    python benchmarks/kv_cache.py [--batch 8] [--heads 16] [--length 1024] [--dim 64] [--repeat 200]
"""

from __future__ import annotations

import argparse

import jax
import torch
from timing import time_pair

import jaxdev


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--heads", type=int, default=16)
    parser.add_argument("--length", type=int, default=1024)
    parser.add_argument("--dim", type=int, default=64)
    parser.add_argument("--repeat", type=int, default=200)
    args = parser.parse_args()
    shape = (args.batch, args.heads, args.length, args.dim)
    mib = 4 * args.batch * args.heads * args.length * args.dim / 2**20
    print(f"jax {jax.__version__} on {jax.devices()[0].platform}; float32 cache {list(shape)} ({mib:.0f} MiB)")

    cache = torch.zeros(shape).to("jax") + 0  # + 0: a buffer XLA owns (a host copy's may not be given away)
    k = torch.randn(args.batch, args.heads, args.dim).to("jax")
    jk = jaxdev.to_jax(k)
    step = {"pos": 0}

    def jaxdev_write():
        pos = step["pos"] = (step["pos"] + 1) % args.length
        cache[:, :, pos] = k
        return cache

    def update(c, k, pos):
        return jax.lax.dynamic_update_slice_in_dim(c, k[:, :, None], pos, axis=2)

    kept = {kind: jax.numpy.zeros(shape, jax.numpy.float32) + 0 for kind in ("copy", "donated")}
    copying, donating = jax.jit(update), jax.jit(update, donate_argnums=0)

    def jax_write(kind, fn):
        def run():
            pos = step["pos"] = (step["pos"] + 1) % args.length
            kept[kind] = fn(kept[kind], jk, pos)
            return kept[kind]

        return run

    print(f"{'reference':<22} {'jaxdev us':>10} {'JAX us':>10} {'ratio':>7}")
    for kind, fn in (("jax.jit, donated", donating), ("jax.jit, copying", copying)):
        ref = jax_write("donated" if fn is donating else "copy", fn)
        for _ in range(3):  # compile both sides
            jaxdev_write(), jax.block_until_ready(ref())
        t_dev, t_ref = time_pair(jaxdev_write, ref, args.repeat, batches=20)
        print(f"{kind:<22} {t_dev * 1e6:>10.1f} {t_ref * 1e6:>10.1f} {t_dev / t_ref:>7.2f}")


if __name__ == "__main__":
    main()
