"""The most common way people use torch.compile, jaxdev against inductor on this CPU (issue 37 item 2).

`model = torch.compile(model)`, the optimizer left eager (SGD with momentum), and a `loss.item()` per
step: what a tutorial writes. jaxdev runs `backend="jax"` on jax tensors, inductor runs on CPU tensors;
both sides train the same models from the same weights, interleaved round by round in one process, and
the table gives each side's median ms per step and jaxdev / inductor. Two models (issue 37's):

* MLP 784-512-512-10, batch 128;
* a 2-layer `nn.TransformerEncoder` language model (benchmarks/compile_step.py's LM).

It also splits jaxdev's step into its phases (zero_grad with the compiled forward+backward, the eager
optimizer step, `.item()`), each timed to where its results exist, so the overhead has an address.

    python benchmarks/compile_usage.py [--rounds 5] [--steps 5] [--only mlp|lm]
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

import quiet
import torch
from compile_step import torch_lm, torch_mlp
from timing import ALLOCATOR

import jaxdev


def _sgd(params):
    return torch.optim.SGD(params, lr=1e-2, momentum=0.9)


def usage_step(build, device: str, backend: str):
    """One training step as a tutorial writes it: the module compiled, the optimizer eager."""
    torch.manual_seed(0)
    model, (x, y), _, loss_fn = build()
    model, x, y = model.to(device), x.to(device), y.to(device)
    opt = _sgd(model.parameters())
    compiled = torch.compile(model, backend=backend)

    def step():
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(compiled(x), y)
        loss.backward()
        opt.step()
        return loss.item()

    return quiet.quietly(step, warnings_too=backend != "jax")


def _median_ms(times):
    return 1e3 * statistics.median(times)


def compare(name, build, rounds: int, steps: int) -> None:
    sides = {"jaxdev": usage_step(build, "jax", "jax"), "inductor": usage_step(build, "cpu", "inductor")}
    first = {}
    for label, step in sides.items():
        t0 = time.perf_counter()
        step(), step()  # compile, then settle (the first optimizer step makes the momentum buffers)
        first[label] = time.perf_counter() - t0
    times = {label: [] for label in sides}
    for _ in range(rounds):
        for label, step in sides.items():
            t0 = time.perf_counter()
            for _ in range(steps):
                step()
            times[label].append((time.perf_counter() - t0) / steps)
    jd, ind = _median_ms(times["jaxdev"]), _median_ms(times["inductor"])
    print(
        f"{name:<6} {jd:>9.2f} {ind:>9.2f} {jd / ind:>6.2f}x   first two steps {first['jaxdev']:.1f} s / {first['inductor']:.1f} s"
    )
    _print_phases(build)


def _print_phases(build) -> None:
    """jaxdev's step split into forward+backward (with zero_grad), optimizer, `.item()`: medians."""
    torch.manual_seed(0)
    model, (x, y), _, loss_fn = build()
    model, x, y = model.to("jax"), x.to("jax"), y.to("jax")
    opt = _sgd(model.parameters())
    compiled = torch.compile(model, backend="jax")
    split = {"fwd+bwd": [], "optimizer": [], "item": []}
    for i in range(12):
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(compiled(x), y)
        loss.backward()
        torch.jax.synchronize()
        t1 = time.perf_counter()
        opt.step()
        torch.jax.synchronize()
        t2 = time.perf_counter()
        loss.item()
        t3 = time.perf_counter()
        if i >= 2:
            for key, seconds in zip(split, (t1 - t0, t2 - t1, t3 - t2)):
                split[key].append(seconds)
    print("       jaxdev phases (synced, ms): " + ", ".join(f"{k} {_median_ms(v):.2f}" for k, v in split.items()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--only", choices=("mlp", "lm"))
    args = parser.parse_args()
    print(f"torch {torch.__version__}, jaxdev eager mode {jaxdev.get_eager_mode()}; {ALLOCATOR}")
    print(f"{'model':<6} {'jaxdev':>9} {'inductor':>9} {'ratio':>7}  (ms per step, medians of {args.rounds} rounds)")
    for name, build in (("mlp", torch_mlp), ("lm", torch_lm)):
        if args.only in (None, name):
            compare(name, build, args.rounds, args.steps)


if __name__ == "__main__":
    main()
