"""benchmarks/tpu_check.sh's jaxdev process: issue 37's workloads through jaxdev, in its modes.

Modes: `compiled` (torch.compile(backend="jax") over forward+backward and over opt.step),
`compiled+fused` (the same under fused eager: one program per step), `fused` (fused eager), `op`
(per-op eager). Sections: lm (the GPT training step, bfloat16 and float32), fwd (its batch-1 forward),
decode (its batch-1 greedy decoding loop), cnn (benchmarks/resnet.py's ResNet-18 step), opt (AdamW over
100 tensors: foreach, fused=True, per tensor, and one jitted JAX program), writes (benchmarks/inplace.py's writes
against `jax.jit` with the input donated). The opt and writes rows reuse the functions
benchmarks/accelerator_check.py measures them with (optimizer_step.py, inplace.py).

    python benchmarks/tpu_jaxdev.py --sections lm,fwd --modes compiled,fused --budget 200
"""

from __future__ import annotations

import os
import sys

os.environ.setdefault("JAXDEV_FALLBACK", "warn")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import jax
import numpy as np
import resnet
import torch
import tpu_gpt
import tpu_measure as tm
import tpu_sections as ts
from timing import ALLOCATOR

import jaxdev
from jaxdev import eager_modes
from jaxdev.fused import recorder
from jaxdev.graphs import program as compiled_program

IMPL = "jaxdev"
DTYPES = {"bf16": torch.bfloat16, "f32": torch.float32}
# model-compiled+fused: torch.compile over forward+backward only, the optimizer left eager (recorded by
# fused eager into the same program): the usual way to compile, without dynamo tracing opt.step
MODES = ("compiled", "compiled+fused", "model-compiled+fused", "fused", "op")


def read(t) -> jax.Array:
    # tensor.read, not jaxdev.to_jax: an array handed out is never donated to a later write
    return jaxdev.tensor.read(t)


def wait(r) -> None:
    for t in r if isinstance(r, (list, tuple)) else (r,):
        jax.block_until_ready(read(t))


def in_mode(mode: str, fn):
    """fn run under the eager mode a variant names; fused calls end with a flush, so the call
    dispatches its work (as the optimizer step's end does) rather than leave it to the wait."""
    eager = "fused" if "fused" in mode else "op"

    def run(*args):
        with jaxdev.eager_mode(eager):
            result = fn(*args)
            eager_modes.flush()
        return result

    return run


def counters() -> dict:
    return {
        "fused flushes": recorder.STATS.flushes,
        "compiled graph calls": compiled_program.STATS.calls,
        "ops recorded": recorder.STATS.recorded,
        "ops run eagerly in fused": sum(recorder.STATS.eager.values()),
        "CPU fallbacks": sum(jaxdev.fallback_counts().values()),
    }


