"""Writes in place, jaxdev against the same in JAX, in one process: into a sliver of a large storage
(a decoder's KV cache, one position per step), into most of one (`x[:, 1:] = r`), and whole in-place
ops (`x.add_(y)`, an optimizer's `lerp_`).

jaxdev gives a storage's buffer to the write when nothing else can see it (XLA donation:
tensor._sole_holder, ops/inplace.py), so a write costs what it writes. JAX pays the same only when its
caller donates (`jax.jit(..., donate_argnums=0)`), and a new buffer per call when not: both references
are printed.

    python benchmarks/inplace.py [--repeat 200]
"""

from __future__ import annotations

import argparse

import jax
import jax.numpy as jnp
import torch
from timing import time_pair

import jaxdev


def cases():
    """name -> (jaxdev step, JAX update(state, *args) -> state, args, initial state)."""
    cache = torch.zeros(8, 16, 1024, 64).to("jax") + 0  # + 0: a buffer XLA owns (a host copy's may not be given)
    k = torch.randn(8, 16, 64).to("jax")
    x, y = torch.randn(1024, 1024).to("jax") + 0, torch.randn(1024, 1024).to("jax")
    r = torch.randn(1024, 1023).to("jax")
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
            lambda c, k: jax.lax.dynamic_update_slice_in_dim(c, k[:, :, None], next_pos(), axis=2),
            (jaxdev.to_jax(k),),
            lambda: fresh((8, 16, 1024, 64)),
        ),
        "x[:, 1:] = r (4 MiB)": (
            set_tail,
            lambda a, r: a.at[:, 1:].set(r),
            (jaxdev.to_jax(r),),
            lambda: fresh((1024, 1024)),
        ),
        "x.add_(y) (4 MiB)": (lambda: x.add_(y), lambda a, b: a + b, (jaxdev.to_jax(y),), lambda: fresh((1024, 1024))),
        "x.lerp_(y, 0.1) (4 MiB)": (
            lambda: x.lerp_(y, 0.1),
            lambda a, b: a + 0.1 * (b - a),
            (jaxdev.to_jax(y),),
            lambda: fresh((1024, 1024)),
        ),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=200)
    args = parser.parse_args()
    print(f"jax {jax.__version__} on {jax.devices()[0].platform}; float32")
    print(f"{'write':<30} {'JAX reference':<18} {'jaxdev us':>10} {'JAX us':>10} {'ratio':>7}")
    for name, (dev, update, ref_args, initial) in cases().items():
        for kind, donate in (("jit, donated", (0,)), ("jit, new buffer", ())):
            fn = jax.jit(update, donate_argnums=donate)
            state = {"a": initial()}

            def ref(fn=fn, state=state, ref_args=ref_args):
                state["a"] = fn(state["a"], *ref_args)
                return state["a"]

            for _ in range(3):  # compile both sides
                dev(), jax.block_until_ready(ref())
            t_dev, t_ref = time_pair(dev, ref, args.repeat, batches=20)
            print(f"{name:<30} {kind:<18} {t_dev * 1e6:>10.1f} {t_ref * 1e6:>10.1f} {t_dev / t_ref:>7.2f}")


if __name__ == "__main__":
    main()
