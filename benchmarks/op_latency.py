"""Eager per-op latency: jaxdev (torch on device "jax") against the same op written in jnp.

Prints, per op, the median time of both and their ratio (jaxdev / jnp), then the geometric mean of
the ratios. Both sides run in this process on the same inputs, after a warm-up that compiles every
signature, so the ratio measures dispatch and wrapping overhead, not compilation.

    python benchmarks/op_latency.py [--size 4] [--repeat 2000]
"""

from __future__ import annotations

import argparse
import math

import jax
import jax.numpy as jnp
import torch
from timing import ALLOCATOR, time_pair

import jaxdev


def cases(n: int):
    a_cpu, b_cpu = torch.randn(n, n), torch.randn(n, n)
    a, b = a_cpu.to("jax"), b_cpu.to("jax")
    ja, jb = jaxdev.to_jax(a), jaxdev.to_jax(b)
    return {
        "add": (lambda: a + b, lambda: jnp.add(ja, jb)),
        "mul": (lambda: a * b, lambda: jnp.multiply(ja, jb)),
        "mm": (lambda: a @ b, lambda: jnp.matmul(ja, jb, precision=jax.lax.Precision.HIGHEST)),
        "sum": (lambda: a.sum(), lambda: jnp.sum(ja)),
        "relu": (lambda: torch.relu(a), lambda: jax.nn.relu(ja)),
        "exp": (lambda: a.exp(), lambda: jnp.exp(ja)),
        "transpose": (lambda: a.t().contiguous(), lambda: jnp.transpose(ja)),
        "softmax": (lambda: torch.softmax(a, dim=-1), lambda: jax.nn.softmax(ja, axis=-1)),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=4, help="square tensor side (default 4)")
    parser.add_argument("--repeat", type=int, default=2000)
    args = parser.parse_args()
    print(
        f"jax {jax.__version__} on {jax.devices()[0].platform}; torch {torch.__version__}; {args.size}x{args.size} float32"
    )
    print(ALLOCATOR)
    print(f"{'op':<10} {'jaxdev us':>10} {'jnp us':>10} {'ratio':>7}")
    ratios = []
    for name, (dev, ref) in cases(args.size).items():
        for _ in range(20):  # compile every signature on both sides
            dev(), ref()
        t_dev, t_ref = time_pair(dev, ref, args.repeat, batches=10)
        ratios.append(t_dev / t_ref)
        print(f"{name:<10} {t_dev * 1e6:>10.2f} {t_ref * 1e6:>10.2f} {t_dev / t_ref:>7.2f}")
    gmean = math.exp(sum(math.log(r) for r in ratios) / len(ratios))
    print(f"geometric mean ratio jaxdev/jnp: {gmean:.2f}")
    breakdown(args.size, args.repeat)


def breakdown(n: int, repeat: int) -> None:
    """Where the time of one jaxdev `a + b` goes, each part timed alone (ratios to jnp.add)."""
    from jaxdev import tensor

    lib = torch.library.Library("jaxdev_bench", "DEF")
    lib.define("identity(Tensor x) -> Tensor")
    lib.impl("identity", lambda x: x, "PrivateUse1")
    a = torch.randn(n, n).to("jax")
    b = torch.randn(n, n).to("jax")
    ja, jb = jaxdev.to_jax(a), jaxdev.to_jax(b)
    jitted_add = jax.jit(jnp.add)
    parts = {
        "jnp.add (reference)": lambda: jnp.add(ja, jb),
        "jax.jit(jnp.add) call": lambda: jitted_add(ja, jb),
        "dispatcher -> Python kernel": lambda: torch.ops.jaxdev_bench.identity(a),
        "new jax tensor (storage+metadata)": lambda: tensor.wrap(ja),
        "read of one argument": lambda: tensor.read(a),
        "jaxdev a + b": lambda: a + b,
    }
    ref = None
    print(f"\n{'part of a + b':<36} {'us':>8} {'/ jnp.add':>10}")
    for name, fn in parts.items():
        for _ in range(20):
            fn()
        t = time_pair(fn, parts["jnp.add (reference)"], repeat, batches=10)[0]
        ref = ref or t
        print(f"{name:<36} {t * 1e6:>8.2f} {t / ref:>10.2f}")


if __name__ == "__main__":
    main()
