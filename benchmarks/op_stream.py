"""Per-op eager against plain op-by-op JAX on the same op stream (issue 37 item 4).

The stream is what one step of benchmarks/tpu_gpt.py's LM sends to jaxdev's kernels (its training step
with AdamW, or its batch-1 forward), captured once in per-op mode below autograd (a TorchDispatchMode:
the backward's ops too) with the actual arguments. It is then replayed op by op two ways, interleaved
round by round:
* jaxdev: each op through the dispatcher (`torch.ops.aten.X(*args)`) on the captured jax tensors:
  what per-op mode runs for it, from the call to its result tensors;
* jnp: each op's own computation, jitted on its own (jaxdev's kernel traced into one jax.jit program of
  arrays, as fused eager builds it for a one-op segment) and called on copies of the arrays behind those
  tensors: one jitted call per op and nothing else, what op-by-op JAX code pays at best.
Views (t, view, transpose: metadata in PyTorch, each a program in JAX) have no jnp twin and are timed
apart, as are ops that cannot be traced alone (their values decide their shapes).

Rows: ms per stream each way (wall, results waited for once per stream; and main-thread CPU), the ratio,
us per op, XLA programs per op (JAX's profiler), then the ops whose own ratio is worst. `--before
foreach` adds a third side, interleaved with the others: jaxdev with its foreach calls in Python (the
native foreach replay switched off around each of its rounds: jaxdev/csrc/foreach_ops.cpp), and a
before column in the worst-ops table, which then lists every foreach op too.

    python benchmarks/op_stream.py [--stream train|forward] [--size host|quick|full] [--rounds 7]
                                   [--before foreach]
"""

from __future__ import annotations

import argparse
import collections
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import jax
import numpy as np
import torch
import tpu_gpt
import tpu_measure
from timing import ALLOCATOR
from torch.utils._python_dispatch import TorchDispatchMode

import jaxdev
from jaxdev import native, rng
from jaxdev.fused import program as fused_program
from jaxdev.fused import recorder

tpu_gpt.SIZES["host"] = dict(layers=6, d=64, heads=4, vocab=256, batch=2, seq=32, fwd_tokens=8, new_tokens=4)


