"""torch CUDA eager's own training steps, the reference rows of accelerator_check.py and fused_step.py.

Run in a process of its own: PyTorch's autograd engine serves one accelerator per process, and once
jaxdev registers `jax` a CUDA backward cannot run (jaxdev/capabilities/accelerators.py). So jaxdev is not imported
here: compile_step's `import jaxdev` gets an empty stand-in, and only its torch models are used.

    python benchmarks/cuda_reference.py [--steps 8]     # prints one "name ms_per_step first_s" line per row
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import types

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.modules.setdefault("jaxdev", types.ModuleType("jaxdev"))  # compile_step imports it; nothing here uses it

import compile_step  # noqa: E402
import torch  # noqa: E402


def _step(build, autocast: bool):
    torch.manual_seed(0)
    model, (x, y), make_opt, loss_fn = build()
    model, x, y = model.to("cuda"), x.to("cuda"), y.to("cuda")
    opt = make_opt(model.parameters())

    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=autocast):
            loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        torch.cuda.synchronize()

    return step


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=8)
    args = parser.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("cuda_reference.py: torch has no CUDA device here")
    rows = [("MLP float32", compile_step.torch_mlp, False), ("LM float32", compile_step.torch_lm, False)]
    rows.append(("LM bf16 autocast", compile_step.torch_lm, True))
    for name, build, autocast in rows:
        step = _step(build, autocast)
        t0 = time.perf_counter()
        step()
        first = time.perf_counter() - t0
        step()
        t0 = time.perf_counter()
        for _ in range(args.steps):
            step()
        print(f"{name}\t{(time.perf_counter() - t0) / args.steps * 1e3:.3f}\t{first:.3f}", flush=True)


if __name__ == "__main__":
    main()
