"""One data-parallel training step of a 784-512-512-10 MLP (batch 256, SGD) on one device and over
a mesh of 8 virtual CPU devices (`--xla_force_host_platform_device_count=8`, set here), eager and
compiled (`torch.compile(backend="jax")`). Prints the median step time of each and the ratio.

On a CPU the 8 "devices" share the same cores, so expect no speedup: the numbers show what the
mesh route costs (sharded programs, all-reduces of the gradients) on top of one device.

    python benchmarks/mesh_step.py [--steps 20] [--devices 8]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--devices", type=int, default=8)
    args = parser.parse_args()
    if "jax" in sys.modules:
        raise SystemExit("run this as a script: XLA's device count is fixed when jax starts")
    os.environ["XLA_FLAGS"] = (
        os.environ.get("XLA_FLAGS", "") + f" --xla_force_host_platform_device_count={args.devices}"
    ).strip()

    import jax
    import torch
    from jax.sharding import PartitionSpec as P
    from torch import nn

    import jaxdev

    batch, sizes = 256, (784, 512, 512, 10)

    def step_fn(n_devices: int, compiled: bool):
        torch.manual_seed(0)
        layers = []
        for a, b in zip(sizes, sizes[1:]):
            layers += [nn.Linear(a, b), nn.ReLU()]
        model = nn.Sequential(*layers[:-1]).to("jax")
        jaxdev.set_mesh({"data": n_devices} if n_devices > 1 else None)
        x = torch.randn(batch, sizes[0]).to("jax")
        y = torch.randint(0, sizes[-1], (batch,)).to("jax")
        if n_devices > 1:
            jaxdev.distribute(model)  # replicated parameters
            jaxdev.shard(x, P("data"))
            jaxdev.shard(y, P("data"))
        opt = torch.optim.SGD(model.parameters(), lr=1e-2, momentum=0.9)

        def step():
            opt.zero_grad(set_to_none=True)
            loss = nn.functional.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            return loss

        return torch.compile(step, backend="jax") if compiled else step

    def median_time(step) -> tuple[float, float]:
        began = time.perf_counter()
        step().item()  # first step: traces and compiles
        first = time.perf_counter() - began
        times = []
        for _ in range(args.steps):
            began = time.perf_counter()
            step().item()
            times.append(time.perf_counter() - began)
        return first, statistics.median(times)

    print(f"jax devices: {jax.device_count()} ({jax.devices()[0].platform}), batch {batch}, MLP {sizes}")
    for compiled in (False, True):
        mode = "compiled" if compiled else "eager"
        results = {}
        for n in (1, args.devices):
            first, median = median_time(step_fn(n, compiled))
            results[n] = median
            print(f"{mode:8s} {n} device(s): step {median * 1e3:8.2f} ms (first step {first:.2f} s)")
        jaxdev.set_mesh(None)
        print(f"{mode:8s} {args.devices} devices / 1 device: {results[args.devices] / results[1]:.2f}x")


if __name__ == "__main__":
    main()
