"""Fused eager's host time per training step with a single-tensor optimizer (foreach=False), its step
sizes lifted into program data (jaxdev/fused/numbers.py) and kept in the key as before that (each step's
new Adam step sizes then met the storm guard: new programs every step, the changing ops run eagerly),
interleaved round by round in one process; a foreach optimizer for reference.

Each variant has its own model, optimizer and recorder trie (so neither replays the other's programs);
"keyed" takes the single-tensor ops out of registry.DYNAMIC_NUMBERS while it runs. Host time is the
main thread's CPU time (time.thread_time: the machine's other load and XLA's own threads stay out);
wall time and the programs built while measured are printed beside it.

    python benchmarks/fused_numbers.py [--tensors 50] [--width 16] [--rounds 7] [--steps 10] [--optimizer adam]
"""

from __future__ import annotations

import argparse
import statistics
import time
import warnings

import jax
import torch
from timing import ALLOCATOR
from torch import nn

import jaxdev
from jaxdev.fused import recorder
from jaxdev.ops.registry import DYNAMIC_NUMBERS

STATS = recorder.STATS
SINGLE = {op: w for op, w in DYNAMIC_NUMBERS.items() if not op.name().startswith("aten::_foreach")}
OPTIMIZERS = {
    "adam": torch.optim.Adam,
    "adamw": torch.optim.AdamW,
    "nadam": torch.optim.NAdam,
    "radam": torch.optim.RAdam,
    "adamax": torch.optim.Adamax,
}


class Variant:
    """A model with `tensors` parameters, its optimizer, and the recorder trie its steps take."""

    def __init__(self, name: str, lifted: bool, foreach: bool, args):
        self.name, self.lifted, self.trie = name, lifted, recorder.Trie()
        torch.manual_seed(0)
        layers = [nn.Linear(args.width, args.width) for _ in range(args.tensors // 2)]
        self.model = nn.Sequential(*[m for layer in layers for m in (layer, nn.Tanh())]).to("jax")
        self.x = torch.randn(4, args.width).to("jax")
        self.opt = OPTIMIZERS[args.optimizer](self.model.parameters(), lr=1e-3, foreach=foreach)

    def use(self) -> None:
        recorder.ROOT = self.trie
        recorder.flush()  # the next segment starts at this variant's root
        for op, where in SINGLE.items():
            if self.lifted:
                DYNAMIC_NUMBERS[op] = where
            else:
                DYNAMIC_NUMBERS.pop(op, None)

    def step(self) -> None:
        self.opt.zero_grad(set_to_none=True)
        self.model(self.x).square().mean().backward()
        self.opt.step()  # ends with a flush

    def measure(self, steps: int) -> tuple[float, float, int, int]:
        """ms of main-thread CPU and of wall time per step, programs built, ops run eagerly."""
        self.use()
        built, eager = STATS.programs, sum(STATS.eager.values())
        t0, w0 = time.thread_time(), time.perf_counter()
        for _ in range(steps):
            self.step()
        cpu, wall = time.thread_time() - t0, time.perf_counter() - w0
        jax.block_until_ready([jaxdev.tensor.read(p) for p in self.model.parameters()])
        return cpu / steps * 1e3, wall / steps * 1e3, STATS.programs - built, sum(STATS.eager.values()) - eager


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tensors", type=int, default=50)
    parser.add_argument("--width", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--optimizer", choices=sorted(OPTIMIZERS), default="adam")
    args = parser.parse_args()
    print(f"jax {jax.__version__} on {jax.devices()[0].platform}; torch {torch.__version__}; {ALLOCATOR}")
    variants = [
        Variant("lifted", True, False, args),
        Variant("keyed (before)", False, False, args),
        Variant("foreach", True, True, args),
    ]
    warnings.simplefilter("ignore")  # the storm guard's note, in the keyed variant
    times = {v.name: ([], [], [], []) for v in variants}
    with jaxdev.eager_mode("fused"):
        for v in variants:  # the first steps build their programs
            v.use()
            for _ in range(3):
                v.step()
        for _ in range(args.rounds):
            for v in variants:
                for column, value in zip(times[v.name], v.measure(args.steps)):
                    column.append(value)
        variants[0].use()
    n = sum(p.numel() > 0 for p in variants[0].model.parameters())
    print(f"\n{args.optimizer}, {n} tensors of width {args.width}, {args.rounds} rounds of {args.steps} steps")
    print(f"{'per step':<16} {'cpu ms':>8} {'wall ms':>8} {'programs':>9} {'eager ops':>10}")
    for name, (cpu, wall, built, eager) in times.items():
        steps = args.rounds * args.steps
        cpu, wall = statistics.median(cpu), statistics.median(wall)
        print(f"{name:<16} {cpu:>8.2f} {wall:>8.2f} {sum(built) / steps:>9.2f} {sum(eager) / steps:>10.1f}")


if __name__ == "__main__":
    main()
