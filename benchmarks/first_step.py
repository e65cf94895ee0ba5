"""The first compiled training step of a new process, and where its time goes: the Transformer LM of
`benchmarks/compile_step.py` through `torch.compile(backend="jax")` against the same step
hand-written in JAX and jitted whole, each in a fresh Python process.

Cold: empty cache directories (JAXDEV_CACHE_DIR, which holds JAX's persistent compilation cache and
jaxdev's compiled-path caches, and TORCHINDUCTOR_CACHE_DIR). Warm: a second process over the caches
the cold one left. Rounds interleave the two variants (compiled cold, jit cold, compiled warm, jit
warm) and every figure is a median over rounds, since this machine's two cores are shared.

The compiled first step is what a user's script pays from the first call of the compiled functions
to the loss on the host: dynamo's bytecode tracing and guards, AOTAutograd (functionalisation, the
joint graph and its partition), jaxdev's programs (the FX graph traced into JAX through jaxdev's
kernels, lowering, XLA compile or cache load, the first run). The jax.jit first step is lowering,
compiling and running the hand-written step once (building its parameters is not counted, as
building the model is not counted for the compiled step).

    python benchmarks/first_step.py [--rounds 5]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_JAX_EVENTS = {
    "/jax/core/compile/jaxpr_trace_duration": "jax trace",
    "/jax/core/compile/jaxpr_to_mlir_module_duration": "jax lower",
    "/jax/core/compile/backend_compile_duration": "XLA compile",
    "/jax/compilation_cache/cache_retrieval_time_sec": "XLA cache load",
}


def _listen() -> dict[str, float]:
    from jax import monitoring

    durations: dict[str, float] = {}

    def record(event, seconds, **kwargs):
        name = _JAX_EVENTS.get(event)
        if name is not None:
            durations[name] = durations.get(name, 0.0) + seconds

    monitoring.register_event_duration_secs_listener(record)
    return durations


def child_compiled() -> dict:
    import compile_step
    import torch
    import torch._dynamo  # imported by torch.compile before any step, as in a user's script

    from jaxdev.compiler import stats as aot_cache_stats
    from jaxdev.graphs import program_cache
    from jaxdev.graphs.program import STATS

    durations = _listen()
    step = compile_step.torch_step(compile_step.torch_lm, "jax", compiled=True)
    before = dict(durations)
    t0 = time.perf_counter()
    step()
    first = time.perf_counter() - t0
    jax_phases = {k: v - before.get(k, 0.0) for k, v in durations.items()}
    t0 = time.perf_counter()
    step()
    second = time.perf_counter() - t0
    metrics = {k: sum(v) for k, v in torch._dynamo.utils.compilation_time_metrics.items()}
    backend = metrics.get("OutputGraph.call_user_compiler", 0.0)
    phases = {
        "dynamo": metrics.get("_compile.compile_inner", 0.0) - backend,
        "AOTAutograd": backend,
        "jaxdev programs": STATS.seconds,
        **{f"  {k}": v for k, v in jax_phases.items()},
    }
    phases["rest"] = first - phases["dynamo"] - backend - STATS.seconds
    return {
        "first": first,
        "second": second,
        "phases": phases,
        "programs": STATS.programs,
        "aot hits": aot_cache_stats.STATS.hits,
        "aot compiled": aot_cache_stats.STATS.compiled,
        "program hits": program_cache.STATS.hits,
    }


def child_jit() -> dict:
    import compile_step
    import jax

    durations = _listen()
    params, loss_fn, weight_decay = compile_step.jax_lm()
    jax.block_until_ready(params)
    before = dict(durations)
    t0 = time.perf_counter()
    step, _ = compile_step.jax_step(lambda: (params, loss_fn, weight_decay))
    step()
    first = time.perf_counter() - t0
    phases = {f"  {k}": v - before.get(k, 0.0) for k, v in durations.items()}
    return {"first": first, "phases": phases}


def spawn(variant: str, cache: str, **extra_env) -> dict:
    env = dict(os.environ, JAXDEV_CACHE_DIR=cache, TORCHINDUCTOR_CACHE_DIR=os.path.join(cache, "inductor"))
    env.update(extra_env)
    out = subprocess.run(
        [sys.executable, os.path.abspath(__file__), "--child", variant],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
    )
    if out.returncode != 0:
        raise SystemExit(f"the {variant} child failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def _median(runs: list[dict], key: str) -> float:
    return statistics.median(r[key] for r in runs)


def _phase_table(runs: dict[str, list[dict]]) -> None:
    names = []
    for rs in runs.values():
        for r in rs:
            names += [n for n in r["phases"] if n not in names]
    print(f"\n{'median seconds':<22}" + "".join(f"{label:>16}" for label in runs))
    for name in names:
        row = [statistics.median(r["phases"].get(name, 0.0) for r in rs) for rs in runs.values()]
        print(f"{name:<22}" + "".join(f"{v:>16.2f}" for v in row))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--child", choices=["compiled", "jit"])
    parser.add_argument(
        "--with-cache-off",
        action="store_true",
        help="also the compiled step with JAXDEV_COMPILE_CACHE=off (JAX's own XLA cache still on), interleaved",
    )
    args = parser.parse_args()
    if args.child:
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        print(json.dumps(child_compiled() if args.child == "compiled" else child_jit()))
        return
    names = ["compiled cold", "jit cold", "compiled warm", "jit warm"]
    names += ["compiled cold, cache off", "compiled warm, cache off"] if args.with_cache_off else []
    runs: dict[str, list[dict]] = {k: [] for k in names}
    for r in range(args.rounds):
        with (
            tempfile.TemporaryDirectory(prefix="jaxdev-first-") as a,
            tempfile.TemporaryDirectory(prefix="jaxdev-first-") as b,
            tempfile.TemporaryDirectory(prefix="jaxdev-first-") as c,
        ):
            runs["compiled cold"].append(spawn("compiled", a))
            runs["jit cold"].append(spawn("jit", b))
            if args.with_cache_off:
                runs["compiled cold, cache off"].append(spawn("compiled", c, JAXDEV_COMPILE_CACHE="off"))
            runs["compiled warm"].append(spawn("compiled", a))
            runs["jit warm"].append(spawn("jit", b))
            if args.with_cache_off:
                runs["compiled warm, cache off"].append(spawn("compiled", c, JAXDEV_COMPILE_CACHE="off"))
        print(
            f"round {r + 1}: " + ", ".join(f"{k} {v[-1]['first']:.2f} s" for k, v in runs.items()),
            flush=True,
        )
    print(f"\n{'first step':<14}{'compiled s':>12}{'jax.jit s':>11}{'compiled / jit':>16}  (medians of {args.rounds})")
    for cache in ("cold", "warm"):
        j = runs[f"jit {cache}"]
        for label in [cache] + ([f"{cache}, cache off"] if args.with_cache_off else []):
            c = runs[f"compiled {label}"]
            ratio = statistics.median(x["first"] / y["first"] for x, y in zip(c, j))
            print(f"{label:<14}{_median(c, 'first'):>12.2f}{_median(j, 'first'):>11.2f}{ratio:>16.2f}")
    warm = runs["compiled warm"]
    print(
        f"compiled second step (the optimizer's state exists now): cold {_median(runs['compiled cold'], 'second'):.2f} s, "
        f"warm {_median(warm, 'second'):.2f} s; AOTAutograd cache hits warm: {_median(warm, 'aot hits'):.0f} "
        f"(graphs traced again: {_median(warm, 'aot compiled'):.0f}), "
        f"programs loaded: {_median(warm, 'program hits'):.0f} of {_median(warm, 'programs'):.0f}"
    )
    _phase_table(runs)


if __name__ == "__main__":
    main()
