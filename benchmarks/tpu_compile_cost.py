"""Seconds in XLA's TPU compiler for the GPT LM's training step (issue 37 item 5), without the chip.

    .venv/bin/python benchmarks/tpu_compile_cost.py [--size full|quick] [--batch N] [--dtype bf16|f32]
        [--rounds 1] [--variants fused,fused-near,fused-fast,model-compiled,...,jax]

Each variant in its own process, compiled by XLA's TPU compiler on this CPU (jaxdev/audit/deviceless.py;
libtpu from scripts/get_libtpu.sh): jaxdev's fused eager step (forward, backward, AdamW: one program), the
same under JAXDEV_MATH=near (the platform's arithmetic) and fast (XLA's functions and division too), the step with
`torch.compile(backend="jax")` over forward+backward under fused eager, and the hand-written `jax.jit` step
(benchmarks/tpu_gpt_jax.py), each jaxdev one also under fast. Printed: the largest program's compile seconds, its operations after
inlining (StableHLO, every call expanded), and the ratio to `jax.jit`'s in the same round. Rounds
alternate the variants, so a busy machine slows all alike.

On 2026-12-07 the chip's own first-step compile (tpu_check `xla s`, bf16, batch 16) was fused 58 s,
compiled forward+backward under fused 117 s, `jax.jit` 25.5 s; this stand-in gave 97, 116 and 40 s:
the same order, the chip's host a little faster at the plain step.
"""

from __future__ import annotations

import json
import re
import sys
import time

import stand_in_variants

VARIANTS = {  # name: (environment, what runs)
    "fused": ({"JAXDEV_MATH": "auto"}, "fused"),
    "fused-near": ({"JAXDEV_MATH": "near"}, "fused"),
    "fused-fast": ({"JAXDEV_MATH": "fast"}, "fused"),
    "model-compiled": ({"JAXDEV_MATH": "auto"}, "model-compiled"),
    "model-compiled-near": ({"JAXDEV_MATH": "near"}, "model-compiled"),
    "model-compiled-fast": ({"JAXDEV_MATH": "fast"}, "model-compiled"),
    "jax": ({}, "jax"),
}


def inlined_ops(text: str) -> int:
    """StableHLO operations of a lowered module with every `call` expanded (XLA inlines them)."""
    funcs = {}
    for body in re.split(r"\n  func\.func ", text):
        funcs[body.split("(")[0].split()[-1].lstrip("@").strip('"')] = body
    memo: dict[str, int] = {}

    def count(name: str) -> int:
        if name not in memo:
            body = funcs[name]
            memo[name] = len(re.findall(r"stablehlo\.[a-z_]+", body)) + sum(
                count(c) for c in re.findall(r'call @"?([^"(\s]+)"?', body)
            )
        return memo[name]

    return count("main")


def _timed_compiles(deviceless, records: list) -> None:
    """Every TPU compile of the stand-in timed into `records` as (seconds, inputs, inlined ops)."""
    import jax

    usual = deviceless.compile_for_tpu

    def timed(fn, *avals, options=()):
        start = time.perf_counter()
        compiled = usual(fn, *avals, options=options)
        seconds = time.perf_counter() - start
        leaves = len(jax.tree.leaves(avals))
        ops = inlined_ops(jax.jit(fn).lower(*deviceless.on_tpu(avals)).as_text()) if leaves > 20 else 0
        records.append((seconds, leaves, ops))
        return compiled

    deviceless.compile_for_tpu = timed


def child_jaxdev(args) -> dict:
    from jaxdev.audit import deviceless

    deviceless.install()
    records: list = []
    _timed_compiles(deviceless, records)
    import torch
    import tpu_gpt

    import jaxdev

    cfg = tpu_gpt.Config(args.size)
    cfg.batch = args.batch or cfg.batch
    dtype = {"bf16": torch.bfloat16, "f32": torch.float32}[args.dtype]
    model = tpu_gpt.torch_model(cfg, dtype).to("jax")
    x, y, _ = (torch.from_numpy(a).to("jax") for a in tpu_gpt.numpy_batch(cfg))
    opt = tpu_gpt.make_adamw(model.parameters())

    def forward_backward():
        tpu_gpt.loss_fn(model(x), y).backward()

    if args.what == "model-compiled":
        forward_backward = torch.compile(forward_backward, backend="jax")
    with jaxdev.eager_mode("fused"):
        opt.zero_grad(set_to_none=True)
        forward_backward()
        opt.step()
        next(model.parameters()).detach().cpu()
    seconds, inputs, ops = max(records)
    return {"seconds": seconds, "inputs": inputs, "ops": ops, "programs": len(records)}


def child_jax(args) -> dict:
    import jax
    import jax.numpy as jnp
    import numpy as np
    import tpu_gpt
    import tpu_gpt_jax

    from jaxdev.audit import deviceless

    cfg = tpu_gpt.Config(args.size)
    cfg.batch = args.batch or cfg.batch
    _, update, state = tpu_gpt_jax.train_step(cfg, {"bf16": jnp.bfloat16, "f32": jnp.float32}[args.dtype])
    avals = jax.tree.map(
        lambda a: jax.ShapeDtypeStruct(a.shape, a.dtype), (state["p"], state["m"], state["v"], np.float32(1))
    )
    ops = inlined_ops(jax.jit(update).lower(*avals).as_text())
    start = time.perf_counter()
    deviceless.compile_for_tpu(update, *avals)
    return {"seconds": time.perf_counter() - start, "inputs": len(jax.tree.leaves(avals)), "ops": ops, "programs": 1}


def run_variant(name: str, args) -> dict:
    env, what = VARIANTS[name]
    command = [sys.executable, __file__, "--child", what, "--size", args.size, "--dtype", args.dtype]
    command += ["--batch", str(args.batch)] if args.batch else []
    return stand_in_variants.run_child(name, command, env)


def main() -> None:
    parser = stand_in_variants.arguments(__doc__, ",".join(VARIANTS))
    args = parser.parse_args()
    if args.child:
        args.what = args.child
        print("RESULT " + json.dumps(child_jax(args) if args.child == "jax" else child_jaxdev(args)), flush=True)
        return
    results = stand_in_variants.rounds(
        args.variants,
        VARIANTS,
        args.rounds,
        lambda n: run_variant(n, args),
        lambda n, got: f"{n:20s} {got['seconds']:7.1f} s  {got['ops']:6d} ops  {got['inputs']} inputs",
    )
    print(f"\nLM step {args.dtype}, size {args.size}, batch {args.batch or 'default'}: largest program's TPU compile")
    base = [r["seconds"] for r in results.get("jax", [])]
    for name in results:
        seconds = [r["seconds"] for r in results[name]]
        ratio = "  ".join(f"{s / b:.2f}x" for s, b in zip(seconds, base)) if base else "-"
        print(
            f"  {name:20s} {' '.join(f'{s:6.1f}' for s in seconds)} s  {results[name][-1]['ops']:6d} ops  /jax.jit {ratio}"
        )


if __name__ == "__main__":
    main()
