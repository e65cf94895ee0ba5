"""Per-op against fused eager's cold first training step on XLA's TPU compiler, without the chip
(issue 37 item 5).

    .venv/bin/python benchmarks/tpu_cold_step.py [--size full|quick] [--batch N] [--dtype bf16|f32]
        [--rounds 1] [--variants op,fused] [--top 12]

Each variant runs the GPT LM's first training step (benchmarks/tpu_gpt.py: forward, cross entropy,
backward, AdamW) in its own fresh process over an empty cache folder, as a stand-in for a TPU v5e
(jaxdev/audit/deviceless.py: every program also compiled by XLA's TPU compiler, values from the CPU).
The model and batch are made before the step; what the step compiles is counted: distinct TPU programs,
seconds in XLA's TPU compiler, seconds lowering them to StableHLO for the TPU, the CPU's own tracing,
lowering and compiles (which the chip does not pay: its programs compile once, for itself), and the step's
wall time. The top programs by TPU compile seconds are listed with the name JAX gave them and their
operations. Rounds alternate the variants, so a busy machine slows all alike.

Variants: op (per-op eager), fused (fused eager), and op-* / fused-* with an environment of their own
(VARIANTS below). Compile seconds are given as wall and as the process's CPU time while compiling (steadier
on a shared machine; above the wall time where XLA's TPU compiler works on several threads).

2026-12-07, this 2-core CPU shared with other work, full LM, bf16, near (the TPU's default), per-op
eager before (4137332) and after int32 view offsets (94f7e6c), two interleaved rounds: per-op compiled
68-69 programs in the step (every jit miss a distinct program: no computation compiled twice; 54-55 of
them new to the step), their TPU compile 48.9 / 50.9 CPU-seconds before and 40.3 / 39.1 after (the
attention forward and backward over the fused qkv's views 18.6 / 19.2 -> 9.8 / 10.4), against fused
eager's one program at 56.5 (per-op / fused 0.87-0.90x before, 0.69-0.71x after). Tracing and lowering
in jaxdev's process: 1-2.5 s a step. Under JAXDEV_MATH=auto (CPU's bits; the setting under which the
chip measured per-op's cold first step at 66 s and fused's at 32 s) per-op's compile took 77 CPU-seconds
against fused's 161: the stand-in does not reproduce the chip's 2x. Later, at load ~2-3, one round:
per-op's step 65.9 s wall before (TPU compile 48.5 s wall, 50.7 CPU), 42.1 after (28.9 wall, 41.0 CPU),
fused 42.8 (32.2 wall, 55.3 CPU: its one program compiled on both cores); per-op / fused step 1.54x ->
0.98x; the quick LM's per-op compile 12.4 / 11.3 -> 4.0 / 3.8 CPU-seconds (two rounds). Where the chip's
host has more cores, fused's one large program may gain more from them than per-op's programs, which
come one at a time: unmeasured.
"""

from __future__ import annotations

import collections
import json
import os
import sys
import tempfile
import threading
import time

import stand_in_variants

VARIANTS = {  # name: (environment, eager mode)
    "op": ({}, "op"),
    "fused": ({}, "fused"),
    "op-auto": ({"JAXDEV_MATH": "auto"}, "op"),  # CPU's bits, the TPU's default before 2026-12-07
    "fused-auto": ({"JAXDEV_MATH": "auto"}, "fused"),
    "op-effort-low": ({"JAXDEV_COMPILE_EFFORT": "low"}, "op"),
}
_TPU = threading.local()  # inside the stand-in's TPU compile: its JAX events are the TPU's


def _summary(jaxpr) -> str:
    """A program's operations, most frequent first (calls' bodies counted in)."""
    counts: collections.Counter = collections.Counter()

    def walk(j):
        for e in j.eqns:
            counts[e.params["name"] if e.primitive.name == "pjit" else e.primitive.name] += 1
            for v in e.params.values():
                inner = getattr(v, "jaxpr", None)
                if inner is not None and hasattr(inner, "eqns"):
                    walk(inner)
                elif hasattr(v, "eqns"):
                    walk(v)

    walk(jaxpr.jaxpr)
    return " ".join(f"{n}x{c}" if c > 1 else n for n, c in counts.most_common(6))


def _shapes(args) -> str:
    shapes = collections.Counter(f"{a.dtype}{list(a.shape)}" for a in args)
    return " ".join(f"{s}x{c}" if c > 1 else s for s, c in shapes.most_common(3)) + f" ({len(args)} args)"


def _distinct(seen: set, jaxpr, args) -> int:
    key = (str(jaxpr), tuple(str(getattr(a, "aval", type(a))) for a in args))
    new = key not in seen
    seen.add(key)
    return int(new)


