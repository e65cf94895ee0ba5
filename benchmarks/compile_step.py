"""Training steps through `torch.compile(backend="jax")` against eager jaxdev, torch CPU and the
same step hand-written in JAX and jitted whole, all in one process.

Two models, as issue 7 sets them:
* MLP 784-512-512-10, batch 128, Adam;
* a 2-layer `nn.TransformerEncoder` language model (d=256, 4 heads, feed-forward 1024, seq 128,
  batch 8, vocabulary 1000), AdamW.

The compiled jaxdev step is what a user writes: `torch.compile` over forward + loss + backward, and
`torch.compile(opt.step)`. Timings interleave the variants round by round and report medians, since
this machine's memory bandwidth varies from second to second. First-step times are the compile cost,
measured with an empty persistent compilation cache (a fresh temporary JAXDEV_CACHE_DIR, unless the
variable is set), so that neither jaxdev nor the hand-written JAX step loads earlier runs' programs.

    python benchmarks/compile_step.py [--rounds 7] [--steps 5] [--only mlp|transformer]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
os.environ.setdefault("JAXDEV_CACHE_DIR", tempfile.mkdtemp(prefix="jaxdev-benchmark-cache-"))

import jax
import jax.numpy as jnp
import quiet
import resnet
import torch
from torch import nn

import jaxdev

MLP_SIZES, MLP_BATCH = (784, 512, 512, 10), 128
VOCAB, D, HEADS, FF, SEQ, BATCH, LAYERS = 1000, 256, 4, 1024, 128, 8, 2


# --- the models in PyTorch ---------------------------------------------------------------------


def torch_mlp():
    layers = []
    for a, b in zip(MLP_SIZES, MLP_SIZES[1:]):
        layers += [nn.Linear(a, b), nn.ReLU()]
    model = nn.Sequential(*layers[:-1])
    data = torch.randn(MLP_BATCH, MLP_SIZES[0]), torch.randint(0, MLP_SIZES[-1], (MLP_BATCH,))
    return model, data, lambda p: torch.optim.Adam(p, lr=1e-3), nn.functional.cross_entropy


class LM(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, D)
        layer = nn.TransformerEncoderLayer(D, HEADS, FF, dropout=0.0, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, LAYERS, enable_nested_tensor=False)
        self.head = nn.Linear(D, VOCAB)
        self.register_buffer("mask", nn.Transformer.generate_square_subsequent_mask(SEQ))

    def forward(self, tokens):
        return self.head(self.encoder(self.embed(tokens), mask=self.mask, is_causal=True))


def torch_lm():
    data = torch.randint(0, VOCAB, (BATCH, SEQ)), torch.randint(0, VOCAB, (BATCH, SEQ))

    def loss_fn(logits, target):
        return nn.functional.cross_entropy(logits.reshape(-1, VOCAB), target.reshape(-1))

    return LM(), data, lambda p: torch.optim.AdamW(p, lr=1e-3), loss_fn


def torch_step(build, device: str, compiled: bool, backend: str = "jax"):
    torch.manual_seed(0)
    model, (x, y), make_opt, loss_fn = build()
    model = model.to(device)
    x, y = x.to(device), y.to(device)
    opt = make_opt(model.parameters())

    def forward_backward():
        loss = loss_fn(model(x), y)
        loss.backward()
        return loss

    if compiled:
        forward_backward = torch.compile(forward_backward, backend=backend)
        opt_step = torch.compile(opt.step, backend=backend)
    else:
        opt_step = opt.step

    def step():
        opt.zero_grad(set_to_none=True)
        loss = forward_backward()
        opt_step()
        return loss.item()

    # dynamo's and inductor's log notes stay out of the benchmark's output (issue 28 item 5); inductor's
    # warnings too, jaxdev's show
    return quiet.quietly(step, warnings_too=backend != "jax") if compiled else step


# --- the same steps hand-written in JAX --------------------------------------------------------


def _normal(key, shape, scale):
    return jax.random.normal(key, shape, jnp.float32) * scale


def _zeros(*shape):
    return jnp.zeros(shape, jnp.float32)  # jaxdev turns x64 on: say float32 everywhere


def _ones(*shape):
    return jnp.ones(shape, jnp.float32)


def jax_mlp():
    keys = iter(jax.random.split(jax.random.key(0), 16))
    params = [(_normal(next(keys), (a, b), a**-0.5), _zeros(b)) for a, b in zip(MLP_SIZES, MLP_SIZES[1:])]
    x = _normal(next(keys), (MLP_BATCH, MLP_SIZES[0]), 1.0)
    y = jax.random.randint(next(keys), (MLP_BATCH,), 0, MLP_SIZES[-1])

    def loss_fn(params):
        h = x
        for i, (w, b) in enumerate(params):
            h = h @ w + b
            if i < len(params) - 1:
                h = jax.nn.relu(h)
        return _cross_entropy(h, y)

    return params, loss_fn, 0.0


def _cross_entropy(logits, target):
    logp = jax.nn.log_softmax(logits, axis=-1)
    return -jnp.mean(jnp.take_along_axis(logp, target[:, None], axis=-1))


def _layer_norm(h, g, b):
    mean = h.mean(-1, keepdims=True)
    var = ((h - mean) ** 2).mean(-1, keepdims=True)
    return (h - mean) * jax.lax.rsqrt(var + 1e-5) * g + b


def jax_lm():
    keys = iter(jax.random.split(jax.random.key(0), 64))
    layer = lambda: {
        "in_w": _normal(next(keys), (3 * D, D), D**-0.5),
        "in_b": _zeros(3 * D),
        "out_w": _normal(next(keys), (D, D), D**-0.5),
        "out_b": _zeros(D),
        "l1_w": _normal(next(keys), (FF, D), D**-0.5),
        "l1_b": _zeros(FF),
        "l2_w": _normal(next(keys), (D, FF), FF**-0.5),
        "l2_b": _zeros(D),
        "n1_g": _ones(D),
        "n1_b": _zeros(D),
        "n2_g": _ones(D),
        "n2_b": _zeros(D),
    }
    params = {
        "embed": _normal(next(keys), (VOCAB, D), 1.0),
        "layers": [layer() for _ in range(LAYERS)],
        "head_w": _normal(next(keys), (VOCAB, D), D**-0.5),
        "head_b": _zeros(VOCAB),
    }
    tokens = jax.random.randint(next(keys), (BATCH, SEQ), 0, VOCAB)
    target = jax.random.randint(next(keys), (BATCH, SEQ), 0, VOCAB)
    mask = jnp.where(jnp.tril(jnp.ones((SEQ, SEQ), bool)), 0.0, -jnp.inf).astype(jnp.float32)
    dh = D // HEADS

    def attention(p, h):
        qkv = h @ p["in_w"].T + p["in_b"]
        q, k, v = (t.reshape(BATCH, SEQ, HEADS, dh).transpose(0, 2, 1, 3) for t in jnp.split(qkv, 3, -1))
        weights = jax.nn.softmax(q @ k.transpose(0, 1, 3, 2) / dh**0.5 + mask, axis=-1)
        out = (weights @ v).transpose(0, 2, 1, 3).reshape(BATCH, SEQ, D)
        return out @ p["out_w"].T + p["out_b"]

    def loss_fn(params):
        h = params["embed"][tokens]
        for p in params["layers"]:
            h = _layer_norm(h + attention(p, h), p["n1_g"], p["n1_b"])
            ff = jax.nn.relu(h @ p["l1_w"].T + p["l1_b"]) @ p["l2_w"].T + p["l2_b"]
            h = _layer_norm(h + ff, p["n2_g"], p["n2_b"])
        logits = h @ params["head_w"].T + params["head_b"]
        return _cross_entropy(logits.reshape(-1, VOCAB), target.reshape(-1))

    return params, loss_fn, 0.01


def jax_step(build):
    """Returns (step, compile seconds): Adam(W) with PyTorch's defaults, the whole step jitted."""
    params, loss_fn, weight_decay = build()
    lr, b1, b2, eps = 1e-3, 0.9, 0.999, 1e-8

    def update(params, m, v, t):
        loss, grads = jax.value_and_grad(loss_fn)(params)
        m = jax.tree.map(lambda m_, g: b1 * m_ + (1 - b1) * g, m, grads)
        v = jax.tree.map(lambda v_, g: b2 * v_ + (1 - b2) * g * g, v, grads)
        c1, c2 = 1 - b1**t, 1 - b2**t

        def new(p, m_, v_):
            p = p * (1 - lr * weight_decay)
            return p - lr * (m_ / c1) / (jnp.sqrt(v_ / c2) + eps)

        return loss, jax.tree.map(new, params, m, v), m, v

    state = {
        "params": params,
        "m": jax.tree.map(jnp.zeros_like, params),
        "v": jax.tree.map(jnp.zeros_like, params),
        "t": 0,
    }
    t0 = time.perf_counter()
    run = jax.jit(update).lower(state["params"], state["m"], state["v"], jnp.float32(1)).compile()
    compile_seconds = time.perf_counter() - t0

    def step():
        state["t"] += 1
        loss, state["params"], state["m"], state["v"] = run(
            state["params"], state["m"], state["v"], jnp.float32(state["t"])
        )
        return float(loss)

    return step, compile_seconds


