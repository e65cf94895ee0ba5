"""Third-party model code on jaxdev as a user runs it: transformers' GPT-2, Llama and BERT, timm's
resnet18 and vit_tiny, torchvision's resnet18 and mobilenet_v3_small, each from a tiny config with
random weights (nothing downloaded), trained for a few AdamW steps on CPU and on `jax` in each mode
(per-op eager, fused eager, `torch.compile(model, backend="jax")`) from the same weights and data.
The table gives each mode's losses and their largest relative difference from CPU's, the largest
relative difference of one tensor of the last step's gradients (2-norms; the worst tensor named), that
of the parameters after the steps (2-norm over all of them), the seconds the run took (compiling
included), the ops that ran on the CPU fallback, and any error in one line. The row "cpu float64"
(under --dtype bfloat16: "cpu float32") is CPU's own run in the wider dtype against CPU's: how far
rounding alone moves that model in these steps, the scale below which a jax row's differences are
float noise (the resnets' BatchNorm over 4 values at their 1x1 last stage amplifies it: at 3 steps
CPU's float32 losses there are percents from float64's).

transformers, timm and torchvision are not jaxdev's dependencies: install them into the venv pinned to
the CPU torch (`pip install "torch==2.13.0" "torchvision==0.28.0" timm transformers`). PyPI's
torchvision 0.28.0 is a CUDA build whose operator library does not load against torch's CPU wheel;
its models need none of it, so a failed operator library is stubbed out (`torchvision_import.py`).

    python benchmarks/third_party_models.py [--steps 3] [--models gpt2,llama] [--modes op,fused]
        [--dtype bfloat16] [--tpu-standin]

`--tpu-standin` reruns the same in a child process that stands in for a TPU v5e
(jaxdev/audit/deviceless.py; libtpu in .libtpu/): kernels take their TPU formulations and every
program is also compiled by XLA's TPU compiler; values still come from the CPU.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import traceback
import warnings
from dataclasses import dataclass, field

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # tiny configs, random weights: nothing to download
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

import torch
from torchvision_import import import_torchvision

MODES = ("op", "fused", "compiled")
BATCH, SEQ, VOCAB, SIDE, CLASSES = 4, 16, 128, 32, 10


# --- models ---------------------------------------------------------------------------------------


def _tokens(generator):
    ids = torch.randint(0, VOCAB, (BATCH, SEQ), generator=generator)
    return {"input_ids": ids, "labels": ids.clone()}


def _images(generator):
    images = torch.randn(BATCH, 3, SIDE, SIDE, generator=generator)
    return {"images": images, "labels": torch.randint(0, CLASSES, (BATCH,), generator=generator)}


def _gpt2():
    from transformers import GPT2Config, GPT2LMHeadModel

    config = GPT2Config(
        vocab_size=VOCAB, n_positions=64, n_embd=64, n_layer=2, n_head=4, resid_pdrop=0.0, embd_pdrop=0.0,
        attn_pdrop=0.0,
    )  # fmt: skip
    return GPT2LMHeadModel(config), _tokens


def _llama():
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        vocab_size=VOCAB, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=64,
    )  # fmt: skip
    return LlamaForCausalLM(config), _tokens


def _bert():
    from transformers import BertConfig, BertForMaskedLM

    config = BertConfig(
        vocab_size=VOCAB, hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128,
        max_position_embeddings=64, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
    )  # fmt: skip
    return BertForMaskedLM(config), _tokens


def _timm(name: str, **kwargs):
    def build():
        import timm

        return timm.create_model(name, pretrained=False, num_classes=CLASSES, **kwargs), _images

    return build


def _torchvision(name: str, **kwargs):
    def build():
        model = getattr(import_torchvision().models, name)(num_classes=CLASSES, **kwargs)
        return model, _images

    return build


MODELS = {
    "gpt2": _gpt2,
    "llama": _llama,
    "bert": _bert,
    "timm_resnet18": _timm("resnet18"),
    "timm_vit_tiny": _timm("vit_tiny_patch16_224", img_size=SIDE, patch_size=8),
    "tv_resnet18": _torchvision("resnet18"),
    "tv_mobilenet_v3_small": _torchvision("mobilenet_v3_small", dropout=0.0),
}


def loss_of(model, batch) -> torch.Tensor:
    if "input_ids" in batch:  # a transformers model computes its own loss from labels
        return model(input_ids=batch["input_ids"], labels=batch["labels"]).loss
    return torch.nn.functional.cross_entropy(model(batch["images"]), batch["labels"])


# --- one run --------------------------------------------------------------------------------------


@dataclass
class Run:
    losses: list = field(default_factory=list)
    grads: dict = field(default_factory=dict)  # name -> last step's gradient, on CPU
    params: dict = field(default_factory=dict)  # name -> value after the steps, on CPU
    fallbacks: dict = field(default_factory=dict)
    seconds: float = 0.0
    error: str | None = None


def one_line(error: BaseException) -> str:
    """The error as the user first sees it: its type and first line, and where in jaxdev it came from
    when it is not one of jaxdev's own sentences."""
    lines = str(error).strip().splitlines() or [""]
    where = [f for f in traceback.extract_tb(error.__traceback__) if "/jaxdev/" in f.filename]
    at = f" [{os.path.relpath(where[-1].filename)}:{where[-1].lineno}]" if where else ""
    return f"{type(error).__name__}: {lines[0][:200]}{at}"


