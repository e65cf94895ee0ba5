"""A variable-length batch loop compiled with `torch.compile(backend="jax")`: programs built and time,
against the same loop at one fixed length (issue 28 item 4).

A small Transformer LM (1 layer, d=64) takes training steps (forward, backward, SGD) on batches whose
sequence length is drawn from 100-130, as a padded-per-batch data loader gives them. XLA programs have
static shapes, so each new length is a new program whatever dynamo does. Where dynamo keeps one graph
under `dynamic=True`, jaxdev compiles one program per length up to dynamo's recompile limit (8), then
runs new lengths op by op with one RecompileLimitWarning (tests/compiler/test_program.py); this
Transformer's graphs specialise on the length even so (dynamo recompiles per length, measured: one
forward and one backward graph per length), so dynamo's own limit is what stops it, after which the
step runs eagerly. Variants, each on its own fresh model:

* fixed length 128, compiled;
* variable lengths, compiled with dynamic=True (the limit as it is, and raised to 64);
* variable lengths, compiled with dynamo's default (automatic dynamic after the second length);
* variable lengths, per-op eager.

    python benchmarks/dynamic_shapes.py [--steps 40]
"""

from __future__ import annotations

import argparse
import random
import time
import warnings

import torch
import torch._dynamo
from torch import nn

import jaxdev  # noqa: F401  (the jax device and backend)
from jaxdev.graphs import program

VOCAB, D, HEADS = 500, 64, 4


def _model():
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(D, HEADS, 4 * D, dropout=0.0, batch_first=True)
    return nn.Sequential(nn.Embedding(VOCAB, D), layer, nn.Linear(D, VOCAB)).to("jax")


def _loop(lengths: list[int], compile_mode: str | None, limit: int | None = None) -> tuple[float, int, int]:
    """Seconds for the whole loop, programs built, and whether new lengths ran op by op (warnings)."""
    model = _model()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)

    def step(tokens, target):
        loss = nn.functional.cross_entropy(model(tokens).flatten(0, 1), target.flatten())
        loss.backward()
        return loss

    if compile_mode is not None:
        step = torch.compile(step, backend="jax", dynamic=compile_mode == "dynamic" or None)
    torch._dynamo.reset()
    before = program.STATS.programs
    was = torch._dynamo.config.recompile_limit
    if limit is not None:
        torch._dynamo.config.recompile_limit = limit
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", program.RecompileLimitWarning)
            t0 = time.perf_counter()
            for n in lengths:
                tokens = torch.randint(0, VOCAB, (8, n)).to("jax")
                opt.zero_grad(set_to_none=True)
                step(tokens, tokens.roll(-1, 1)).item()
                opt.step()
            seconds = time.perf_counter() - t0
    finally:
        torch._dynamo.config.recompile_limit = was
    limited = sum(issubclass(w.category, program.RecompileLimitWarning) for w in caught)
    return seconds, program.STATS.programs - before, limited


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=40)
    args = parser.parse_args()
    random.seed(0)
    lengths = [random.randint(100, 130) for _ in range(args.steps)]
    print(f"{args.steps} training steps, batch 8, {len(set(lengths))} distinct lengths in 100-130")
    rows = {
        "fixed length 128, compiled": ([128] * args.steps, "default", None),
        "variable, compiled dynamic=True": (lengths, "dynamic", None),
        "variable, dynamic=True, limit 64": (lengths, "dynamic", 64),
        "variable, compiled (dynamo default)": (lengths, "default", None),
        "variable, per-op eager": (lengths, None, None),
    }
    print(f"{'variant':<38} {'total s':>8} {'ms/step':>8} {'programs':>9} {'limit hit':>10}")
    for name, (ls, mode, limit) in rows.items():
        seconds, built, limited = _loop(ls, mode, limit)
        print(f"{name:<38} {seconds:>8.2f} {seconds / len(ls) * 1e3:>8.1f} {built:>9} {'yes' if limited else 'no':>10}")


if __name__ == "__main__":
    main()
