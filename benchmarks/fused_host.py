"""Fused eager's host time per step and per op, with replay (jaxdev/fused/replay.py) and without it (every
op keyed, as before it), interleaved round by round in one process; with `--compare results`, a recorded
op's results made natively (jaxdev/csrc/fused_results.cpp) against the Python loops (results.made_in_python);
with `--compare guard`, the replay guard reading each key compiled once (jaxdev/csrc/fused_guard.cpp) against
reading its tuples; with `--compare views`, view and as_strided's unboxed redispatch to CPU's kernels
(jaxdev/csrc/native.cpp) against the boxed one every other view op takes.

Issue 37 item 3: on a TPU the fused training step was host-bound (10.3 of its 10.9 ms). On CPU the host
side is measured alone: main-thread CPU time (time.thread_time: the machine's other load and XLA's own
threads stay out), at tiny widths so that what XLA computes is small. Workloads:
* lm: benchmarks/tpu_gpt.py's GPT training step (issue 37's 6 layers, tied head, AdamW foreach) at d 64;
* fwd: its batch-1 forward of 8 tokens, read back;
* ops: 50 tiny ops in a row (a * b, relu, add_), then one flush: us per op.
Rows: ms per step (or us per op) of each variant, the ratio replay / keyed, and for the LM its split into
recording, flushing and the rest (PyTorch's dispatcher, autograd, the model's and optimizer's Python),
ops per step and us per recorded op, programs built while measured (0: replayed steps hit).

    python benchmarks/fused_host.py [--layers 6] [--rounds 7] [--steps 10] [--only lm,fwd,ops] [--compare results|guard|views]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import jax
import numpy as np
import torch
import tpu_gpt
from timing import ALLOCATOR

import jaxdev
from jaxdev import eager_modes
from jaxdev.fused import recorder, replay, results

STATS = recorder.STATS
NATIVE_MATCH = replay._match
NATIVE_MAKE = results.make


class _Views:
    """`boxed = True`: view and as_strided go through the boxed redispatch to CPU (native.boxed_views)."""

    def __setattr__(self, name, value):
        jaxdev.native.module.boxed_views(value)


# --compare: (module, attribute, {variant: value}); the first variant is the one measured, the second its baseline
COMPARISONS = {
    "replay": (replay, "_match", {"replay": NATIVE_MATCH, "keyed": None}),
    "results": (results, "make", {"native": NATIVE_MAKE, "python": results.made_in_python}),
    "guard": (replay, "compiled", {"compiled": True, "tuples": False}),
    "views": (_Views(), "boxed", {"unboxed": False, "boxed": True}),
}
MODULE, ATTRIBUTE, VARIANTS = COMPARISONS["replay"]


def _use(value) -> None:
    setattr(MODULE, ATTRIBUTE, value)


def _restore() -> None:
    _use(next(iter(VARIANTS.values())))


def _jax(a: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(a).to("jax")


def lm_step(layers: int):
    tpu_gpt.SIZES["host"] = dict(layers=layers, d=64, heads=4, vocab=256, batch=2, seq=32, fwd_tokens=8, new_tokens=4)
    cfg = tpu_gpt.Config("host")
    model = tpu_gpt.torch_model(cfg, torch.float32).to("jax")
    x, y, prompt = (_jax(a) for a in tpu_gpt.numpy_batch(cfg))
    opt = tpu_gpt.make_adamw(model.parameters())

    def step():
        opt.zero_grad(set_to_none=True)
        loss = tpu_gpt.loss_fn(model(x), y)
        loss.backward()
        opt.step()  # ends with a flush
        return loss

    def forward():
        with torch.no_grad():
            return model(prompt).cpu()  # a read: the flush

    return step, forward


def ops_stream(n: int = 50):
    a, b = torch.randn(4, 4).to("jax"), torch.randn(4, 4).to("jax")
    bodies = {"a * b": lambda x: x * b, "relu": torch.relu, "add_": lambda x: x.add_(b)}

    def run(body):
        def go():
            x = a.clone()
            for _ in range(n):
                x = body(x)
            recorder.flush()
            return x

        return go

    return {name: run(body) for name, body in bodies.items()}


def _cpu_ms(fn, steps: int) -> float:
    t0 = time.thread_time()
    for _ in range(steps):
        r = fn()
    t = (time.thread_time() - t0) / steps * 1e3
    eager_modes.flush()
    jax.block_until_ready(jaxdev.tensor.read(r)) if isinstance(r, torch.Tensor) and r.device.type == "jax" else None
    return t


def interleaved(fn, rounds: int, steps: int) -> dict[str, float]:
    """Median ms per call of `fn` under each variant, alternating round by round."""
    times = {v: [] for v in VARIANTS}
    for _ in range(rounds):
        for variant, value in VARIANTS.items():
            _use(value)
            times[variant].append(_cpu_ms(fn, steps))
    _restore()
    return {v: statistics.median(t) for v, t in times.items()}


class _Split:
    """Main-thread CPU time in recording and in flushing, through fused mode's handler."""

    def __init__(self):
        self.record = self.flush = 0.0
        self.depth = 0

    def timed(self, name, fn):
        def run(*args):
            if self.depth:
                return fn(*args)
            self.depth += 1
            t0 = time.thread_time()
            try:
                return fn(*args)
            finally:
                setattr(self, name, getattr(self, name) + time.thread_time() - t0)
                self.depth -= 1

        return staticmethod(run)


