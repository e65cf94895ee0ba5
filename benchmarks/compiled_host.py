"""The compiled path's host cost per call and its programs, against hand-written `jax.jit`, on issue
37's GPT LM shrunk until its arithmetic is negligible (issue 37 items 2 and 5, the compiled part).

benchmarks/tpu_check.sh measures the full LM on a TPU, where each distinct program costs seconds of
compile and a host millisecond shows as a device bubble. Here the same model (benchmarks/tpu_gpt.py:
6 pre-LN blocks, tied head, AdamW) runs at d 16, vocabulary 64, 2 x 8 tokens, so that what a step
costs is what the host does around its programs: dynamo's guards, AOTAutograd's runtime wrappers,
jaxdev's input and output wrapping, the optimizer's second program, `zero_grad`, value checks.

Rows (one process, variants interleaved round by round, medians):
* host us: CPU time of the calling thread per call (`time.thread_time`), the device drained before
  each call: the host's own work, which load on shared cores barely moves; wall us beside it;
* programs: XLA executions per settled call (JAX's profiler, as tpu_check counts them);
* first: the first call's XLA compiles (JAX's monitoring events) and seconds, from a fresh
  compile; jaxdev's graph programs (GraphProgram specialisations) in brackets.

    python benchmarks/compiled_host.py [--rounds 7] [--calls 50] [--only train|forward]
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
import numpy as np
import quiet
import torch
import tpu_gpt
import tpu_gpt_jax
import tpu_measure as tm
from timing import ALLOCATOR

import jaxdev
from jaxdev.graphs import program as graph_program

TINY = dict(layers=6, d=16, heads=2, vocab=64, batch=2, seq=8, fwd_tokens=8, new_tokens=4)


def tiny_config() -> tpu_gpt.Config:
    cfg = tpu_gpt.Config("quick")
    for k, v in TINY.items():
        setattr(cfg, k, v)
    cfg.context = max(cfg.seq, cfg.fwd_tokens, cfg.new_tokens)
    return cfg


def _jax(a: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(a).to("jax")


def _drain(result) -> None:
    for r in result if isinstance(result, (list, tuple)) else (result,):
        jax.block_until_ready(jaxdev.tensor.read(r) if isinstance(r, torch.Tensor) else r)


def jaxdev_train(cfg):
    """tpu_check's compiled step: torch.compile over forward+backward and over opt.step."""
    model = tpu_gpt.torch_model(cfg, torch.float32).to("jax")
    x, y, _ = (_jax(a) for a in tpu_gpt.numpy_batch(cfg))
    opt = tpu_gpt.make_adamw(model.parameters())

    @torch.compile(backend="jax")
    def forward_backward():
        loss = tpu_gpt.loss_fn(model(x), y)
        loss.backward()
        return loss

    opt_step = torch.compile(opt.step, backend="jax")
    params = list(model.parameters())

    def step():
        opt.zero_grad(set_to_none=True)
        loss = forward_backward()
        opt_step()
        return [loss, *params]  # drained: the optimizer's writes too

    return step


def jax_train(cfg):
    step, _, state = tpu_gpt_jax.train_step(cfg, jax.numpy.float32)
    return lambda: [step(), state["p"]]


def jaxdev_forward(cfg):
    model = tpu_gpt.torch_model(cfg, torch.float32).to("jax").eval()
    prompt = _jax(tpu_gpt.numpy_batch(cfg)[2])
    forward = torch.compile(model, backend="jax")

    @torch.no_grad()
    def call():
        return forward(prompt)

    return call


def jax_forward(cfg):
    return tpu_gpt_jax.forward_call(cfg, jax.numpy.float32)


def first(build, cfg) -> tuple:
    """(call, first call's seconds, XLA compiles, graph programs built)."""
    call = build(cfg)
    compiles, programs = tm.Compiles.total(), graph_program.STATS.programs
    t0 = time.perf_counter()
    _drain(call())
    seconds = time.perf_counter() - t0
    return call, seconds, tm.Compiles.total() - compiles, graph_program.STATS.programs - programs


def host_round(call, calls: int) -> tuple[float, float]:
    """Median (thread CPU us, wall us) of `calls` calls, each on a drained device."""
    cpu, wall = [], []
    for _ in range(calls):
        c0, w0 = time.thread_time(), time.perf_counter()
        result = call()
        cpu.append(time.thread_time() - c0)
        wall.append(time.perf_counter() - w0)
        _drain(result)
    return statistics.median(cpu) * 1e6, statistics.median(wall) * 1e6


def compare(name: str, sides: dict, cfg, rounds: int, calls: int) -> None:
    built = {label: first(build, cfg) for label, build in sides.items()}
    for call, *_rest in built.values():
        for _ in range(3):  # settle: the optimizer's state, later layouts
            _drain(call())
    cpu = {label: [] for label in sides}
    wall = {label: [] for label in sides}
    for _ in range(rounds):
        for label, (call, *_rest) in built.items():
            c, w = host_round(call, calls)
            cpu[label].append(c)
            wall[label].append(w)
    reference = statistics.median(cpu["jax.jit"])
    print(f"\n{name}: host us per call (thread CPU / wall), XLA programs per call, first call")
    for label, (call, seconds, compiles, programs) in built.items():
        c, w = statistics.median(cpu[label]), statistics.median(wall[label])
        count, _how = tm.count_programs(call, _drain, 5)
        count = "-" if count is None else f"{count:g}"
        graphs = f" ({programs} graph programs)" if programs else ""
        print(
            f"  {label:<16} {c:>8.0f} {w:>8.0f} us {c / reference:>6.2f}x   programs {count:>3}   "
            f"first {seconds:5.2f} s, {compiles} XLA compiles{graphs}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--calls", type=int, default=50)
    parser.add_argument("--only", choices=("train", "forward"))
    args = parser.parse_args()
    cfg = tiny_config()
    print(f"torch {torch.__version__}, jax {jax.__version__}, {jax.devices()[0].platform}; {ALLOCATOR}")
    print(f"GPT {cfg.layers} layers, d {cfg.d}, vocabulary {cfg.vocab}, train {cfg.batch} x {cfg.seq}, float32")
    # dynamo's log notes off once for the whole run: quiet.quietly per call costs ~1 ms of logging setLevel
    with quiet.quiet_compilers(warnings_too=False):
        if args.only in (None, "train"):
            sides = {"jaxdev compiled": jaxdev_train, "jax.jit": jax_train}
            compare("train step", sides, cfg, args.rounds, args.calls)
        if args.only in (None, "forward"):
            sides = {"jaxdev compiled": jaxdev_forward, "jax.jit": jax_forward}
            compare(f"batch-1 forward of {cfg.fwd_tokens} tokens", sides, cfg, args.rounds, args.calls)


if __name__ == "__main__":
    main()