class _Capture(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.ops: list[tuple] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        self.ops.append((func, args, kwargs))
        return func(*args, **kwargs)


def capture(stream: str, size: str, dtype: torch.dtype) -> list[tuple]:
    cfg = tpu_gpt.Config(size)
    model = tpu_gpt.torch_model(cfg, dtype).to("jax")
    x, y, prompt = (torch.from_numpy(a).to("jax") for a in tpu_gpt.numpy_batch(cfg))
    opt = tpu_gpt.make_adamw(model.parameters())

    def step():
        if stream == "forward":
            with torch.no_grad():
                return model(prompt)
        opt.zero_grad(set_to_none=True)
        loss = tpu_gpt.loss_fn(model(x), y)
        loss.backward()
        opt.step()
        return loss

    step(), step()  # optimizer state made, every per-op program compiled
    mode = _Capture()
    with mode:
        step()
    return mode.ops


def _is_view(func) -> bool:
    return func.is_view or torch.Tag.view_copy in func.tags or func._schema.name in ("aten::_unsafe_view",)


def twin(func, args, kwargs):
    """The op's jitted JAX program and copies of its input arrays: (call, n programs) or None. Built by
    recording the op alone in fused mode and catching the program its flush runs (without donation, so
    that the arrays stay)."""
    caught = {}
    original_call, original_candidates = fused_program._call, fused_program._candidates

    def catch(spec, inputs, numbers):
        arrays = [jax.numpy.array(a, copy=True) for a in inputs.arrays()]
        if numbers:
            arrays[-1] = np.asarray(numbers, np.float64)
        caught["call"] = (spec, arrays)
        return original_call(spec, inputs, numbers)

    # no storage a candidate for donation: the flush's program leaves the caught arrays alive
    fused_program._call, fused_program._candidates = catch, lambda spec, inputs: ()
    try:
        with jaxdev.eager_mode("fused"):
            recorder.flush()
            before = recorder.STATS.recorded
            out = func(*args, **kwargs)  # alive at the flush: the program computes every result
            recorded = recorder.STATS.recorded > before
            recorder.flush()
            del out
    except Exception:
        return None
    finally:
        fused_program._call, fused_program._candidates = original_call, original_candidates
    if not recorded or "call" not in caught:
        return None
    spec, arrays = caught["call"]
    jitted = spec.jitted
    return lambda: jitted(arrays, rng.traced_base())


def _wait(r) -> None:
    leaves = [x for x in jax.tree_util.tree_leaves(r, is_leaf=lambda x: isinstance(x, torch.Tensor))]
    arrays = [jaxdev.tensor.read(x) if isinstance(x, torch.Tensor) and x.device.type == "jax" else x for x in leaves]
    jax.block_until_ready([a for a in arrays if isinstance(a, jax.Array)])


def _below_autograd(func, args, kwargs):
    """The op as the dispatcher runs it under autograd in a step: what per-op mode's kernels cost, not
    autograd's bookkeeping (PyTorch's, the same in every mode)."""

    def call():
        with torch._C._AutoDispatchBelowAutograd():
            return func(*args, **kwargs)

    return call


def streams(ops: list[tuple]) -> dict:
    """{"jaxdev": [calls], "jnp": [calls], "views": [calls], "alone": [calls without a twin], "names": [...]}"""
    out = collections.defaultdict(list)
    for func, args, kwargs in ops:
        call = _below_autograd(func, args, kwargs)
        if _is_view(func):
            out["views"].append(call)
            continue
        ref = twin(func, args, kwargs)
        if ref is None:
            out["alone"].append((func, call))
            continue
        out["jaxdev"].append(call)
        out["jnp"].append(ref)
        out["names"].append(func.name())
    return out


def run_all(calls: list):
    def run():
        r = None
        for c in calls:
            r = c()
        return r

    return run


def _fine_host_clock():
    """time.thread_time where it ticks finely; else time.perf_counter (the TPU VM's sandbox counts thread
    time in 10 ms ticks: on the chip every op read 0 us and the worst-ops table divided by zero)."""
    t0 = t1 = time.thread_time()
    while t1 == t0:
        t1 = time.thread_time()
    return time.thread_time if t1 - t0 < 1e-4 else time.perf_counter


HOST_CLOCK = _fine_host_clock()


def timed(runs: dict, rounds: int) -> dict:
    """Median wall and main-thread CPU seconds per stream of each side, round by round."""
    wall, cpu = collections.defaultdict(list), collections.defaultdict(list)
    for _ in range(rounds):
        for side, run in runs.items():
            _wait(run())
            t0, c0 = time.perf_counter(), HOST_CLOCK()
            r = run()
            c1 = HOST_CLOCK()
            _wait(r)
            wall[side].append(time.perf_counter() - t0)
            cpu[side].append(c1 - c0)
    return {s: (statistics.median(wall[s]), statistics.median(cpu[s])) for s in runs}


def host_pair(dev, ref, per: int = 20, batches: int = 7) -> tuple[float, float]:
    """Main-thread CPU seconds per call of `dev` and `ref`, batches alternating, the least of each."""
    best = [float("inf"), float("inf")]
    for _ in range(batches):
        for side, fn in enumerate((dev, ref)):
            c0 = HOST_CLOCK()
            for _ in range(per):
                r = fn()
            best[side] = min(best[side], (HOST_CLOCK() - c0) / per)
            _wait(r)
    return best[0], best[1]


def _switched_off(run):
    """`run` with the native foreach replay off (the before side of `--before foreach`)."""

    def off():
        previous = native.module.foreach_replay(False)
        try:
            return run()
        finally:
            native.module.foreach_replay(previous)

    return off


def worst_ops(s: dict, count: int, before: bool) -> None:
    rows = []
    by_name = collections.defaultdict(list)
    for name, dev, ref in zip(s["names"], s["jaxdev"], s["jnp"]):
        by_name[name].append((dev, ref))
    for name, pairs in by_name.items():
        td, tr = host_pair(*pairs[0])
        tb = host_pair(_switched_off(pairs[0][0]), pairs[0][1])[0] if before else None
        rows.append((td / tr, name, len(pairs), td, tr, tb))
    extra = f" {'before us':>10}" if before else ""
    print(f"\n{'op (first of each), host CPU':<52} {'calls':>5} {'jaxdev us':>10} {'jnp us':>8} {'ratio':>6}{extra}")
    ranked = sorted(rows, reverse=True)
    shown = ranked[:count] + ([r for r in ranked[count:] if "_foreach_" in r[1]] if before else [])
    for ratio, name, n, td, tr, tb in shown:
        extra = f" {tb * 1e6:>10.1f}" if before else ""
        print(f"{name:<52} {n:>5} {td * 1e6:>10.1f} {tr * 1e6:>8.1f} {ratio:>6.2f}{extra}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stream", choices=("train", "forward"), default="train")
    parser.add_argument("--size", default="host", help="host (6 layers, d 64: default), quick, full")
    parser.add_argument("--dtype", choices=("f32", "bf16"), default="f32")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--worst", type=int, default=8, help="ops listed with their own ratio")
    parser.add_argument("--before", choices=("foreach",), help="also time jaxdev with this native path off")
    args = parser.parse_args()
    # per-op eager's stream, whatever the platform's default (fused eager on an accelerator, under which the
    # jaxdev side recorded its ops rather than running them: the chip's first run, 2026-12-07)
    jaxdev.eager_mode("op")
    clock = "thread CPU" if HOST_CLOCK is time.thread_time else "wall (thread CPU ticks coarsely here)"
    print(
        f"jax {jax.__version__} on {jax.devices()[0].platform}; torch {torch.__version__}; {ALLOCATOR}; host: {clock}"
    )
    dtype = {"f32": torch.float32, "bf16": torch.bfloat16}[args.dtype]
    ops = capture(args.stream, args.size, dtype)
    s = streams(ops)
    print(
        f"LM {args.stream} stream ({args.size}, {args.dtype}): {len(ops)} ops: {len(s['jaxdev'])} with a jnp twin, "
        f"{len(s['views'])} views, {len(s['alone'])} without a twin ({sorted({f.name() for f, _ in s['alone']})})"
    )
    runs = {"jaxdev": run_all(s["jaxdev"]), "jnp": run_all(s["jnp"])}
    if args.before:
        runs["before"] = _switched_off(runs["jaxdev"])
    t = timed(runs, args.rounds)
    n = len(s["jaxdev"])
    print(f"\n{'same op stream':<22} {'jaxdev':>9} {'jnp':>9} {'ratio':>7}")
    for side in [x for x in runs if x != "jnp"]:
        label = "" if side == "jaxdev" else f" ({args.before} in Python)"
        print(
            f"{'wall ms per stream' + label:<22} {t[side][0] * 1e3:>9.2f} {t['jnp'][0] * 1e3:>9.2f} {t[side][0] / t['jnp'][0]:>7.2f}"
        )
        print(
            f"{'host CPU ms per stream' + label:<22} {t[side][1] * 1e3:>9.2f} {t['jnp'][1] * 1e3:>9.2f} {t[side][1] / t['jnp'][1]:>7.2f}"
        )
        print(f"{'host CPU us per op' + label:<22} {t[side][1] * 1e6 / n:>9.2f} {t['jnp'][1] * 1e6 / n:>9.2f}")
    views, alone = run_all(s["views"]), run_all([c for _, c in s["alone"]])
    for name, run, count in (("views", views, len(s["views"])), ("ops without a twin", alone, len(s["alone"]))):
        if count:
            tv = timed({"x": run}, args.rounds)["x"]
            print(f"{name:<22} {tv[1] * 1e3:>9.2f} ms host for {count} ({tv[1] * 1e6 / count:.1f} us each)")
    for side, run in runs.items():
        per, how = tpu_measure.count_programs(run, _wait, 2)
        print(f"XLA programs per stream, {side}: {per} ({how}; {n} ops)")
    if args.worst:
        worst_ops(s, args.worst, bool(args.before))


if __name__ == "__main__":
    main()