def train(name: str, mode: str, steps: int, dtype: torch.dtype) -> Run:
    """`steps` AdamW steps of model `name` (seed 0) on CPU (mode "cpu") or on jax in `mode`."""
    import jaxdev

    torch.manual_seed(0)
    model, data = MODELS[name]()
    batch = data(torch.Generator().manual_seed(1))
    model = model.to(dtype).train()
    batch = {k: v.to(dtype) if v.is_floating_point() else v for k, v in batch.items()}
    device = "cpu" if mode == "cpu" else "jax"
    model, batch = model.to(device), {k: v.to(device) for k, v in batch.items()}
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    forward = torch.compile(model, backend="jax") if mode == "compiled" else model
    run = Run()
    jaxdev.reset_fallback_counts()
    start = time.perf_counter()
    try:
        with jaxdev.eager_mode("fused" if mode == "fused" else "op"), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for _ in range(steps):
                opt.zero_grad(set_to_none=True)
                loss = loss_of(forward, batch)
                loss.backward()
                opt.step()
                run.losses.append(loss.item())
        run.grads = {n: p.grad.detach().float().cpu() for n, p in model.named_parameters() if p.grad is not None}
        run.params = {n: p.detach().float().cpu() for n, p in model.named_parameters()}
    except Exception as error:  # a row of the table, not the end of the benchmark
        run.error = one_line(error)
    run.seconds = time.perf_counter() - start
    run.fallbacks = jaxdev.fallback_counts()
    torch._dynamo.reset()
    return run


def relative(ours: dict, cpu: dict, names) -> float:
    """|ours - cpu| / |cpu| (2-norms) over the tensors `names` together."""
    difference = sum(float((ours[n].double() - cpu[n].double()).square().sum()) for n in names)
    return (difference / max(sum(float(cpu[n].double().square().sum()) for n in names), 1e-300)) ** 0.5


def worst(ours: dict, cpu: dict) -> tuple[float, str]:
    """The largest relative difference of one tensor, and its name, over the tensors whose norm is at least
    1e-3 of the largest one's: a gradient that is zero up to rounding (a key projection's bias, which
    softmax cancels) is all noise, and so is a parameter AdamW moved by about lr each way on it."""
    if set(ours) != set(cpu):
        return float("inf"), "missing: " + ", ".join(sorted(set(cpu) ^ set(ours)))[:60]
    norms = {n: float(t.double().norm()) for n, t in cpu.items()}
    floor = 1e-3 * max(norms.values(), default=0.0)
    found = (0.0, "")
    for name in (n for n in cpu if norms[n] >= floor):
        difference = relative(ours, cpu, [name])
        if not difference <= found[0]:  # NaN counts as worst
            found = (difference, name)
    return found


def compare(run: Run, cpu: Run) -> dict:
    row = {"losses": run.losses, "seconds": run.seconds, "error": run.error, "fallbacks": run.fallbacks}
    if run.error is None and cpu.error is None:
        pairs = list(zip(run.losses, cpu.losses))
        row["loss_rel"] = max(abs(a - b) / max(abs(b), 1e-30) for a, b in pairs)
        row["grad_rel"], row["grad_at"] = worst(run.grads, cpu.grads)
        row["param_rel"] = relative(run.params, cpu.params, cpu.params) if set(run.params) == set(cpu.params) else None
    return row


WIDER = {torch.float32: torch.float64, torch.bfloat16: torch.float32}


