"""Per-op eager at XLA's default compile effort against JAXDEV_COMPILE_EFFORT=low: the cold first training
step's seconds, and whether every result keeps its bits (issue 37 item 5: lower compile effort only where
results stay bit-identical).

Each setting runs in its own fresh process (one at a time: one process holds a TPU), over its own empty
cache folder, and writes what it computed; this process compares them bit for bit:
* lm: benchmarks/tpu_gpt.py's GPT, one AdamW training step in per-op eager (bfloat16 by default): the
  first step's seconds and XLA's compile seconds in it, the loss and every parameter after the step;
* ops: the forward of PyTorch's OpInfo samples (the first `--samples` of each, float32 and bfloat16)
  of the ops named (default: those a Transformer's step runs, plus common pointwise and reductions),
  made on CPU with a fixed seed and moved to the device, results read back as bytes.
On XLA's CPU backend the option changes nothing (the same optimized program): there the check says 0
differences, as it must; the chip is where it means something.

    python benchmarks/tpu_effort_check.py [--size quick] [--dtype bf16] [--samples 2] [--ops add,mm,...]

On the chip (2026-12-07, main d6a9523) `--size full --timeout 120` ran out: the default setting's per-op
first step of the full LM took over 120 s (66 s at 76eccd4, before the CPU-bit corrections), so the
check never compared; a child past --timeout is now reported as failed, not a traceback. One call's
worth there: `--size quick --timeout 200`, or `--parts ops`.
"""

from __future__ import annotations

import argparse
import os
import pickle
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

OPS = [
    "add",
    "mul",
    "sub",
    "div",
    "addmm",
    "mm",
    "bmm",
    "matmul",
    "linear",
    "baddbmm",
    "softmax",
    "log_softmax",
    "nn.functional.cross_entropy",
    "nn.functional.gelu",
    "nn.functional.silu",
    "nn.functional.relu",
    "tanh",
    "exp",
    "log",
    "sigmoid",
    "rsqrt",
    "sqrt",
    "pow",
    "nn.functional.layer_norm",
    "nn.functional.embedding",
    "nn.functional.dropout",
    "mean",
    "sum",
    "var",
    "amax",
    "nn.functional.scaled_dot_product_attention",
    "transpose",
    "reshape",
    "cat",
    "where",
    "masked_fill",
    "tril",
    "index_select",
    "cumsum",
    "sort",
    "topk",
    "argmax",
    "clamp",
    "erf",
    "nn.functional.normalize",
]
SETTINGS = ("default", "low")


def _bytes(t) -> bytes:
    import torch

    t = t.detach().cpu().contiguous().reshape(-1)  # 0-d: viewed as bytes only with a dimension
    return bytes(t.view(torch.uint8).numpy()) if t.numel() else b""


def _outputs(value) -> list:
    import torch

    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        return [t for v in value for t in _outputs(v)]
    return []


def child_lm(size: str, dtype_name: str) -> dict:
    import jax
    import torch
    import tpu_gpt
    import tpu_measure as tm

    import jaxdev

    cfg = tpu_gpt.Config(size)
    dtype = {"bf16": torch.bfloat16, "f32": torch.float32}[dtype_name]
    model = tpu_gpt.torch_model(cfg, dtype).to("jax")
    x, y, _ = (torch.from_numpy(a).to("jax") for a in tpu_gpt.numpy_batch(cfg))
    opt = tpu_gpt.make_adamw(model.parameters())
    xla0 = tm.Compiles.seconds
    t0 = time.perf_counter()
    with jaxdev.eager_mode("op"):
        loss = tpu_gpt.loss_fn(model(x), y)
        loss.backward()
        opt.step()
        jax.block_until_ready(jaxdev.tensor.read(next(iter(model.parameters()))))
    first = time.perf_counter() - t0
    bits = {"loss": _bytes(loss)} | {n: _bytes(p) for n, p in model.named_parameters()}
    return {"first_s": first, "xla_s": tm.Compiles.seconds - xla0, "bits": bits}


