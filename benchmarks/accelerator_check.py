"""Issue 8's accelerator proof in one run: product throughput and a language model's training step,
jaxdev against `jax.jit` and against torch's own accelerator (CUDA) when there is one.

* Matrix products: bfloat16, and float32 at "highest" and "high" (`torch.set_float32_matmul_precision`),
  `a @ b` of size x size through jaxdev against `jax.jit(jnp.matmul)` at the same precision, and torch
  CUDA where available: TFLOP/s and ratios. The target is jaxdev at >= 0.95x `jax.jit`.
* Writes in place (benchmarks/inplace.py's cases: a 32 MiB KV cache's position, `x[:, 1:] = r`,
  `x.add_(y)`, `x.lerp_`): jaxdev, whose writes donate the storage's buffer, against `jax.jit` with
  the input donated: microseconds and ratios.
* An AdamW step over 100 tensors (benchmarks/optimizer_step.py): jaxdev's foreach ops (one program
  per call) and per-tensor ops, against the whole update in one `jax.jit` and torch CUDA's foreach.
* The Transformer LM of benchmarks/compile_step.py: one training step (forward, backward, AdamW) in
  float32 and under bfloat16 autocast, eager (per-op and fused) and through `torch.compile(backend="jax")`, against torch
  CUDA eager: ms per step and ratios.

Made to be run once where a device is lent: put the checkout on PYTHONPATH (jaxdev's native fast paths
build on first import; about 10 s with a C++ compiler, else jaxdev warns and runs in Python) and run

    python benchmarks/accelerator_check.py                 # size 8192 on an accelerator
    python benchmarks/accelerator_check.py --size 512 --steps 2    # a quick try on CPU

Every section prints as it finishes, so a run cut short still reports what it measured.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
import traceback

os.environ.setdefault("JAXDEV_FALLBACK", "warn")

import inplace
import jax
import jax.numpy as jnp
import optimizer_step
import torch
from compile_step import torch_lm
from timing import ALLOCATOR, median_seconds

import jaxdev

ON_CUDA = torch.cuda.is_available()


def _sync_jax(r):
    # tensor.read, not jaxdev.to_jax: an array handed out is never donated to a later write.
    jax.block_until_ready(jaxdev.tensor.read(r) if isinstance(r, torch.Tensor) and r.device.type == "jax" else r)


def products(n: int, repeat: int) -> None:
    print(f"\nmatrix products {n}x{n} (TFLOP/s; ratio = jaxdev / other)")
    print(f"{'dtype':<18} {'jaxdev':>8} {'jax.jit':>8} {'ratio':>6} {'torch CUDA':>10} {'ratio':>6}")
    cases = [("bfloat16", torch.bfloat16, "highest"), ("float32 highest", torch.float32, "highest")]
    cases.append(("float32 high", torch.float32, "high"))
    for name, dtype, setting in cases:
        torch.set_float32_matmul_precision(setting)
        try:
            print(f"{name:<18} {_product_row(n, dtype, setting, repeat)}", flush=True)
        finally:
            torch.set_float32_matmul_precision("highest")


def _product_row(n: int, dtype: torch.dtype, setting: str, repeat: int) -> str:
    flop = 2 * n**3
    a = torch.randn(n, n, dtype=dtype, device="jax")
    b = torch.randn(n, n, dtype=dtype, device="jax")
    ja, jb = jaxdev.to_jax(a), jaxdev.to_jax(b)
    precision = {"highest": jax.lax.Precision.HIGHEST, "high": jax.lax.Precision.HIGH}[setting]
    if dtype is torch.bfloat16:  # CUDA's contract: bf16 operands, float32 accumulation, rounded once
        ref = jax.jit(lambda x, y: jnp.matmul(x, y, preferred_element_type=jnp.float32).astype(x.dtype))
    else:
        ref = jax.jit(lambda x, y: jnp.matmul(x, y, precision=precision))
    dev_s = median_seconds(lambda: a @ b, _sync_jax, repeat)
    ref_s = median_seconds(lambda: ref(ja, jb), jax.block_until_ready, repeat)
    line = f"{flop / dev_s / 1e12:>8.2f} {flop / ref_s / 1e12:>8.2f} {ref_s / dev_s:>6.2f}"
    if ON_CUDA:
        ca, cb = a.cpu().cuda(), b.cpu().cuda()
        cuda_s = median_seconds(lambda: ca @ cb, lambda _: torch.cuda.synchronize(), repeat)
        line += f" {flop / cuda_s / 1e12:>10.2f} {cuda_s / dev_s:>6.2f}"
    return line


def _lm_step(device: str, mode: str, autocast: bool):
    """mode: "eager" (per-op), "fused" (jaxdev.eager_mode("fused")), "compiled", or "compiled+fused" (the
    compiled step under fused eager: one program per step)."""
    step = _lm_step_of(device, mode.startswith("compiled"), autocast)
    eager = "fused" if "fused" in mode else "op"  # named: an accelerator's default is fused

    def step_in_mode():
        with jaxdev.eager_mode(eager):
            return step()

    return step_in_mode


def _lm_step_of(device: str, compiled: bool, autocast: bool):
    torch.manual_seed(0)
    model, (x, y), make_opt, loss_fn = torch_lm()
    model, x, y = model.to(device), x.to(device), y.to(device)
    opt = make_opt(model.parameters())

    def forward_backward():
        with torch.autocast(device, dtype=torch.bfloat16, enabled=autocast):
            loss = loss_fn(model(x), y)
        loss.backward()
        return loss

    opt_step = opt.step
    if compiled:
        forward_backward = torch.compile(forward_backward, backend="jax")
        opt_step = torch.compile(opt.step, backend="jax")

    def step():
        opt.zero_grad(set_to_none=True)
        loss = forward_backward()
        opt_step()
        return loss

    return step


def _cuda_rows(steps: int) -> dict[str, float]:
    """torch CUDA eager's LM steps (ms), measured in a process without jaxdev (cuda_reference.py)."""
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "cuda_reference.py")
    try:
        done = subprocess.run(
            [sys.executable, script, "--steps", str(steps)], capture_output=True, text=True, timeout=300
        )
    except subprocess.TimeoutExpired:
        return {}
    rows = {}
    for line in done.stdout.splitlines():
        name, ms, first = line.split("\t")
        rows[name] = float(ms)
        print(f"{'torch CUDA eager ' + name:<34} {float(ms):>9.2f} {float(first):>8.2f} {'1.00':>14}", flush=True)
    return rows


