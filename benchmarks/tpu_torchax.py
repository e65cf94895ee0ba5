"""benchmarks/tpu_check.sh's torchax process: the same workloads through torchax 0.0.13's jitted path.

torchax renames PrivateUse1 to "jax" as jaxdev does, so it runs in a process of its own with
TORCH_DEVICE_BACKEND_AUTOLOAD=0 (no jaxdev), imported through jaxdev/audit/peers/torchax_compat.py (its
tables name overloads torch 2.13 removed), loaded by its path: importing it as a jaxdev module would
run jaxdev/__init__.py, jaxdev's device, in this process. Its fast training path is functional:
`interop.JittableModule(model)` and `train.make_train_step(model_fn, loss_fn, optax.adamw(...))`,
wrapped in `interop.jax_jit` with the weights and optimizer state donated: one program per step. The
forward is JittableModule's jitted forward; the decoding step is the model's `decode_step` through
`JittableModule.functional_call` in `interop.jax_jit`, its caches returned (written in place inside the
trace) and donated. Matrix products: float32 at 'highest' (`jax_default_matmul_precision`, what
`torchax.enable_accuracy_mode()` sets, PyTorch's default); bfloat16 at JAX's default.

The ResNet-18 step's BatchNorm running statistics are not carried from step to step: make_train_step
returns weights and optimizer state, not buffers (the batch statistics the step computes with are
the same).

    TORCH_DEVICE_BACKEND_AUTOLOAD=0 python benchmarks/tpu_torchax.py --sections lm,fwd,decode,cnn
"""

from __future__ import annotations

import importlib.util
import os
import sys

os.environ["TORCH_DEVICE_BACKEND_AUTOLOAD"] = "0"  # no jaxdev in this process: both name the device "jax"
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import jax
import jax.numpy as jnp
import numpy as np
import optax
import resnet
import torch
import tpu_gpt
import tpu_measure as tm
import tpu_sections as ts


def _compat():
    """jaxdev/audit/peers/torchax_compat.py, the one torchax shim, as a module of its own (by its path)."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    path = os.path.join(root, "jaxdev", "audit", "peers", "torchax_compat.py")
    spec = importlib.util.spec_from_file_location("torchax_compat", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


torchax = _compat().import_torchax()
from torchax import interop, train  # noqa: E402  (after the shim)

IMPL, MODE = "torchax", "jitted"
DTYPES = {"bf16": torch.bfloat16, "f32": torch.float32}
ENV = torchax.default_env()


def precision_for(dtype) -> None:
    jax.config.update("jax_default_matmul_precision", "highest" if dtype == torch.float32 else None)


def wait(r) -> None:
    jax.block_until_ready(interop.jax_view(r))


def _jax(a: np.ndarray) -> torch.Tensor:
    with ENV:
        return torch.from_numpy(a).to("jax")


def _jittable(model: torch.nn.Module):
    with ENV:
        model.to("jax")
        return interop.JittableModule(model)


def train_variant(jm, optimizer, loss_fn, x, y, check=None, dots=False):
    """make_train_step's step over `jm`, jitted with the weights and optimizer state donated."""
    model_fn = lambda weights, buffers, args: jm.functional_call("forward", weights, buffers, args)
    step = train.make_train_step(model_fn, loss_fn, optimizer)
    jitted = interop.jax_jit(step, kwargs_for_jax_jit={"donate_argnums": (0, 2)})
    state = {"w": jm.params, "o": interop.call_jax(optimizer.init, jm.params)}

    def call():
        loss, state["w"], state["o"] = jitted(state["w"], jm.buffers, state["o"], x, y)
        return loss

    return tm.Variant(call, wait, check=check, check_name="loss1", dots=dots)


def lm_variant(cfg, dtype):
    def build():
        precision_for(dtype)
        jm = _jittable(tpu_gpt.torch_model(cfg, dtype))
        x, y, _ = (_jax(a) for a in tpu_gpt.numpy_batch(cfg))
        b1, b2 = tpu_gpt.BETAS
        adamw = optax.adamw(tpu_gpt.LR, b1=b1, b2=b2, eps=tpu_gpt.EPS, weight_decay=tpu_gpt.WEIGHT_DECAY)
        loss1 = lambda r: float(jnp.asarray(interop.jax_view(r), jnp.float32))
        return train_variant(jm, adamw, tpu_gpt.loss_fn, x, y, check=loss1, dots=True)

    return build


def fwd_variant(cfg, dtype):
    def build():
        precision_for(dtype)
        jm = _jittable(tpu_gpt.torch_model(cfg, dtype).eval())
        prompt = _jax(tpu_gpt.numpy_batch(cfg)[2])
        top1 = lambda r: np.asarray(interop.jax_view(r)[0].argmax(-1)).tolist()
        return tm.Variant(lambda: jm(prompt), wait, check=top1, check_name="top1")

    return build


def decode_variant(cfg, dtype):
    def build():
        precision_for(dtype)
        jm = _jittable(tpu_gpt.torch_model(cfg, dtype).eval())

        def one(params, buffers, token, caches, position):
            token = jm.functional_call("decode_step", params, buffers, token, caches, position)
            return token, caches  # written in place inside the trace: returned to leave it

        step = interop.jax_jit(one, kwargs_for_jax_jit={"donate_argnums": (3,)})

        def generate():
            with ENV:
                caches = tpu_gpt.empty_caches(cfg, dtype, "jax")
                token, out = torch.zeros(1, 1, dtype=torch.long, device="jax"), []
                for i in range(cfg.new_tokens):
                    token, caches = step(jm.params, jm.buffers, token, caches, torch.tensor([i], device="jax"))
                    out.append(token)
            return out

        tokens = lambda r: [int(np.asarray(interop.jax_view(t)).reshape(-1)[0]) for t in r]
        return tm.Variant(generate, wait, check=tokens, check_name="tokens")

    return build


def cnn_variant():
    def build():
        precision_for(torch.float32)
        torch.manual_seed(0)
        model, (x, y), _, loss_fn = resnet.torch_resnet()
        jm = _jittable(model)
        x, y = _jax(x.numpy()), _jax(y.numpy())
        # torch's SGD(momentum, weight_decay): g + wd * p, then the momentum buffer, then p -= lr * buf
        sgd = optax.chain(
            optax.add_decayed_weights(resnet.WEIGHT_DECAY), optax.sgd(resnet.LR, momentum=resnet.MOMENTUM)
        )
        return train_variant(jm, sgd, loss_fn, x, y)

    return build


def main() -> None:
    args = ts.parse_args(__doc__, default_modes=MODE)
    ts.use_jax_cache()
    tm.emit({"event": "meta", "impl": IMPL, **tm.meta(), "torchax": torchax.__version__})
    cfg = tpu_gpt.Config()
    with tm.warnings_noted(IMPL):
        ts.run_sections(args, IMPL, MODE, cfg, lm_variant, fwd_variant, decode_variant, cnn_variant)


if __name__ == "__main__":
    main()