def measure(models, modes, steps: int, dtype: torch.dtype) -> list[dict]:
    """Per model: CPU's run, CPU's run in the wider dtype compared with it (how far rounding alone moves
    this model in `steps` steps: the scale of float noise for the rows below), then each jax mode."""
    rows = []
    for name in models:
        cpu = train(name, "cpu", steps, dtype)
        rows.append({"model": name, "mode": "cpu", **compare(cpu, cpu)})
        wider = train(name, "cpu", steps, WIDER[dtype])
        rows.append({"model": name, "mode": f"cpu {str(WIDER[dtype]).removeprefix('torch.')}", **compare(wider, cpu)})
        for mode in modes:
            rows.append({"model": name, "mode": mode, **compare(train(name, mode, steps, dtype), cpu)})
            print(f"  {name} {mode}: {rows[-1].get('loss_rel', rows[-1]['error'])}", file=sys.stderr, flush=True)
    return rows


# --- output ---------------------------------------------------------------------------------------


def _number(value) -> str:
    return "" if value is None else f"{value:.2e}"


def render(rows: list[dict], title: str) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=title, show_lines=False)
    for column in ("model", "mode", "losses", "loss rel", "grad rel (worst)", "param rel", "s", "fallback"):
        table.add_column(column, overflow="fold")
    for row in rows:
        losses = " ".join(f"{x:.5f}" for x in row["losses"])
        grad = f"{_number(row.get('grad_rel'))} {row.get('grad_at', '')}".strip()
        fallback = ", ".join(f"{op.removeprefix('aten::')} {n}" for op, n in sorted(row["fallbacks"].items()))
        cells = [row["model"], row["mode"], losses, _number(row.get("loss_rel")), grad, _number(row.get("param_rel"))]
        cells += [f"{row['seconds']:.1f}", fallback]
        if row["error"]:
            cells = [row["model"], row["mode"], f"[red]{row['error']}[/red]", "", "", "", f"{row['seconds']:.1f}", ""]
        table.add_row(*cells)
    Console(width=200).print(table)


# --- the stand-in ---------------------------------------------------------------------------------


def standin_rows(argv: list[str]) -> list[dict]:
    """The rows of this script rerun in a child that stands in for a TPU."""
    from jaxdev.audit import deviceless

    env = deviceless.environment(dict(os.environ))
    command = [sys.executable, os.path.abspath(__file__), *argv, "--child-json"]
    done = subprocess.run(command, env=env, stdout=subprocess.PIPE, text=True)
    for line in done.stdout.splitlines():
        if line.startswith("ROWS "):
            return json.loads(line[len("ROWS ") :])
    sys.exit(f"the TPU stand-in's child exited with status {done.returncode} and no results (its stderr is above)")


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--steps", type=int, default=3, help="AdamW steps per run (default 3)")
    parser.add_argument("--models", default=",".join(MODELS), help=f"comma-separated, of: {', '.join(MODELS)}")
    parser.add_argument("--modes", default=",".join(MODES), help=f"comma-separated, of: {', '.join(MODES)}")
    parser.add_argument("--dtype", choices=("float32", "bfloat16"), default="float32")
    parser.add_argument("--tpu-standin", action="store_true", help="run in a child standing in for a TPU v5e")
    parser.add_argument("--child-json", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    args.models, args.modes = args.models.split(","), args.modes.split(",")
    for given, known, what in ((args.models, MODELS, "model"), (args.modes, MODES, "mode")):
        unknown = sorted(set(given) - set(known))
        if unknown:
            parser.error(f"unknown {what} {', '.join(unknown)}: choose from {', '.join(known)}")
    return args


def main(argv: list[str]) -> None:
    args = parse(argv)
    import_torchvision()
    dtype = getattr(torch, args.dtype)
    if args.tpu_standin:
        rows = standin_rows([a for a in argv if a != "--tpu-standin"])
    else:
        if os.environ.get("JAXDEV_TPU_COMPILE"):
            from jaxdev.audit import deviceless

            deviceless.install()  # before the first jax tensor: the TPU's formulations from here on
        rows = measure(args.models, args.modes, args.steps, dtype)
    if args.child_json:
        print("ROWS " + json.dumps(rows))
        return
    where = "TPU v5e stand-in (values from CPU)" if args.tpu_standin else "XLA's CPU backend"
    render(rows, f"{args.steps} AdamW steps, {args.dtype}, jax on {where}; relative to torch CPU")


if __name__ == "__main__":
    main(sys.argv[1:])
