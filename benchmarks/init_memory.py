"""Peak memory of initialising a large weight on the jax device, as a multiple of the weight's size.

Each case runs in a fresh process: `torch.empty(n, n, device="jax")` then the fill (nn.init's
kaiming_uniform_, normal_, uniform_, nn.Linear(n, n), torch.randn), then torch.jax.synchronize().

How it is measured: on a GPU or TPU, XLA's allocator statistics (torch.jax.max_memory_allocated after
reset_peak_memory_stats). JAX's CPU device keeps none, and jax.live_arrays() sees arrays, not a
program's scratch, so there the measure is the process's resident memory: Linux's RSS high-water mark
(VmHWM, reset by writing 5 to /proc/self/clear_refs just before) minus the resident memory at that
moment, after a tiny op that initialises the device. It counts everything the process touched
meanwhile: the weight, the draw and its scratch, what XLA keeps of a program's scratch after it ran,
and compiling the fill's programs (from JAX's persistent cache when it is warm). In one process,
measurements after a first fill are not comparable: XLA's CPU runtime releases some scratch only when a
later program runs, so the resident memory before a second fill already holds some of the first's.

    python benchmarks/init_memory.py [--size 8192] [--cases kaiming,normal,uniform,linear,randn]
"""

from __future__ import annotations

import argparse
import math
import subprocess
import sys
import time

FILLS = {
    "kaiming": "nn.init.kaiming_uniform_(torch.empty(n, n, device='jax'), a=math.sqrt(5))",
    "normal": "torch.empty(n, n, device='jax').normal_()",
    "uniform": "torch.empty(n, n, device='jax').uniform_()",
    "linear": "nn.Linear(n, n, device='jax').weight",
    "randn": "torch.randn(n, n, device='jax')",
}


def _resident() -> dict[str, int]:
    with open("/proc/self/status") as f:
        fields = dict(line.split(":", 1) for line in f if ":" in line)
    return {k: int(fields[k].split()[0]) * 1024 for k in ("VmRSS", "VmHWM")}


def one(case: str, n: int) -> None:
    """Runs in the fresh process: prints the peak and what stays held, as multiples of n*n*4 bytes."""
    import torch
    from torch import nn

    import jaxdev  # noqa: F401

    size = n * n * 4
    torch.ones(4, device="jax").sum().item()
    stats = torch.jax.memory_stats()
    on_xla = "xla.peak_bytes_in_use" in stats
    if on_xla:
        torch.jax.reset_peak_memory_stats()
        base = torch.jax.memory_allocated()
    else:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        base = _resident()["VmRSS"]
    start = time.perf_counter()
    w = eval(FILLS[case], {"torch": torch, "nn": nn, "math": math, "n": n})
    torch.jax.synchronize()
    seconds = time.perf_counter() - start
    if on_xla:
        peak, held, how = torch.jax.max_memory_allocated() - base, torch.jax.memory_allocated() - base, "XLA"
    else:
        r = _resident()
        peak, held, how = r["VmHWM"] - base, r["VmRSS"] - base, "RSS"
    assert w.shape == (n, n)
    print(f"{case:<8} {peak / size:>6.2f}x {held / size:>6.2f}x {seconds:>7.2f} s  ({how})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=8192)
    parser.add_argument("--cases", default=",".join(FILLS))
    parser.add_argument("--one", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        one(args.one, args.size)
        return
    print(
        f"{args.size}x{args.size} float32 ({args.size * args.size * 4 / 2**20:.0f} MiB); each case in a fresh process"
    )
    print(f"{'case':<8} {'peak':>7} {'held':>7} {'time':>9}")
    for case in args.cases.split(","):
        done = subprocess.run(
            [sys.executable, __file__, "--one", case, "--size", str(args.size)], capture_output=True, text=True
        )
        print(done.stdout.strip() if done.returncode == 0 else f"{case}: failed: {done.stderr.strip()[-300:]}")


if __name__ == "__main__":
    main()