def _jax(a: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(a).to("jax")


def lm_variant(cfg, dtype, mode: str):
    def build():
        model = tpu_gpt.torch_model(cfg, dtype).to("jax")
        x, y, _ = (_jax(a) for a in tpu_gpt.numpy_batch(cfg))
        opt = tpu_gpt.make_adamw(model.parameters())

        def forward_backward():
            loss = tpu_gpt.loss_fn(model(x), y)
            loss.backward()
            return loss

        opt_step = opt.step
        if "compiled" in mode:
            forward_backward = torch.compile(forward_backward, backend="jax")
        if mode.startswith("compiled"):
            opt_step = torch.compile(opt.step, backend="jax")

        def step():
            opt.zero_grad(set_to_none=True)
            loss = forward_backward()
            opt_step()
            return loss

        loss1 = lambda r: float(r.detach().cpu().float())
        return tm.Variant(in_mode(mode, step), wait, check=loss1, check_name="loss1", dots=mode == "compiled")

    return build


def fwd_variant(cfg, dtype, mode: str):
    def build():
        model = tpu_gpt.torch_model(cfg, dtype).to("jax").eval()
        prompt = _jax(tpu_gpt.numpy_batch(cfg)[2])
        forward = torch.compile(model, backend="jax") if mode.startswith("compiled") else model

        @torch.no_grad()
        def call():
            return forward(prompt)

        top1 = lambda r: r[0].argmax(-1).cpu().tolist()
        return tm.Variant(in_mode(mode, call), wait, check=top1, check_name="top1")

    return build


def decode_variant(cfg, dtype, mode: str):
    def build():
        model = tpu_gpt.torch_model(cfg, dtype).to("jax").eval()
        step = torch.compile(model.decode_step, backend="jax") if mode.startswith("compiled") else model.decode_step

        @torch.no_grad()
        def generate():
            caches = tpu_gpt.empty_caches(cfg, dtype, "jax")
            token, out = torch.zeros(1, 1, dtype=torch.long, device="jax"), []
            for i in range(cfg.new_tokens):
                token = step(token, caches, torch.tensor([i], device="jax"))
                out.append(token)
            return out  # read by the wait: nothing waits between tokens

        tokens = lambda r: [int(t) for t in r]
        return tm.Variant(in_mode(mode, generate), wait, check=tokens, check_name="tokens")

    return build


def cnn_variant(mode: str):
    def build():
        torch.manual_seed(0)
        model, (x, y), make_opt, loss_fn = resnet.torch_resnet()
        model, x, y = model.to("jax"), x.to("jax"), y.to("jax")
        opt = make_opt(model.parameters())

        def forward_backward():
            loss = loss_fn(model(x), y)
            loss.backward()
            return loss

        opt_step = opt.step
        if "compiled" in mode:
            forward_backward = torch.compile(forward_backward, backend="jax")
        if mode.startswith("compiled"):
            opt_step = torch.compile(opt.step, backend="jax")

        def step():
            opt.zero_grad(set_to_none=True)
            loss = forward_backward()
            opt_step()
            return loss

        return tm.Variant(in_mode(mode, step), wait)

    return build


def optimizer(args, budget) -> None:
    import optimizer_step

    def ours(foreach: bool, fused: bool = False):
        def build():
            step, done = optimizer_step.torch_step("jax", foreach, fused=fused)
            return tm.Variant(step, done)

        return build

    def one_program():
        step = optimizer_step.jax_step(1)
        return tm.Variant(step, lambda ps: jax.block_until_ready(ps[-1]))

    workload = f"AdamW over {len(optimizer_step.SHAPES)} tensors"
    kw = dict(rounds=args.rounds, steps=args.steps, sync_each=False, budget=budget)
    tm.measure(
        workload,
        IMPL,
        {"foreach": ours(True), "fused=True": ours(False, fused=True), "per tensor": ours(False)},
        counters=counters,
        **kw,
    )
    # the JAX row runs in this process as in accelerator_check.py: a single program, no jaxdev in it
    tm.measure(workload, "jax.jit", {"1 program": one_program}, **kw)


def writes(args, budget) -> None:
    import inplace

    for name, case in inplace.cases().items():
        if budget.left() < 0:
            tm.emit({**tm.key(f"write {name}", IMPL, "eager"), "event": "skipped", "note": "no time left"})
            continue
        t_dev, t_ref = inplace.time_write(case, donate=True, repeat=10 * args.rounds * args.steps, batches=10)
        tm.emit({**tm.key(f"write {name}", IMPL, "eager"), "ms": t_dev * 1e3, "event": "done"})
        tm.emit({**tm.key(f"write {name}", "jax.jit", "donated"), "ms": t_ref * 1e3, "event": "done"})


def run_sections(args) -> None:
    cfg = tpu_gpt.Config()
    extra = {"first_cache": os.environ.get("TPUCHECK_CACHE_STATE", "unknown")}
    budget = tm.Budget(args.budget)  # one for the process: its sections come in priority order
    modes = [m for m in args.modes.split(",") if m]
    infer = DTYPES[args.infer_dtype]
    for section in args.sections.split(","):
        kw = dict(rounds=args.rounds, budget=budget, counters=counters, extra=extra)
        if section == "lm":
            for dt in args.dtypes.split(","):
                variants = {m: lm_variant(cfg, DTYPES[dt], m) for m in modes}
                tm.measure(ts.lm_name(dt), IMPL, variants, steps=args.steps, sync_each=False, **kw)
                tm.release()
        elif section == "fwd":
            variants = {m: fwd_variant(cfg, infer, m) for m in modes}
            tm.measure(ts.fwd_name(cfg, args.infer_dtype), IMPL, variants, steps=args.steps, sync_each=True, **kw)
        elif section == "decode":
            variants = {m: decode_variant(cfg, infer, m) for m in modes}
            name = ts.decode_name(cfg, args.infer_dtype)
            tm.measure(name, IMPL, variants, steps=1, sync_each=True, per=cfg.new_tokens, **kw)
        elif section == "cnn":
            resnet.BATCH, resnet.SIDE = args.cnn_batch, args.cnn_side
            variants = {m: cnn_variant(m) for m in modes}
            tm.measure(ts.cnn_name(args), IMPL, variants, steps=args.steps, sync_each=False, **kw)
        elif section == "opt":
            optimizer(args, budget)
        elif section == "writes":
            writes(args, budget)
        elif section == "first":  # one mode's first step in this fresh process (tpu_check.sh's cold/warm)
            for dt in args.dtypes.split(","):
                ts.first_only(ts.lm_name(dt), IMPL, modes[0], lm_variant(cfg, DTYPES[dt], modes[0]))
        tm.release()


def main() -> None:
    args = ts.parse_args(__doc__, default_modes=",".join(MODES))
    tm.emit(
        {"event": "meta", "impl": IMPL, **tm.meta(), "allocator": ALLOCATOR, "native": jaxdev.native.module is not None}
    )
    with tm.warnings_noted(IMPL):
        run_sections(args)


if __name__ == "__main__":
    main()
