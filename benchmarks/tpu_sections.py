"""What benchmarks/tpu_check.sh's processes share besides the measuring itself (tpu_measure.py): the
command line, workload names (the same on every side, so rows line up in the table), the persistent
compile cache, and the sections of the one-mode implementations (torchax's jitted path, hand-written
`jax.jit`)."""

from __future__ import annotations

import os

import jax
from tpu_measure import Budget, emit, failed, first_call, key, measure, release

QUICK = os.environ.get("TPUCHECK_SIZE") == "quick"


def cnn_name(args) -> str:
    return f"ResNet-18 train f32 {args.cnn_batch}x3x{args.cnn_side}x{args.cnn_side}"


def parse_args(doc: str, default_modes: str):
    import argparse

    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--sections", default="lm,fwd,decode,cnn")
    parser.add_argument("--modes", default=default_modes, help="comma-separated")
    parser.add_argument("--dtypes", default="bf16,f32", help="the LM training step's")
    parser.add_argument("--infer-dtype", default="bf16", help="the forward's and the decoding loop's")
    parser.add_argument("--rounds", type=int, default=2 if QUICK else 5)
    parser.add_argument("--steps", type=int, default=2 if QUICK else 5)
    parser.add_argument("--cnn-batch", type=int, default=2 if QUICK else 32)
    parser.add_argument("--cnn-side", type=int, default=16 if QUICK else 64)
    parser.add_argument("--budget", type=float, default=1e9, help="seconds: no variant starts after them")
    return parser.parse_args()


def use_jax_cache() -> None:
    """JAX's persistent compilation cache in $TPUCHECK_JAX_CACHE, set as jaxdev sets its own
    (jaxdev/programs/cache.py: every program kept), so that no implementation's warm start is favoured."""
    path = os.environ.get("TPUCHECK_JAX_CACHE")
    if path:
        jax.config.update("jax_compilation_cache_dir", path)
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
        jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)


def lm_name(dtype: str) -> str:
    return f"LM train {dtype}"


def fwd_name(cfg, dtype: str) -> str:
    return f"LM forward 1x{cfg.fwd_tokens} {dtype}"


def decode_name(cfg, dtype: str) -> str:
    return f"LM decode {cfg.new_tokens} tokens {dtype}"


def first_only(workload: str, impl: str, mode: str, build) -> None:
    """The `first` section: a variant's first step in this fresh process, kept as the row's cold_s
    or warm_s ($TPUCHECK_FIRST: cold when the caches were empty, warm over what the cold run left)."""
    kind = os.environ.get("TPUCHECK_FIRST", "cold")
    k = key(workload, impl, mode)
    emit({**k, "event": "start", "first_kind": kind})
    try:
        row = first_call(build())
    except Exception as e:
        failed(k, e)
        return
    emit({**k, f"{kind}_s": row["first_s"], f"{kind}_built": row["built_first"]})


def run_sections(args, impl: str, mode: str, cfg, lm, fwd, decode, cnn) -> None:
    """The sections of a one-mode implementation (torchax jitted, hand-written jax.jit): each
    builder factory takes (cfg, torch dtype) (cnn: nothing) and returns a builder of a Variant."""
    import torch

    dtypes = {"bf16": torch.bfloat16, "f32": torch.float32}
    budget = Budget(args.budget)  # one for the process: its sections come in priority order
    extra = {"first_cache": os.environ.get("TPUCHECK_CACHE_STATE", "unknown")}
    infer = args.infer_dtype
    for section in args.sections.split(","):
        kw = dict(rounds=args.rounds, budget=budget, extra=extra)
        if section == "lm":
            for dt in args.dtypes.split(","):
                measure(lm_name(dt), impl, {mode: lm(cfg, dtypes[dt])}, steps=args.steps, sync_each=False, **kw)
                release()
        elif section == "fwd":
            measure(fwd_name(cfg, infer), impl, {mode: fwd(cfg, dtypes[infer])}, steps=args.steps, sync_each=True, **kw)
        elif section == "decode":
            variants = {mode: decode(cfg, dtypes[infer])}
            measure(decode_name(cfg, infer), impl, variants, steps=1, sync_each=True, per=cfg.new_tokens, **kw)
        elif section == "cnn":
            import resnet

            resnet.BATCH, resnet.SIDE = args.cnn_batch, args.cnn_side
            measure(cnn_name(args), impl, {mode: cnn()}, steps=args.steps, sync_each=False, **kw)
        elif section == "first":
            for dt in args.dtypes.split(","):
                first_only(lm_name(dt), impl, mode, lm(cfg, dtypes[dt]))
        release()