def child_ops(names: list[str], samples: int) -> dict:
    import torch
    import tpu_measure as tm
    from torch.testing._internal.common_methods_invocations import op_db

    import jaxdev

    by_name = {o.name if not o.variant_test_name else f"{o.name}.{o.variant_test_name}": o for o in op_db}
    bits, errors, xla0, t0 = {}, {}, tm.Compiles.seconds, time.perf_counter()
    for name in names:
        info = by_name.get(name)
        for dtype in (torch.float32, torch.bfloat16):
            if info is None or dtype not in info.supported_dtypes("cpu"):
                continue
            torch.manual_seed(0)
            for k, s in enumerate(info.sample_inputs("cpu", dtype)):
                if k >= samples:
                    break
                key = f"{name} {str(dtype)[6:]} {k}"
                s = s.transform(lambda t: t.to("jax") if isinstance(t, torch.Tensor) else t)
                try:
                    with jaxdev.eager_mode("op"):
                        bits[key] = [_bytes(t) for t in _outputs(info.op(s.input, *s.args, **s.kwargs))]
                except Exception as e:  # noted, compared as a result: both settings should fail alike
                    errors[key] = f"{type(e).__name__}: {str(e).splitlines()[0][:120]}"
    return {"seconds": time.perf_counter() - t0, "xla_s": tm.Compiles.seconds - xla0, "bits": bits, "errors": errors}


def run_child(setting: str, args) -> dict:
    out = tempfile.mktemp(suffix=".pkl")
    env = dict(os.environ, JAXDEV_COMPILE_EFFORT=setting, JAXDEV_CACHE_DIR=tempfile.mkdtemp(prefix="effort-"))
    command = [sys.executable, os.path.abspath(__file__), "--child", setting, "--result", out]
    command += ["--size", args.size, "--dtype", args.dtype, "--samples", str(args.samples), "--ops", ",".join(args.ops)]
    command += ["--parts", ",".join(args.parts)]
    try:
        done = subprocess.run(command, env=env, timeout=args.timeout)
    except subprocess.TimeoutExpired:  # said in the report, and the other setting still runs
        return {"failed": f"past --timeout {args.timeout:.0f} s"}
    if done.returncode != 0 or not os.path.exists(out):
        return {"failed": f"exit {done.returncode}"}
    with open(out, "rb") as f:
        return pickle.load(f)


def _differing(a: dict, b: dict) -> list[str]:
    return sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))


def report(results: dict) -> None:
    d, low = results["default"], results["low"]
    if "failed" in d or "failed" in low:
        print(f"a child failed: default {d.get('failed', 'ok')}, low {low.get('failed', 'ok')}")
        return
    if "lm" in d:
        print(
            f"LM per-op first step: default {d['lm']['first_s']:.1f} s (XLA {d['lm']['xla_s']:.1f}), low effort "
            f"{low['lm']['first_s']:.1f} s (XLA {low['lm']['xla_s']:.1f})"
        )
        diff = _differing(d["lm"]["bits"], low["lm"]["bits"])
        print(f"  loss and {len(d['lm']['bits']) - 1} parameters after the step: {len(diff)} differ in bits {diff[:8]}")
    if "ops" in d:
        print(
            f"OpInfo samples: default {d['ops']['seconds']:.1f} s (XLA {d['ops']['xla_s']:.1f}), low effort "
            f"{low['ops']['seconds']:.1f} s (XLA {low['ops']['xla_s']:.1f})"
        )
        diff = _differing(d["ops"]["bits"], low["ops"]["bits"])
        errors = _differing(d["ops"]["errors"], low["ops"]["errors"])
        print(f"  {len(d['ops']['bits'])} samples compared: {len(diff)} differ in bits, {len(errors)} in errors")
        for k in diff + errors:
            print(f"    {k}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", default="quick", choices=("quick", "full"))
    parser.add_argument("--dtype", default="bf16", choices=("bf16", "f32"))
    parser.add_argument("--samples", type=int, default=2)
    parser.add_argument("--ops", default=",".join(OPS), type=lambda s: [o for o in s.split(",") if o])
    parser.add_argument("--parts", default="lm,ops", type=lambda s: [p for p in s.split(",") if p])
    parser.add_argument("--timeout", type=float, default=280, help="seconds a child may take")
    parser.add_argument("--child", choices=SETTINGS)
    parser.add_argument("--result")
    args = parser.parse_args()
    if args.child:
        result = {}
        if "lm" in args.parts:
            result["lm"] = child_lm(args.size, args.dtype)
        if "ops" in args.parts:
            result["ops"] = child_ops(args.ops, args.samples)
        with open(args.result, "wb") as f:
            pickle.dump(result, f)
        return
    report({s: run_child(s, args) for s in SETTINGS})


if __name__ == "__main__":
    main()
