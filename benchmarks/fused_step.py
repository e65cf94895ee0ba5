"""Fused eager against per-op eager, the compiled path, hand-written `jax.jit`, torch CPU eager and
torch.compile's inductor on CPU: training steps, interleaved round by round in one process (medians).

The models are benchmarks/compile_step.py's: MLP 784-512-512-10 (batch 128, Adam), the 2-layer
Transformer LM (AdamW) and ResNet-18 (benchmarks/resnet.py: batch 8, 32x32, SGD with momentum,
BatchNorm in training mode). The fused variant is the unchanged eager step run under
`jaxdev.eager_mode("fused")`; after its first step it runs warm-up steps until it builds no new
program (Adam's step sizes change every step: the storm guard takes those ops out within a few
steps), and reports its programs per step, ops recorded and ops run eagerly per step.

    python benchmarks/fused_step.py [--rounds 5] [--steps 5] [--only mlp|transformer|resnet]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import warnings

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import compile_step
import jax
import resnet
import torch

import jaxdev
from jaxdev.fused import recorder
from jaxdev.graphs import program as compiled_program


def fused(step):
    def run():
        with jaxdev.eager_mode("fused"):
            return step()

    return run


def _settle(step, limit: int = 20) -> int:
    """Steps until one builds no program; returns how many ran."""
    for n in range(1, limit + 1):
        before = recorder.STATS.programs + compiled_program.STATS.programs
        step()
        if recorder.STATS.programs + compiled_program.STATS.programs == before:
            return n
    return limit


def _per_step(step, steps: int = 3) -> dict:
    """What one settled step does: XLA programs run (fused flushes and compiled graphs run on their
    own), new programs built, ops recorded into fused segments, ops run eagerly."""
    s, c = recorder.STATS, compiled_program.STATS
    p, r, e, f, g, h = s.programs, s.recorded, sum(s.eager.values()), s.flushes, c.calls, s.hits
    for _ in range(steps):
        step()
    return {
        "runs": (s.flushes - f + c.calls - g) / steps,
        "built": (s.programs - p) / steps,
        "hits": (s.hits - h) / steps,
        "recorded": (s.recorded - r) / steps,
        "eager": (sum(s.eager.values()) - e) / steps,
    }


FUSED = ("jaxdev fused eager", "jaxdev compiled, fused")


def run(title: str, build_torch, build_jax, rounds: int, steps: int) -> None:
    print(f"\n{title}")
    variants = {
        "jaxdev fused eager": fused(compile_step.torch_step(build_torch, "jax", compiled=False)),
        "jaxdev per-op eager": compile_step.torch_step(build_torch, "jax", compiled=False),
        "jaxdev compiled": compile_step.torch_step(build_torch, "jax", compiled=True),
        # the same compiled step under fused eager: its graphs join one program per step (issue 28)
        "jaxdev compiled, fused": fused(compile_step.torch_step(build_torch, "jax", compiled=True)),
        "torch CPU eager": compile_step.torch_step(build_torch, "cpu", compiled=False),
        # torch.compile's own CPU compiler: the bar issue 28 sets for the compiled path
        "torch CPU inductor": compile_step.torch_step(build_torch, "cpu", compiled=True, backend="inductor"),
    }
    # No torch CUDA row: a CUDA backward cannot run in a process that imported jaxdev (jaxdev/capabilities/accelerators.py).
    jax_run, _ = build_jax()
    variants["JAX jit (hand-written)"] = jax_run
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the storm guard's note on Adam's step sizes
        first = {name: compile_step.first_step_seconds(step) for name, step in variants.items()}
        settled = {name: _settle(step) for name, step in variants.items()}
        counts = {name: _per_step(variants[name]) for name in (*FUSED, "jaxdev compiled")}
        per_step = compile_step.interleaved(variants, rounds, steps)
    base = per_step["jaxdev compiled"]
    print(f"{'variant':<26} {'ms/step':>9} {'first step s':>13} {'this / compiled':>16}")
    for name, t in per_step.items():
        print(f"{name:<26} {t * 1e3:>9.2f} {first[name]:>13.2f} {t / base:>16.2f}")
    f = per_step["jaxdev fused eager"]
    print(
        f"fused / per-op eager: {f / per_step['jaxdev per-op eager']:.2f}; fused / compiled: {f / base:.2f}; "
        f"fused / torch CPU eager: {f / per_step['torch CPU eager']:.2f}; "
        f"fused / JAX jit: {f / per_step['JAX jit (hand-written)']:.2f}; "
        f"compiled, fused / compiled: {per_step['jaxdev compiled, fused'] / base:.2f}; "
        f"compiled / torch CPU inductor: {base / per_step['torch CPU inductor']:.2f}"
    )
    for name, c in counts.items():
        print(
            f"{name}, per step once settled ({settled[name]} steps to settle): {c['runs']:.0f} XLA programs run, "
            f"{c['built']:.0f} built, {c['hits']:.0f} fused cache hits, {c['recorded']:.0f} ops recorded, {c['eager']:.0f} run eagerly"
        )
    print(f"ops run eagerly by fused eager: {sorted({n for n, _ in recorder.STATS.eager})}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--only", choices=["mlp", "transformer", "resnet"])
    args = parser.parse_args()
    print(f"torch {torch.__version__}, jax {jax.__version__} on {jax.devices()[0].platform}")
    t0 = time.perf_counter()
    if args.only in (None, "mlp"):
        run(
            f"MLP {'-'.join(map(str, compile_step.MLP_SIZES))}, batch {compile_step.MLP_BATCH}, Adam",
            compile_step.torch_mlp,
            lambda: compile_step.jax_step(compile_step.jax_mlp),
            args.rounds,
            args.steps,
        )
    if args.only in (None, "transformer"):
        run(
            "Transformer LM (2 layers, d=256, seq 128, batch 8), AdamW",
            compile_step.torch_lm,
            lambda: compile_step.jax_step(compile_step.jax_lm),
            args.rounds,
            args.steps,
        )
    if args.only in (None, "resnet"):
        run(compile_step.RESNET_TITLE, resnet.torch_resnet, resnet.jax_step, args.rounds, args.steps)
    print(f"\n{time.perf_counter() - t0:.0f} s in all")


if __name__ == "__main__":
    main()