def split(step, steps: int) -> dict:
    """The LM step's host time split (one more pass per variant, through timing wrappers)."""
    rows = {}
    handler = type(eager_modes.HANDLERS["fused"])
    kernel, flush = handler.__dict__["kernel"], handler.__dict__["flush"]  # the staticmethods themselves
    for variant, value in VARIANTS.items():
        _use(value)
        s = _Split()
        handler.kernel, handler.flush = s.timed("record", recorder.record), s.timed("flush", recorder.flush)
        STATS.reset()
        total = _cpu_ms(step, steps)
        handler.kernel, handler.flush = kernel, flush
        ops = STATS.recorded / steps
        rows[variant] = dict(
            total=total,
            record=s.record / steps * 1e3,
            flush=s.flush / steps * 1e3,
            ops=ops,
            replayed=STATS.replayed / steps,
            programs=STATS.programs,
        )
    _restore()
    return rows


def main() -> None:
    global MODULE, ATTRIBUTE, VARIANTS
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=6)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--only", default="lm,fwd,ops")
    parser.add_argument("--compare", choices=sorted(COMPARISONS), default="replay")
    args = parser.parse_args()
    MODULE, ATTRIBUTE, VARIANTS = COMPARISONS[args.compare]
    print(f"jax {jax.__version__} on {jax.devices()[0].platform}; torch {torch.__version__}; {ALLOCATOR}")
    if NATIVE_MATCH is None:
        print("no native module: nothing to compare")
        return
    only, (a, b) = args.only.split(","), list(VARIANTS)
    step, forward = lm_step(args.layers)
    with jaxdev.eager_mode("fused"):
        for _ in range(4):  # every program built, both variants
            for value in VARIANTS.values():
                _use(value)
                step(), forward()
        _restore()
        print(f"\n{'main-thread CPU per call':<34} {a:>9} {b:>9} {'ratio':>7}")
        if "lm" in only:
            t = interleaved(step, args.rounds, args.steps)
            print(f"{f'LM step, {args.layers} layers (ms)':<34} {t[a]:>9.2f} {t[b]:>9.2f} {t[a] / t[b]:>7.2f}")
        if "fwd" in only:
            t = interleaved(forward, args.rounds, args.steps)
            print(f"{'LM batch-1 forward (ms)':<34} {t[a]:>9.2f} {t[b]:>9.2f} {t[a] / t[b]:>7.2f}")
        if "ops" in only:
            for name, fn in ops_stream().items():
                fn(), fn()
                t = interleaved(fn, args.rounds, args.steps)
                r, k = t[a] * 1e3 / 50, t[b] * 1e3 / 50
                print(f"{f'{name}, 50 in a row (us per op)':<34} {r:>9.2f} {k:>9.2f} {r / k:>7.2f}")
        if "lm" in only:
            _print_split(split(step, args.steps))


def _print_split(rows: dict) -> None:
    print(
        f"\n{'LM step split (ms)':<20} {'total':>7} {'record':>7} {'flush':>7} {'rest':>7} {'ops':>5} "
        f"{'replayed':>8} {'us/op':>6} {'programs':>8}"
    )
    for variant, r in rows.items():
        rest = r["total"] - r["record"] - r["flush"]
        print(
            f"{variant:<20} {r['total']:>7.2f} {r['record']:>7.2f} {r['flush']:>7.2f} {rest:>7.2f} "
            f"{r['ops']:>5.0f} {r['replayed']:>8.0f} {r['record'] * 1e3 / r['ops']:>6.1f} {r['programs']:>8}"
        )


if __name__ == "__main__":
    main()