def _instrument(deviceless, records: list, events: collections.Counter) -> None:
    """Every TPU compile of the stand-in timed (lowering, compile) into `records`; JAX's compile events
    summed into `events`, the TPU's under 'tpu ' and the CPU's under 'cpu '."""
    import jax
    from jax import monitoring
    from jax._src import config, pjit

    def listener(event, seconds, **_):
        name = ("tpu " if getattr(_TPU, "on", False) else "cpu ") + event.rsplit("/", 1)[-1]
        events[name] += seconds
        events["n " + name] += 1

    monitoring.register_event_duration_secs_listener(listener)

    def compile_for_tpu(fn, *avals, options=()):
        _TPU.on = True
        try:
            with config.enable_compilation_cache(False):
                t0 = time.perf_counter()
                lowered = jax.jit(fn).lower(*deviceless.on_tpu(avals))
                t1, c1 = time.perf_counter(), time.process_time()
                compiled = lowered.compile(dict(options)) if options else lowered.compile()
                seconds, cpu = time.perf_counter() - t1, time.process_time() - c1
                records.append({"lower": t1 - t0, "compile": seconds, "cpu": cpu, **_TPU.program})
                return compiled
        finally:
            _TPU.on = False

    usual_check = deviceless._check

    def check(jaxpr, args, options=()):
        _TPU.program = {"ops": _summary(jaxpr), "name": getattr(_TPU, "name", "?"), "args": _shapes(args)}
        if os.environ.get("TPU_COLD_DUMP"):
            with open(os.path.join(os.environ["TPU_COLD_DUMP"], f"{len(records):03d}.txt"), "w") as f:
                f.write(str(jaxpr))
        # a tree before b443455 compiled without options (its _check takes none)
        return usual_check(jaxpr, args, options) if options else usual_check(jaxpr, args)

    deviceless.compile_for_tpu, deviceless._check = compile_for_tpu, check
    checked = pjit._pjit_call_impl_python

    def named(*args, **params):
        _TPU.name = params.get("name", "?")
        events["n calls"] += 1  # jit's misses: each one a compile on the chip, unless a cache has it
        events["n distinct"] += _distinct(seen, params["jaxpr"], args)
        return checked(*args, **params)

    seen: set = set()

    pjit._pjit_call_impl_python = named


def child(args) -> dict:
    from jaxdev.audit import deviceless

    deviceless.install()
    records: list = []
    events: collections.Counter = collections.Counter()
    _instrument(deviceless, records, events)
    import torch
    import tpu_gpt

    import jaxdev

    cfg = tpu_gpt.Config(args.size)
    cfg.batch = args.batch or cfg.batch
    dtype = {"bf16": torch.bfloat16, "f32": torch.float32}[args.dtype]
    with jaxdev.eager_mode("op"):
        model = tpu_gpt.torch_model(cfg, dtype).to("jax")
        x, y, _ = (torch.from_numpy(a).to("jax") for a in tpu_gpt.numpy_batch(cfg))
        opt = tpu_gpt.make_adamw(model.parameters())
        next(model.parameters()).detach().cpu()
    records.clear()
    events.clear()
    start = time.perf_counter()
    with jaxdev.eager_mode(args.mode):
        opt.zero_grad(set_to_none=True)
        loss = tpu_gpt.loss_fn(model(x), y)
        loss.backward()
        opt.step()
        loss = float(loss.detach().cpu().float())
        next(model.parameters()).detach().cpu()
    wall = time.perf_counter() - start
    top = sorted(records, key=lambda r: -r["compile"])[: args.top]
    return {
        "wall": wall,
        "loss": loss,
        "programs": len(records),
        "tpu_compile": sum(r["compile"] for r in records),
        "tpu_cpu": sum(r["cpu"] for r in records),
        "tpu_lower": sum(r["lower"] for r in records),
        "events": dict(events),
        "top": top,
    }


def run_variant(name: str, args) -> dict:
    env, mode = VARIANTS[name]
    command = [sys.executable, __file__, "--child", mode, "--size", args.size, "--dtype", args.dtype]
    command += ["--batch", str(args.batch), "--top", str(args.top)]
    with tempfile.TemporaryDirectory(prefix="jaxdev-cold-") as folder:  # an empty cache: a cold process
        return stand_in_variants.run_child(name, command, dict(env, JAXDEV_CACHE_DIR=folder))


def describe(name: str, got: dict) -> str:
    ev = got["events"]
    cpu = ev.get("cpu backend_compile_duration", 0.0)
    cpu_lower = ev.get("cpu jaxpr_to_mlir_module_duration", 0.0)
    trace = ev.get("cpu jaxpr_trace_duration", 0.0)
    # the chip pays the step less the CPU's compiles and the stand-in's second lowering
    chip = got["wall"] - cpu - got["tpu_lower"]
    calls = f"jit misses {ev.get('n calls', 0):.0f} ({ev.get('n distinct', 0):.0f} distinct), CPU compiles "
    calls += f"{ev.get('n cpu backend_compile_duration', 0):.0f}"
    return (
        f"{name:20s} {calls}\n{'':28s}wall {got['wall']:6.1f} s  {got['programs']:4d} TPU programs  TPU compile "
        f"{got['tpu_compile']:6.1f} s (CPU {got['tpu_cpu']:6.1f} s)  TPU lowering {got['tpu_lower']:5.1f} s  CPU: trace {trace:5.1f} "
        f"lower {cpu_lower:5.1f} compile {cpu:5.1f} s  ~chip {chip:6.1f} s  loss {got['loss']:.4f}"
    )


def main() -> None:
    parser = stand_in_variants.arguments(__doc__, "op,fused")
    parser.add_argument("--top", type=int, default=12)
    args = parser.parse_args()
    if args.child:
        args.mode = args.child
        print("RESULT " + json.dumps(child(args)), flush=True)
        return
    results = stand_in_variants.rounds(args.variants, VARIANTS, args.rounds, lambda n: run_variant(n, args), describe)
    for name in results:
        print(f"\n{name}: top programs by TPU compile seconds (last round)")
        for p in results[name][-1]["top"]:
            print(
                f"  {p['compile']:6.2f} s (CPU {p['cpu']:5.2f})  lower {p['lower']:5.2f}  {p['name'][:40]:40s} {p['ops'][:90]}"
            )
            print(f"{'':60s} {p['args'][:90]}")
    if "op" in results and "fused" in results:
        for key in ("tpu_compile", "tpu_cpu", "wall", "programs"):
            ratio = [o[key] / f[key] for o, f in zip(results["op"], results["fused"])]
            print(f"per-op / fused {key}: " + "  ".join(f"{x:.2f}x" for x in ratio))


if __name__ == "__main__":
    main()
