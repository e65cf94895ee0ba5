"""Fused eager's read of a batch-1 forward, each of the read's cuts undone in turn, call by call in one
process (issue 37 item 3). benchmarks/compiled_latency.py's LM (6 layers, d 32, vocabulary 256), its
forward of 32 tokens recorded under fused eager, then read back: `.cpu()` of the logits, or
`.sum().item()` (a read that is keyed: `--read item`); the read flushes the segment.

Variants, alternating call by call (each call's forward and read timed apart, main-thread CPU time:
time.thread_time, which the machine's other load barely moves), and each one's median difference to
"after", paired call by call:
* after: every cut on;
* before (all): every cut undone;
* before NAME: that cut alone undone:
  - reads: a copy to CPU keyed before it runs eagerly (jaxdev/fused/at_once.py's reads: not keyed);
  - refresh: the replayed segment's placeholder index rebuilt at every keyed op (recorder.LAZY_REFRESH:
    when a key first reads it);
  - flag: the flush's check flag read as bool(array) (graphs/outputs.CheckFlag: JAX's C++ host copy);
  - prefetch: the flag's host copy started on a CPU device too (graphs/program.PREFETCH_ON_CPU).

    python benchmarks/fused_read.py [--calls 600] [--read cpu|item]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
os.environ.setdefault("JAXDEV_CACHE_DIR", tempfile.mkdtemp(prefix="jaxdev-benchmark-cache-"))

import jax
import torch
import tpu_gpt
from timing import ALLOCATOR

import jaxdev
from jaxdev.fused import at_once, recorder
from jaxdev.graphs import outputs
from jaxdev.graphs import program as graph_program

tpu_gpt.SIZES["latency"] = dict(layers=6, d=32, heads=4, vocab=256, batch=1, seq=32, fwd_tokens=32, new_tokens=32)

# name -> (module, attribute, the value with the cut on)
CUTS = {
    "reads": (at_once, "READS_AT_ONCE", True),
    "refresh": (recorder, "LAZY_REFRESH", True),
    "flag": (outputs, "FAST_FLAG_READ", True),
    "prefetch": (graph_program, "PREFETCH_ON_CPU", False),
}
VARIANTS = {"after": set(), "before (all)": set(CUTS), **{f"before {name}": {name} for name in CUTS}}
READS = {"cpu": lambda r: r.cpu(), "item": lambda r: torch.tensor(r.sum().item())}


def _use(undone: set) -> None:
    for name, (module, attribute, on) in CUTS.items():
        setattr(module, attribute, on if name not in undone else not on)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=600)
    parser.add_argument("--read", choices=sorted(READS), default="cpu")
    args = parser.parse_args()
    cfg = tpu_gpt.Config("latency")
    model = tpu_gpt.torch_model(cfg, torch.float32).to("jax").eval()
    tokens = torch.from_numpy(tpu_gpt.numpy_batch(cfg)[2]).to("jax")
    read, clock = READS[args.read], time.thread_time

    def call() -> tuple:
        t0 = clock()
        logits = model(tokens)
        t1 = clock()
        value = read(logits)
        t2 = clock()
        return (t1 - t0, t2 - t1), value

    print(f"jax {jax.__version__} on {jax.devices()[0].platform}; torch {torch.__version__}; {ALLOCATOR}")
    print(cfg.describe())
    times = {v: [] for v in VARIANTS}
    values = {}
    with torch.no_grad(), jaxdev.eager_mode("fused"):
        for undone in VARIANTS.values():  # every program built under every variant
            _use(undone)
            for _ in range(10):
                call()
        for i in range(args.calls):
            order = list(VARIANTS) if i % 2 == 0 else list(VARIANTS)[::-1]
            for variant in order:
                _use(VARIANTS[variant])
                t, values[variant] = call()
                times[variant].append(t)
    _use(set())
    print(f"\nmain-thread CPU us per call, medians of {args.calls} ({args.read} read; paired: minus after's)")
    print(f"  {'':<20} {'forward':>9} {'read':>9} {'paired forward':>15} {'paired read':>12}")
    for variant, rows in times.items():
        median = [statistics.median(c) * 1e6 for c in zip(*rows)]
        paired = [
            statistics.median(b - a for a, b in zip(x, y)) * 1e6 for x, y in zip(zip(*times["after"]), zip(*rows))
        ]
        print(f"  {variant:<20} {median[0]:>9.1f} {median[1]:>9.1f} {paired[0]:>15.1f} {paired[1]:>12.1f}")
    same = all(torch.equal(values["after"], v) for v in values.values())
    print(f"  the same values in every variant: {same}")


if __name__ == "__main__":
    main()
