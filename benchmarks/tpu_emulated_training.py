"""Training fidelity under the emulated chip, per JAXDEV_MATH setting: does taking the platform's
arithmetic (near) rather than CPU's bits (auto) change what a model learns?

benchmarks/tpu_gpt.py's LM (quick size: 2 layers, d 64), AdamW steps in per-op eager on the jax device
under tests/tpu_emulation.py's chip (its program facts and jaxdev's own functions, its division 2-4 ulps
off and 200 past float32's limits, its sqrt 2 ulps off), once with auto's corrections and once with near's
arithmetic (math_mode.platform_arithmetic forced: on XLA's CPU backend near alone is auto), against the
same steps in CPU PyTorch; and the same steps on the plain jax device (this CPU's programs) for scale.
Printed per run: the largest difference of a step's loss from CPU's and the parameters' largest difference
relative to their largest magnitude after the last step. The missing FMA of a TPU is not emulated here
(XLA_FLAGS=--xla_cpu_max_isa=AVX does that, for the whole process).

    python benchmarks/tpu_emulated_training.py [--steps 30] [--dtype f32|bf16]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from unittest import mock

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.join(os.path.dirname(HERE), "tests")]

import numpy as np  # noqa: E402
import torch  # noqa: E402
import tpu_emulation  # noqa: E402  (tests/tpu_emulation.py)
import tpu_gpt  # noqa: E402

import jaxdev  # noqa: E402
from jaxdev.ops.kit import math_mode  # noqa: E402


def train(device: str, cfg, dtype, steps: int):
    torch.manual_seed(0)
    model = tpu_gpt.torch_model(cfg, dtype).to(device)
    opt = tpu_gpt.make_adamw(model.parameters())
    x, y, _ = (torch.from_numpy(a).to(device) for a in tpu_gpt.numpy_batch(cfg))
    losses = []
    for _ in range(steps):
        opt.zero_grad(set_to_none=True)
        loss = tpu_gpt.loss_fn(model(x), y)
        loss.backward()
        opt.step()
        losses.append(float(loss.detach().float().cpu()))
    return np.array(losses), torch.cat([p.detach().float().cpu().flatten() for p in model.parameters()])


def emulated(near: bool):
    stack = contextlib.ExitStack()
    for context in (tpu_emulation.policy(), tpu_emulation.division(), tpu_emulation.sqrt()):
        stack.enter_context(context)
    if near:
        stack.enter_context(mock.patch.object(math_mode, "platform_arithmetic", lambda: True))
    return stack


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--dtype", choices=("f32", "bf16"), default="f32")
    args = parser.parse_args()
    dtype = {"f32": torch.float32, "bf16": torch.bfloat16}[args.dtype]
    cfg = tpu_gpt.Config("quick")
    jaxdev.eager_mode("op")
    ref_loss, ref_w = train("cpu", cfg, dtype, args.steps)
    runs = {
        "emulated chip, auto": lambda: emulated(False),
        "emulated chip, near": lambda: emulated(True),
        "plain jax device": contextlib.nullcontext,
    }
    print(f"LM quick, {args.dtype}, {args.steps} AdamW steps against CPU PyTorch (final loss {ref_loss[-1]:.6f})")
    for label, context in runs.items():
        with context():
            loss, w = train("jax", cfg, dtype, args.steps)
        rel = float((w - ref_w).abs().max() / ref_w.abs().max())
        print(f"  {label:22s} loss max |diff| {np.abs(loss - ref_loss).max():.2e}, weights max rel diff {rel:.2e}")


if __name__ == "__main__":
    main()
