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
    training_path(args.size, args.repeat)
    breakdown(args.size, args.repeat)
    fused_recording(args.size, args.repeat)


def _attention_cases(n: int) -> dict:
    """Attention over (2, 4, n, 16) heads, causal: F.scaled_dot_product_attention against its math in
    one jitted function (JAX's own dot_product_attention lays heads out otherwise), forward and the
    gradients of q, k and v."""
    import torch.nn.functional as F

    heads_cpu = torch.randn(2, 4, n, 16)
    heads = heads_cpu.to("jax")
    jh = jaxdev.to_jax(heads)

    def attend(q, k, v):
        scores = jnp.matmul(q, jnp.swapaxes(k, -1, -2), precision="highest") / 4.0
        scores = jnp.where(jnp.tril(jnp.ones((n, n), bool)), scores, -jnp.inf)
        return jnp.matmul(jax.nn.softmax(scores, -1), v, precision="highest")

    attention = jax.jit(attend)
    attention_grads = jax.jit(jax.grad(lambda q, k, v: attend(q, k, v).sum(), argnums=(0, 1, 2)))
    leaves = [heads.clone().requires_grad_() for _ in range(3)]
    cpu_leaves = [heads_cpu.clone().requires_grad_() for _ in range(3)]
    cases = {}
    cases["attention"] = (
        lambda: F.scaled_dot_product_attention(heads, heads, heads, is_causal=True),
        lambda: attention(jh, jh, jh),
        lambda: F.scaled_dot_product_attention(heads_cpu, heads_cpu, heads_cpu, is_causal=True),
    )
    cases["attention backward"] = (
        lambda: torch.autograd.grad(F.scaled_dot_product_attention(*leaves, is_causal=True).sum(), leaves),
        lambda: attention_grads(jh, jh, jh),
        lambda: torch.autograd.grad(F.scaled_dot_product_attention(*cpu_leaves, is_causal=True).sum(), cpu_leaves),
    )
    return cases


def training_path(n: int, repeat: int) -> None:
    """Ops a training step calls beside the eight above, against the same computation in one jitted
    JAX function (what a kernel that is one program costs at best) and torch on CPU."""
    import torch.nn.functional as F

    x_cpu = torch.randn(n, n)
    target_cpu, rows_cpu = torch.randint(0, n, (n,)), torch.tensor([0, 2, 3])
    x, target, rows = (t.to("jax") for t in (x_cpu, target_cpu, rows_cpu))
    jx, jt, jr = jaxdev.to_jax(x), jaxdev.to_jax(target), jaxdev.to_jax(rows)
    g = torch.randn(3, n).to("jax")
    jg = jaxdev.to_jax(g)
    key = jax.random.key(0)
    jit = jax.jit
    nll = jit(lambda a, t: -jnp.mean(jnp.take_along_axis(jax.nn.log_softmax(a, -1), t[:, None], -1)))
    drop = jit(lambda k, a: jnp.where(jax.random.bernoulli(k, 0.9, a.shape), a / 0.9, 0))
    normal = jit(lambda k: jax.random.normal(k, (n, n)))
    clip = jit(lambda a: jnp.clip(a, -1.0, 1.0))
    concat = jit(lambda a: jnp.concatenate([a, a]))
    scatter = jit(lambda gg, r: jnp.zeros((10, n)).at[r].add(gg))
    double = jit(lambda a: a * 2)
    cases = {
        "cross_entropy": (
            lambda: F.cross_entropy(x, target),
            lambda: nll(jx, jt),
            lambda: F.cross_entropy(x_cpu, target_cpu),
        ),
        "dropout": (lambda: F.dropout(x, 0.1), lambda: drop(key, jx), lambda: F.dropout(x_cpu, 0.1)),
        "randn": (
            lambda: torch.randn(n, n, device="jax"),
            lambda: normal(key),
            lambda: torch.randn(n, n),
        ),
        "arange": (lambda: torch.arange(n, device="jax"), jit(lambda: jnp.arange(n)), lambda: torch.arange(n)),
        "ones_like": (lambda: torch.ones_like(x), jit(lambda: jnp.ones((n, n))), lambda: torch.ones_like(x_cpu)),
        "clamp": (lambda: x.clamp(-1, 1), lambda: clip(jx), lambda: x_cpu.clamp(-1, 1)),
        "cat": (
            lambda: torch.cat([x, x]),
            lambda: concat(jx),
            lambda: torch.cat([x_cpu, x_cpu]),
        ),
        "embedding backward": (
            lambda: torch.ops.aten.embedding_dense_backward(g, rows, 10, -1, False),
            lambda: scatter(jg, jr),
            lambda: torch.ops.aten.embedding_dense_backward(g.cpu(), rows_cpu, 10, -1, False),
        ),
        "backward of x * 2": (
            lambda: torch.autograd.grad(x_leaf * 2, x_leaf, x),
            lambda: double(jx),
            lambda: torch.autograd.grad(cpu_leaf * 2, cpu_leaf, x_cpu),
        ),
    }
    cases.update(_attention_cases(n))
    x_leaf, cpu_leaf = x.clone().requires_grad_(), x_cpu.clone().requires_grad_()
    print(f"\n{'training-path op':<20} {'jaxdev us':>10} {'JAX jit us':>11} {'ratio':>7} {'torch CPU us':>13}")
    for name, (dev, ref, cpu) in cases.items():
        for _ in range(20):
            dev(), ref(), cpu()
        t_dev, t_ref = time_pair(dev, ref, repeat // 4, batches=10)
        t_cpu = time_pair(cpu, ref, repeat // 4, batches=10)[0]
        print(f"{name:<20} {t_dev * 1e6:>10.2f} {t_ref * 1e6:>11.2f} {t_dev / t_ref:>7.2f} {t_cpu * 1e6:>13.2f}")


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


def fused_recording(n: int, repeat: int, ops: int = 50) -> None:
    """What fused eager's host side costs per op: `ops` ops recorded in a row (a * b, relu, a transpose's
    view, an in-place add), then one flush, against the same ops in per-op mode. The recording is timed
    alone (thread CPU time, so the flush's program and the machine's other load stay out), the flush
    apart, per segment."""
    import statistics
    import time

    from jaxdev.fused import recorder

    a, b = torch.randn(n, n).to("jax"), torch.randn(n, n).to("jax")
    bodies = {
        "a * b": lambda x: x * b,
        "relu": torch.relu,
        "t() (a view)": lambda x: x.t(),
        "add_ (in place)": lambda x: x.add_(b),
    }
    print(f"\n{'fused eager, per op':<20} {'record us':>10} {'per-op us':>10} {'flush us':>9}")
    for name, body in bodies.items():
        times = {}
        for mode in ("fused", "op"):
            record, flush = [], []
            with jaxdev.eager_mode(mode):
                for i in range(max(repeat // ops, 20) + 10):
                    x = a.clone()
                    recorder.flush()
                    t0 = time.thread_time()
                    for _ in range(ops):
                        x = body(x)
                    t1 = time.thread_time()
                    recorder.flush()
                    if i >= 10:  # warm: every program built
                        record.append((t1 - t0) / ops)
                        flush.append(time.thread_time() - t1)
            times[mode] = statistics.median(record), statistics.median(flush)
        print(
            f"{name:<20} {times['fused'][0] * 1e6:>10.2f} {times['op'][0] * 1e6:>10.2f} {times['fused'][1] * 1e6:>9.1f}"
        )


if __name__ == "__main__":
    main()
