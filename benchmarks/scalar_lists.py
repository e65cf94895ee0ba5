"""Issue 37: the compiled GPT LM step with its foreach ops over 0-dim step counts run once over a vector
(jaxdev/compiler/scalar_lists.py, "batched") against one chain per parameter ("per tensor"), on CPU.

* first step: seconds of the first compiled step (dynamo, AOTAutograd, trace, XLA compile, run), each
  side in a fresh process over an empty compile cache;
* step ms: both sides built in one process, then timed round by round, interleaved (wall ms per step,
  the device drained after each), medians; the weights after the timed steps compared bit for bit.

JAXDEV_MATH=own traces the functions jaxdev chooses off XLA's CPU backend (a TPU's: its own pow).

    python benchmarks/scalar_lists.py [--size tiny|quick|full] [--rounds 7] [--steps 10]
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

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

SIDES = ("per tensor", "batched")


def _config(size: str):
    import compiled_host
    import tpu_gpt

    return compiled_host.tiny_config() if size == "tiny" else tpu_gpt.Config(size)


def build(size: str, batched: bool):
    """(step, params): tpu_check's compiled LM step (float32), compiled with the pass on or off."""
    import compiled_host
    import torch
    import tpu_gpt

    from jaxdev.compiler import scalar_lists

    cfg = _config(size)
    model = tpu_gpt.torch_model(cfg, torch.float32).to("jax")
    x, y, _ = (compiled_host._jax(a) for a in tpu_gpt.numpy_batch(cfg))
    opt = tpu_gpt.make_adamw(model.parameters())
    forward_backward = torch.compile(lambda: tpu_gpt.loss_fn(model(x), y).backward(), backend="jax")
    opt_step = torch.compile(opt.step, backend="jax")
    params = list(model.parameters())
    batch = scalar_lists.batch

    def step():
        scalar_lists.batch = batch if batched else (lambda gm: 0)  # read when a graph compiles
        try:
            opt.zero_grad(set_to_none=True)
            forward_backward()
            opt_step()
        finally:
            scalar_lists.batch = batch
        compiled_host._drain(params)

    return step, params


def first_step(size: str, side: str) -> float:
    """The first step's seconds in a fresh process over an empty cache."""
    env = dict(os.environ, JAXDEV_CACHE_DIR=tempfile.mkdtemp(prefix="scalar-lists-"))
    code = (
        f"import time, scalar_lists; step, _ = scalar_lists.build({size!r}, {side == 'batched'}); "
        "t = time.perf_counter(); step(); print(time.perf_counter() - t)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        env=env,
        cwd=os.path.dirname(os.path.abspath(__file__)),
        capture_output=True,
        text=True,
        check=True,
    )
    return float(out.stdout.split()[-1])


def interleaved(size: str, rounds: int, steps: int) -> tuple[dict, bool]:
    """({side: median wall ms per step}, whether both sides' weights are equal bit for bit)."""
    import torch

    built = {side: build(size, side == "batched") for side in SIDES}
    for step, _ in built.values():
        for _ in range(3):  # compile, then settle
            step()
    ms = {side: [] for side in SIDES}
    for _ in range(rounds):
        for side, (step, _) in built.items():
            t0 = time.perf_counter()
            for _ in range(steps):
                step()
            ms[side].append((time.perf_counter() - t0) / steps * 1e3)
    same = all(torch.equal(a.cpu(), b.cpu()) for a, b in zip(*(params for _, params in built.values())))
    return {side: statistics.median(v) for side, v in ms.items()}, same


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--size", default="tiny", choices=("tiny", "quick", "full"))
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--steps", type=int, default=10)
    args = p.parse_args()
    os.environ.setdefault("JAXDEV_CACHE_DIR", tempfile.mkdtemp(prefix="scalar-lists-"))
    firsts = {side: first_step(args.size, side) for side in SIDES}
    ms, same = interleaved(args.size, args.rounds, args.steps)
    print(json.dumps({"size": args.size, "math": os.environ.get("JAXDEV_MATH", "auto")}))
    for side in SIDES:
        print(f"{side:>10}: first step {firsts[side]:6.1f} s, step {ms[side]:8.2f} ms")
    print(f"weights after {3 + args.rounds * args.steps} steps equal bit for bit: {same}")


if __name__ == "__main__":
    main()
