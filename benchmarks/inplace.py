"""Writes in place, jaxdev against the same in JAX, in one process: into a sliver of a large storage
(a decoder's KV cache, one position per step), into most of one (`x[:, 1:] = r`), and whole in-place
ops (`x.add_(y)`, an optimizer's `lerp_`).

jaxdev gives a storage's buffer to the write when nothing else can see it (XLA donation:
tensor.sole_holder, ops/kit/inplace.py), so a write costs what it writes. JAX pays the same only when its
caller donates (`jax.jit(..., donate_argnums=0)`), and a new buffer per call when not: both references
are printed.

    python benchmarks/inplace.py [--repeat 200]
"""

from __future__ import annotations

import argparse

import jax
import jax.numpy as jnp
import torch
from timing import ALLOCATOR, time_pair

import jaxdev


def cases():
    """name -> (jaxdev step, JAX update(state, *args) -> state, args() -> the next call's args, initial
    state). The position is an argument of the JAX update, as it is of jaxdev's write: a Python value read
    inside the jitted function would be a constant of its program."""
    cache = torch.zeros(8, 16, 1024, 64).to("jax") + 0  # + 0: a buffer XLA owns (a host copy's may not be given)
    k = torch.randn(8, 16, 64).to("jax")
    x, y = torch.randn(1024, 1024).to("jax") + 0, torch.randn(1024, 1024).to("jax")
    r = torch.randn(1024, 1023).to("jax")
    jk, jr, jy = jaxdev.to_jax(k), jaxdev.to_jax(r), jaxdev.to_jax(y)
    pos = {"n": 0}

    def next_pos():
        pos["n"] = (pos["n"] + 1) % 1024
        return pos["n"]

    def kv():
        cache[:, :, next_pos()] = k
        return cache

    def set_tail():
        x[:, 1:] = r
        return x

    fresh = lambda shape: jnp.zeros(shape, jnp.float32) + 0
    return {
        "cache[:, :, pos] = k (32 MiB)": (
            kv,
            lambda c, k, p: jax.lax.dynamic_update_slice_in_dim(c, k[:, :, None], p, axis=2),
            lambda: (jk, next_pos()),
            lambda: fresh((8, 16, 1024, 64)),
        ),
        "x[:, 1:] = r (4 MiB)": (
            set_tail,
            lambda a, r: a.at[:, 1:].set(r),
            lambda: (jr,),
            lambda: fresh((1024, 1024)),
        ),
        "x.add_(y) (4 MiB)": (lambda: x.add_(y), lambda a, b: a + b, lambda: (jy,), lambda: fresh((1024, 1024))),
        "x.lerp_(y, 0.1) (4 MiB)": (
            lambda: x.lerp_(y, 0.1),
            lambda a, b: a + 0.1 * (b - a),
            lambda: (jy,),
            lambda: fresh((1024, 1024)),
        ),
    }


def time_write(case, donate: bool, repeat: int, batches: int) -> tuple[float, float]:
    """Seconds per call of a case's jaxdev write and of its JAX update, jitted with its input donated
    or not (time_pair: alternating batches in one process)."""
    dev, update, next_args, initial = case
    fn = jax.jit(update, donate_argnums=(0,) if donate else ())
    state = {"a": initial()}

    def ref():
        state["a"] = fn(state["a"], *next_args())
        return state["a"]

    for _ in range(3):  # compile both sides
        dev(), jax.block_until_ready(ref())
    return time_pair(dev, ref, repeat, batches=batches)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=200)
    args = parser.parse_args()
    print(f"jax {jax.__version__} on {jax.devices()[0].platform}; float32; {ALLOCATOR}")
    print(f"{'write':<30} {'JAX reference':<18} {'jaxdev us':>10} {'JAX us':>10} {'ratio':>7}")
    for name, case in cases().items():
        for kind, donate in (("jit, donated", True), ("jit, new buffer", False)):
            t_dev, t_ref = time_write(case, donate, args.repeat, batches=20)
            print(f"{name:<30} {kind:<18} {t_dev * 1e6:>10.1f} {t_ref * 1e6:>10.1f} {t_dev / t_ref:>7.2f}")


if __name__ == "__main__":
    main()
