"""benchmarks/tpu_check.sh's hand-written JAX process: the same workloads written in JAX and jitted
whole (benchmarks/tpu_gpt_jax.py's LM, benchmarks/resnet.py's ResNet-18), no PyTorch device in the
process. Each training step is one program with its state donated; the decoding step one program
per token with its caches donated. ResNet-18's convolutions run at 'highest' precision
(`jax_default_matmul_precision`), as PyTorch's float32 default asks of jaxdev and torchax.

    python benchmarks/tpu_jaxjit.py --sections lm,fwd,decode,cnn
"""

from __future__ import annotations

import functools
import os
import sys

os.environ["TORCH_DEVICE_BACKEND_AUTOLOAD"] = "0"  # torch is imported for dtypes only; no jaxdev here
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import jax
import jax.numpy as jnp
import resnet
import torch
import tpu_gpt_jax
import tpu_measure as tm
import tpu_sections as ts

IMPL, MODE = "jax.jit", "hand-written"
JAX_DTYPES = {torch.bfloat16: jnp.bfloat16, torch.float32: jnp.float32}


def lm_variant(cfg, dtype):
    def build():
        step, _, _ = tpu_gpt_jax.train_step(cfg, JAX_DTYPES[dtype])
        loss1 = lambda r: float(r.astype(jnp.float32))
        return tm.Variant(step, jax.block_until_ready, check=loss1, check_name="loss1", dots=True)

    return build


def fwd_variant(cfg, dtype):
    def build():
        call = tpu_gpt_jax.forward_call(cfg, JAX_DTYPES[dtype])
        top1 = lambda r: r[0].argmax(-1).tolist()
        return tm.Variant(call, jax.block_until_ready, check=top1, check_name="top1")

    return build


def decode_variant(cfg, dtype):
    def build():
        generate = tpu_gpt_jax.generate(cfg, JAX_DTYPES[dtype])
        return tm.Variant(
            generate, jax.block_until_ready, check=lambda r: [int(t[0, 0]) for t in r], check_name="tokens"
        )

    return build


def cnn_variant():
    def build():
        jax.config.update("jax_default_matmul_precision", "highest")
        params, stats, loss_fn, x, y = resnet.jax_resnet()

        @functools.partial(jax.jit, donate_argnums=(0, 1, 2))
        def update(params, buf, stats):
            # resnet.jax_step's update: SGD with momentum and PyTorch's weight decay
            (loss, new_stats), grads = jax.value_and_grad(loss_fn, has_aux=True)(params, stats, x, y)
            grads = jax.tree.map(lambda g, p: g + resnet.WEIGHT_DECAY * p, grads, params)
            buf = jax.tree.map(lambda b, g: resnet.MOMENTUM * b + g, buf, grads)
            return loss, jax.tree.map(lambda p, b: p - resnet.LR * b, params, buf), buf, new_stats

        state = {"p": params, "b": jax.tree.map(jnp.zeros_like, params), "s": stats}

        def call():
            loss, state["p"], state["b"], state["s"] = update(state["p"], state["b"], state["s"])
            return loss

        return tm.Variant(call, jax.block_until_ready)

    return build


def main() -> None:
    args = ts.parse_args(__doc__, default_modes=MODE)
    ts.use_jax_cache()
    tm.emit({"event": "meta", "impl": IMPL, **tm.meta()})
    with tm.warnings_noted(IMPL):
        ts.run_sections(args, IMPL, MODE, tpu_gpt_jax.Config(), lm_variant, fwd_variant, decode_variant, cnn_variant)


if __name__ == "__main__":
    main()
