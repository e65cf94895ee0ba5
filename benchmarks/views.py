"""Reading and writing through views of a 1024x1024 float32 tensor: jaxdev against the same in JAX,
in one process.

A read materialises the view (`v.contiguous()`; in JAX the view's expression, jitted). A write
stores into the view (`v.copy_(src)`: the base changes; in JAX the same update on the base array,
jitted). Views whose strides are a permutation, a strided slice, a broadcast or a diagonal are read
and written as slices and transposes, not index gathers (tensor.py): the ratios show what is left.
A use passes the view straight to a kernel (`x.t() @ y`, `F.linear`): the view is read inside the
kernel's own program (kit.on_views), as JAX fuses `a.T` into the product. Last, the read
programs are timed alone against JAX's: what a read costs beyond its program is PyTorch's and
jaxdev's dispatch (making the view, `.contiguous()`, the result's tensor).

    python benchmarks/views.py [--size 1024] [--repeat 200]

Each side's time is its fastest of 20 alternating batches: on a shared machine a 4 MiB copy's time
moves 2-3x between batches with the memory system's state, and fewer batches left single ratios
at the mercy of that.
"""

from __future__ import annotations

import argparse
import functools
import math

import jax
import jax.numpy as jnp
import torch
from timing import ALLOCATOR, time_pair

import jaxdev
from jaxdev import tensor


def cases(n: int):
    x = torch.randn(n, n).to("jax")
    a = jaxdev.to_jax(x)
    row = torch.randn(1, n).to("jax")
    y = torch.randn(n, n).to("jax")
    half, diag = torch.randn(n, n // 2).to("jax"), torch.randn(n).to("jax")
    jhalf, jdiag = jaxdev.to_jax(half), jaxdev.to_jax(diag)
    jit = jax.jit
    idx = jnp.arange(n)
    # A read is given by the view it materialises: (make the view, JAX's expression, its argument).
    reads = {
        "t()": (lambda: x.t(), jit(lambda a: a.T), a),
        "[:, ::2]": (lambda: x[:, ::2], jit(lambda a: a[:, ::2]), a),
        "expand": (lambda: row.expand(n, n), jit(lambda r: jnp.broadcast_to(r, (n, n))), jaxdev.to_jax(row)),
        "diagonal()": (lambda: x.diagonal(), jit(lambda a: jnp.diagonal(a)), a),
        "permute": (
            lambda: x.view(n // 32, 32, n).permute(2, 0, 1),
            jit(lambda a: a.reshape(n // 32, 32, n).transpose(2, 0, 1)),
            a,
        ),
    }
    writes = {
        "t()": (lambda: x.t().copy_(y), jit(lambda a, s: s.T), (a, jaxdev.to_jax(y))),
        "[:, ::2]": (lambda: x[:, ::2].copy_(half), jit(lambda a, s: a.at[:, ::2].set(s)), (a, jhalf)),
        "diagonal()": (lambda: x.diagonal().copy_(diag), jit(lambda a, s: a.at[idx, idx].set(s)), (a, jdiag)),
        "permute": (
            lambda: x.view(n // 32, 32, n).permute(2, 0, 1).copy_(y.view(n, n // 32, 32)),
            jit(lambda a, s: s.transpose(1, 2, 0).reshape(n, n)),
            (a, jaxdev.to_jax(y).reshape(n, n // 32, 32)),
        ),
    }
    hp = jax.lax.Precision.HIGHEST  # float32 products at PyTorch's default ("highest") precision
    w, b = torch.randn(n // 2, n).to("jax"), torch.randn(n // 2).to("jax")
    jw, jb, jy = jaxdev.to_jax(w), jaxdev.to_jax(b), jaxdev.to_jax(y)
    uses = {
        "x.t() @ y": (lambda: x.t() @ y, jit(lambda a, c: jnp.matmul(a.T, c, precision=hp)), (a, jy)),
        "linear": (
            lambda: torch.nn.functional.linear(x, w, b),
            jit(lambda a, w, b: jnp.matmul(a, w.T, precision=hp) + b),
            (a, jw, jb),
        ),
        "sum [:, ::2]": (lambda: x[:, ::2].sum(0), jit(lambda a: a[:, ::2].sum(0)), a),
        "exp(t())": (lambda: x.t().exp(), jit(lambda a: jnp.exp(a.T)), a),
    }
    return reads, writes, uses


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--repeat", type=int, default=200)
    args = parser.parse_args()
    print(f"jax {jax.__version__} on {jax.devices()[0].platform}; {args.size}x{args.size} float32; {ALLOCATOR}")
    reads, writes, uses = cases(args.size)
    ratios = []
    print(f"{'':<8}{'view':<12} {'jaxdev us':>10} {'JAX us':>10} {'ratio':>7}")
    read_rows = {name: (lambda make=make: make().contiguous(), ref, arg) for name, (make, ref, arg) in reads.items()}
    for kind, table in (("read", read_rows), ("write", writes), ("use", uses)):
        for name, (dev, ref, ref_args) in table.items():
            ref_args = ref_args if isinstance(ref_args, tuple) else (ref_args,)
            for _ in range(3):  # compile both sides
                dev(), jax.block_until_ready(ref(*ref_args))
            t_dev, t_ref = time_pair(dev, lambda ref=ref, a=ref_args: ref(*a), args.repeat, batches=20)
            ratios.append(t_dev / t_ref)
            print(f"{kind:<8}{name:<12} {t_dev * 1e6:>10.1f} {t_ref * 1e6:>10.1f} {t_dev / t_ref:>7.2f}")
    gmean = math.exp(sum(math.log(r) for r in ratios) / len(ratios))
    print(f"geometric mean ratio jaxdev/JAX: {gmean:.2f}")
    print("\nThe read programs alone (the one `.contiguous()` runs, called directly) against JAX's:")
    for name, (make, ref, arg) in reads.items():
        view = make()
        program, offset = tensor.view_reader(view)
        stored = tensor.box_of(view).array
        for _ in range(3):
            jax.block_until_ready((program(stored, offset), ref(arg)))
        run = functools.partial(program, stored, offset)
        t_prog, t_ref = time_pair(run, functools.partial(ref, arg), args.repeat, batches=20)
        print(f"{'program':<8}{name:<12} {t_prog * 1e6:>10.1f} {t_ref * 1e6:>10.1f} {t_prog / t_ref:>7.2f}")


if __name__ == "__main__":
    main()