# --- measuring ---------------------------------------------------------------------------------


def first_step_seconds(step) -> float:
    t0 = time.perf_counter()
    step()
    return time.perf_counter() - t0


def interleaved(steps_by_name: dict, rounds: int, steps: int) -> dict[str, float]:
    """Median seconds per step of each variant, timing them in turn, round after round."""
    times: dict[str, list[float]] = {name: [] for name in steps_by_name}
    for _ in range(rounds):
        for name, step in steps_by_name.items():
            t0 = time.perf_counter()
            for _ in range(steps):
                step()
            times[name].append((time.perf_counter() - t0) / steps)
    return {name: statistics.median(ts) for name, ts in times.items()}


def run(title: str, build_torch, build_jax, rounds: int, steps: int, with_cpu: bool) -> None:
    print(f"\n{title}")
    jaxdev.reset_fallback_counts()
    from jaxdev.graphs.program import STATS

    variants = {
        "jaxdev compiled": torch_step(build_torch, "jax", compiled=True),
        "jaxdev eager": torch_step(build_torch, "jax", compiled=False),
    }
    if with_cpu:
        variants["torch CPU eager"] = torch_step(build_torch, "cpu", compiled=False)
        variants["torch CPU inductor"] = torch_step(build_torch, "cpu", compiled=True, backend="inductor")
    jax_run, jax_compile = build_jax()
    variants["JAX jit (hand-written)"] = jax_run
    before = STATS.seconds
    first = {name: first_step_seconds(step) for name, step in variants.items()}
    ours = STATS.seconds - before
    for name in variants:  # the optimizer's second step traces again (its state exists now)
        variants[name]()
    per_step = interleaved(variants, rounds, steps)
    base = per_step["jaxdev compiled"]
    print(f"{'variant':<26} {'ms/step':>9} {'first step s':>13} {'this / compiled':>16}")
    for name, t in per_step.items():
        print(f"{name:<26} {t * 1e3:>9.2f} {first[name]:>13.2f} {t / base:>16.2f}")
    print(
        f"jax.jit compile of the hand-written step: {jax_compile:.2f} s; "
        f"first compiled jaxdev step / that: {first['jaxdev compiled'] / jax_compile:.2f}; "
        f"of the first step, jaxdev's tracing and XLA compiles took {ours:.2f} s "
        f"({ours / jax_compile:.2f}x the jax.jit compile), dynamo and AOTAutograd the rest"
    )
    print(
        f"compiled jaxdev / JAX jit: {base / per_step['JAX jit (hand-written)']:.2f}; "
        f"eager jaxdev / compiled jaxdev: {per_step['jaxdev eager'] / base:.2f}"
        + (f"; compiled jaxdev / torch CPU inductor: {base / per_step['torch CPU inductor']:.2f}" if with_cpu else "")
    )
    print(f"CPU fallbacks: {sum(jaxdev.fallback_counts().values())}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--only", choices=["mlp", "transformer", "resnet"])
    args = parser.parse_args()
    print(f"torch {torch.__version__}, jax {jax.__version__} on {jax.devices()[0].platform}")
    if args.only in (None, "mlp"):
        run(
            f"MLP {'-'.join(map(str, MLP_SIZES))}, batch {MLP_BATCH}, Adam",
            torch_mlp,
            lambda: jax_step(jax_mlp),
            args.rounds,
            args.steps,
            with_cpu=True,
        )
    if args.only in (None, "transformer"):
        run(
            f"Transformer LM: {LAYERS} layers, d={D}, seq {SEQ}, batch {BATCH}, AdamW",
            torch_lm,
            lambda: jax_step(jax_lm),
            args.rounds,
            max(1, args.steps // 2),
            with_cpu=True,
        )
    if args.only in (None, "resnet"):
        run(RESNET_TITLE, resnet.torch_resnet, resnet.jax_step, args.rounds, max(1, args.steps // 2), with_cpu=True)


RESNET_TITLE = (
    f"ResNet-18, batch {resnet.BATCH}, 3x{resnet.SIDE}x{resnet.SIDE}, {resnet.CLASSES} classes, "
    "SGD momentum 0.9, weight decay 1e-4 (BatchNorm in training mode)"
)

if __name__ == "__main__":
    main()
