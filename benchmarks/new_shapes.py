"""New shapes in a new process: what per-op eager jaxdev pays for each XLA program it has not made
before, cold (an empty JAXDEV_CACHE_DIR) and warm (the cache the cold process left), against the
same work on torch CPU and in plain JAX (`jax.jit` of the same functions) in the same process.

The workload is what PyTorch's device-generic test files do: many small ops, each on shapes and
dtypes the process has not met, each result read back (`.cpu()`): views read or written (transpose,
strided slices, expand, narrow + in-place), elementwise ops, reductions and indexing. Every op runs
on jax, then on CPU, then in plain JAX, interleaved, so load on the machine falls on all three alike.

Each run is a fresh child process (what a new test file pays). The child splits the time of the
jax side by JAX's own duration events: tracing (jaxpr), lowering (jaxpr -> StableHLO), compiling or
loading from the persistent cache (including its key, which hashes the lowered module), and what is
left: jaxdev's own host work (dispatch, views, boxes, reading the result back). The plain-JAX side
is split alike.

    python benchmarks/new_shapes.py [--shapes 12] [--runs cold warm] [--configs before after] [--repeat 1]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PHASES = ("trace", "lower", "compile", "key", "load", "save")


def child(n_shapes: int) -> dict:
    """Runs in the child process: the workload on jax, CPU and plain JAX; returns the split times."""
    import time

    import jax
    import jax.numpy as jnp
    import numpy as np
    import torch

    import jaxdev  # noqa: F401  (registers the device)
    from jaxdev.programs.exec_cache import STATS

    events = {
        "/jax/core/compile/jaxpr_trace_duration": "trace",
        "/jax/core/compile/jaxpr_to_mlir_module_duration": "lower",
        "/jax/core/compile/backend_compile_duration": "compile",
    }
    spent = dict.fromkeys(PHASES, 0.0)
    counts = {"programs": 0, "cache_hits": 0, "exec_hits": 0}

    def on_duration(event, secs, **kw):
        if event in events:
            spent[events[event]] += secs
            counts["programs"] += event.endswith("backend_compile_duration")

    def exec_cache():  # jaxdev's executable cache: (key, load, save) seconds and hits so far
        spent["key"], spent["load"], spent["save"] = STATS.key_s, STATS.load_s, STATS.save_s
        counts["exec_hits"] = STATS.hits

    def snapshot():
        exec_cache()
        return dict(spent), dict(counts)

    def on_event(event, **kw):
        counts["cache_hits"] += event == "/jax/compilation_cache/cache_hits"

    jax.monitoring.register_event_duration_secs_listener(on_duration)
    jax.monitoring.register_event_listener(on_event)

    cases = workload(n_shapes, torch, jnp, np)
    sides = {s: {"total": 0.0, **dict.fromkeys(PHASES, 0.0), **dict.fromkeys(counts, 0)} for s in ("jax", "jnp")}
    sides["cpu"] = {"total": 0.0}
    for torch_fn, jnp_fn, inputs in cases:
        for side in ("jax", "cpu", "jnp"):
            if side == "jnp":
                args = [jax.block_until_ready(jnp.asarray(a.numpy())) for a in inputs]
                before, t0 = snapshot(), time.perf_counter()
                np.asarray(jax.jit(jnp_fn)(*args))
            else:
                args = [a.to(side) for a in inputs]
                before, t0 = snapshot(), time.perf_counter()
                torch_fn(*args).cpu()
            sides[side]["total"] += time.perf_counter() - t0
            exec_cache()
            if side != "cpu":
                for k in PHASES:
                    sides[side][k] += spent[k] - before[0][k]
                for k in counts:
                    sides[side][k] += counts[k] - before[1][k]
    sides["ops"] = len(cases)
    return sides


def workload(n_shapes: int, torch, jnp, np) -> list:
    """(torch function, the same in jnp, CPU inputs) per op, over `n_shapes` shapes and three dtypes."""
    ops = [
        (lambda x, i: x.t().contiguous(), lambda x, i: x.T),
        (lambda x, i: x[:, ::2].clone(), lambda x, i: x[:, ::2]),
        (
            lambda x, i: x[:1].expand(3, *x.shape[1:]).contiguous(),
            lambda x, i: jnp.broadcast_to(x[:1], (3, *x.shape[1:])),
        ),
        (lambda x, i: _narrow_add(x), lambda x, i: x.at[1:3].add(1)),
        (lambda x, i: x.reshape(-1).unsqueeze(0) * 2, lambda x, i: x.reshape(-1)[None] * 2),
        (lambda x, i: x + x.flip(0), lambda x, i: x + x[::-1]),
        (lambda x, i: torch.where(x > 1, x, -x), lambda x, i: jnp.where(x > 1, x, -x)),
        (lambda x, i: x.abs().max(), lambda x, i: jnp.abs(x).max()),
        (lambda x, i: x.sum(0), lambda x, i: x.sum(0, dtype=x.dtype if x.dtype != jnp.bool_ else jnp.int64)),
        (lambda x, i: x.amax(-1), lambda x, i: x.max(-1)),
        (lambda x, i: x.index_select(0, i), lambda x, i: x[i]),
        (lambda x, i: x[i], lambda x, i: x[i]),
        (lambda x, i: x.masked_fill(x > 2, 0), lambda x, i: jnp.where(x > 2, 0, x)),
        (lambda x, i: torch.cat([x, x], 1), lambda x, i: jnp.concatenate([x, x], 1)),
    ]
    cases = []
    rng = np.random.default_rng(0)
    for s in range(n_shapes):
        shape = (4 + s, 3 + (s * 5) % 7)
        for dtype in (torch.float32, torch.int64, torch.float64):
            x = torch.from_numpy(rng.integers(-4, 5, shape)).to(dtype)
            i = torch.from_numpy(rng.integers(0, shape[0], (2 + s % 3,)))
            cases.extend((t, j, (x, i)) for t, j in ops)
    return cases


def _narrow_add(x):
    y = x.clone()
    y.narrow(0, 1, 2).add_(1)
    return y


def run(cache: str, n_shapes: int, env_extra: dict) -> dict:
    env = dict(os.environ, JAXDEV_CACHE_DIR=cache, **env_extra)
    code = f"import sys, json; sys.path.insert(0, {os.path.dirname(__file__)!r}); import new_shapes; "
    code += f"print('RESULT', json.dumps(new_shapes.child({n_shapes})))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=ROOT)
    if out.returncode:
        sys.exit(f"child failed:\n{out.stderr[-3000:]}")
    line = next(x for x in out.stdout.splitlines() if x.startswith("RESULT "))
    return json.loads(line[len("RESULT ") :])


def report(label: str, r: dict) -> None:
    cpu, jx, jn = r["cpu"]["total"], r["jax"], r["jnp"]
    print(
        f"{label}: {r['ops']} ops; jax {jx['total']:.2f} s ({jx['total'] / cpu:.1f}x CPU, {jx['total'] / jn['total']:.2f}x jnp), "
        f"CPU {cpu:.2f} s, plain jax.jit {jn['total']:.2f} s ({jn['total'] / cpu:.1f}x CPU)"
    )
    for side in ("jax", "jnp"):
        d = r[side]
        n = max(d["programs"] + d["exec_hits"], 1)
        host = d["total"] - sum(d[k] for k in PHASES)
        split = ", ".join(f"{k} {1e3 * d[k] / n:.1f}" for k in PHASES)
        print(
            f"  {side:<4} {n:>4} programs ({d['cache_hits']} from JAX's persistent cache, {d['exec_hits']} from jaxdev's "
            "executable cache), per program ms: "
            f"{split}, host {1e3 * host / n:.1f}; total {1e3 * d['total'] / n:.1f}"
        )


# What each compared configuration sets in the child: before = jaxdev without its executable cache and
# cheaper compiles (as it was before them), after = as it ships
CONFIGS = {
    "before": {"JAXDEV_EXEC_CACHE": "off", "JAXDEV_FAST_COMPILE": "off"},
    "exec cache only": {"JAXDEV_FAST_COMPILE": "off"},
    "after": {},
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shapes", type=int, default=12, help="distinct shapes (each in 3 dtypes, 14 ops)")
    parser.add_argument("--runs", nargs="+", default=["cold", "warm"], help="cold and/or warm, in order")
    parser.add_argument(
        "--configs", nargs="+", choices=list(CONFIGS), default=["before", "after"],
        help="jaxdev configurations compared, each over its own cache folder, run in alternation",
    )  # fmt: skip
    parser.add_argument("--repeat", type=int, default=1, help="rounds (each from an empty cache)")
    parser.add_argument("--env", nargs="*", default=[], help="more KEY=VALUE for every child")
    args = parser.parse_args()
    extra = dict(e.split("=", 1) for e in args.env)
    for round_ in range(args.repeat):
        with tempfile.TemporaryDirectory(prefix="jaxdev-new-shapes-") as root:
            for label in args.runs:
                for name in args.configs:
                    cache = os.path.join(root, name.replace(" ", "-"))
                    report(f"round {round_ + 1}, {label}, {name}", run(cache, args.shapes, {**extra, **CONFIGS[name]}))


if __name__ == "__main__":
    main()
