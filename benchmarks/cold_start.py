"""Cold start: the first training step of the tests' models in a new process, with an empty persistent
compilation cache and then with the cache the first process left, against the same step on torch CPU
in the same process.

Each measurement is a fresh Python process (what a user's new script pays): it imports torch and
jaxdev, builds the model (tests/models.py), and times one step (forward, backward, gradient clipping,
Adam) on jax, then the same step on CPU. The first Adam of a process imports torch._dynamo (~1.2 s, CPU
or not); that import is made before either timing.

A warm cache still pays JAX's tracing and lowering of every kernel (the cache key is the lowered
module): for the transformer's 287 kernels, 0.26 s tracing + 1.1 s lowering + 0.3 s loading executables.

    python benchmarks/cold_start.py [--families transformer cnn]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

_CHILD = """
import sys, time
sys.path.insert(0, {tests!r})
import torch, jaxdev
from models import twin, train
torch.optim.Adam([torch.zeros(1, requires_grad=True)])  # imports torch._dynamo (1.2 s), paid by CPU users too
cpu, dev = twin({family!r})
t0 = time.perf_counter(); train(dev, {family!r}, "jax", steps=1); first = time.perf_counter() - t0
t0 = time.perf_counter(); train(dev, {family!r}, "jax", steps=1); second = time.perf_counter() - t0
t0 = time.perf_counter(); train(cpu, {family!r}, "cpu", steps=1); ref = time.perf_counter() - t0
print(first, second, ref)
"""


def step_times(family: str, cache: str) -> tuple[float, float, float]:
    code = _CHILD.format(tests=os.path.join(ROOT, "tests"), family=family)
    env = dict(os.environ, JAXDEV_CACHE_DIR=cache)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=ROOT, check=True)
    first, second, ref = (float(v) for v in out.stdout.split()[-3:])
    return first, second, ref


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--families", nargs="+", default=["transformer", "cnn", "mlp"])
    args = parser.parse_args()
    print(f"{'model':<12} {'cache':<6} {'first step s':>13} {'next step s':>12} {'CPU step s':>11} {'first / CPU':>12}")
    for family in args.families:
        with tempfile.TemporaryDirectory(prefix="jaxdev-cold-") as cache:
            for label in ("empty", "warm"):
                first, second, ref = step_times(family, cache)
                print(f"{family:<12} {label:<6} {first:>13.2f} {second:>12.3f} {ref:>11.3f} {first / ref:>12.0f}")


if __name__ == "__main__":
    main()