def lm(steps: int, modes=("fused", "compiled+fused", "compiled", "eager")) -> None:
    print(f"\nTransformer LM training step (ms, median of {steps}; first step s in brackets)")
    print(f"{'variant':<34} {'ms/step':>9} {'first s':>8} {'vs torch CUDA':>14} {'host ms':>8}")
    cuda = _cuda_rows(steps) if ON_CUDA else {}
    for autocast in (False, True):
        label = "bf16 autocast" if autocast else "float32"
        cuda_ms = cuda.get(f"LM {label}")
        # per-op last: its first step compiles a program per op (80 s on an H200), so a run cut short
        # still has the fused and compiled rows
        for mode in modes:
            name = f"jaxdev {mode} {label}"
            try:
                step = _lm_step("jax", mode, autocast)
                t0 = time.perf_counter()
                _sync_jax(step())
                first = time.perf_counter() - t0
                for _ in range(2 if "fused" in mode else 0):  # fused settles in two steps (its programs cached)
                    _sync_jax(step())
                ms = median_seconds(step, _sync_jax, steps) * 1e3
                host = _host_ms(step, steps)
            except Exception as e:  # report and go on: a cut-short run still says what it measured
                print(f"{name:<34} failed: {type(e).__name__}: {str(e).splitlines()[0][:80]}", flush=True)
                # the whole cause to stderr: a lease is too short to rerun for it
                print("".join(traceback.format_exception(e)[-40:]), file=sys.stderr, flush=True)
                continue
            ratio = f"{ms / cuda_ms:>14.2f}" if cuda_ms else f"{'-':>14}"
            print(f"{name:<34} {ms:>9.2f} {first:>8.2f} {ratio} {host:>8.2f}", flush=True)


def _host_ms(step, steps: int) -> float:
    """Median ms of the step's call alone, its result waited for outside the timing: the host's part
    (dispatch, autograd, recording, guards) when nothing inside the step waits for the device."""
    times = []
    for _ in range(steps):
        t0 = time.perf_counter()
        r = step()
        times.append(time.perf_counter() - t0)
        _sync_jax(r)
    return statistics.median(times) * 1e3


def writes(repeat: int) -> None:
    print("\nwrites in place (us; ratio = jaxdev / jax.jit with its input donated)")
    print(f"{'write':<30} {'jaxdev':>9} {'jax.jit':>9} {'ratio':>6}")
    for name, case in inplace.cases().items():
        t_dev, t_ref = inplace.time_write(case, donate=True, repeat=repeat, batches=10)
        print(f"{name:<30} {t_dev * 1e6:>9.1f} {t_ref * 1e6:>9.1f} {t_dev / t_ref:>6.2f}", flush=True)


def optimizer(steps: int) -> None:
    print(f"\nAdamW step over {len(optimizer_step.SHAPES)} tensors (ms; ratio = jaxdev foreach / other)")
    rows = {
        "jaxdev, foreach": lambda: median_seconds(*optimizer_step.torch_step("jax", True), steps),
        "jaxdev, per tensor": lambda: median_seconds(*optimizer_step.torch_step("jax", False), steps),
        "JAX, 1 program": lambda: median_seconds(optimizer_step.jax_step(1), jax.block_until_ready, steps),
    }
    if ON_CUDA:
        rows["torch CUDA, foreach"] = lambda: median_seconds(*optimizer_step.torch_step("cuda", True), steps)
    base = None
    for name, measure in rows.items():
        ms = measure() * 1e3
        base = base or ms
        print(f"{name:<22} {ms:>9.2f} {base / ms:>6.2f}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    accelerated = jax.default_backend() != "cpu"
    parser.add_argument("--size", type=int, default=8192 if accelerated else 1024)
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--skip-lm", action="store_true")
    parser.add_argument("--only-lm", action="store_true", help="the LM rows alone")
    parser.add_argument("--lm-modes", default="fused,compiled+fused,compiled,eager", help="comma-separated")
    args = parser.parse_args()
    print(
        f"jax {jax.__version__} on {jax.devices()[0].device_kind} ({jax.default_backend()}); torch {torch.__version__}"
    )
    print(ALLOCATOR)
    print(f"torch CUDA: {torch.cuda.get_device_name() if ON_CUDA else 'not available'}")
    native = jaxdev.native.module is not None
    print(f"jaxdev native fast paths: {'in use' if native else jaxdev.native.unavailable}", flush=True)
    if not args.only_lm:
        products(args.size, args.repeat)
        writes(10 * args.repeat)
        optimizer(args.steps)
    if not args.skip_lm:
        lm(args.steps, args.lm_modes.split(","))
    print(f"\nCPU fallbacks: {sum(jaxdev.fallback_counts().values())}", file=sys.stdout)


if __name__ == "__main__":
    main()
