"""benchmarks/tpu_gpt.py's LM written in JAX by hand: the same parameters (same names, shapes and
bits), the same computation and PyTorch's AdamW, each step one jitted program with its state donated.

Products follow jaxdev's precision contract (jaxdev/ops/kit/precision.py) so that jaxdev is compared with
the same arithmetic: bfloat16 operands multiply as they are at DEFAULT precision (one exact pass) and
accumulate in float32, rounded once (product_precision), in the backward too; float32 products run at Precision.HIGHEST
(PyTorch's default 'highest'). Attention widens bfloat16 to float32 as CPU's math path and jaxdev do,
and multiplies at float32's setting, HIGHEST (widened_product_precision); LayerNorm and log-softmax
compute in float32 and round their results, as PyTorch does.
"""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np
from tpu_gpt import BETAS, EPS, LR, WEIGHT_DECAY, Config, numpy_batch, numpy_params

F32 = jnp.float32


def _half_product(a, b):
    return jnp.matmul(a, b, precision=jax.lax.Precision.DEFAULT, preferred_element_type=F32).astype(a.dtype)


@jax.custom_vjp
def _half_dot(a, b):
    return _half_product(a, b)


def _half_dot_forward(a, b):
    return _half_product(a, b), (a, b)


def _half_dot_backward(saved, g):
    """The gradients as PyTorch's autograd makes them for a half `a @ b` (b a matrix): two more half
    products, each accumulated in float32 and rounded once, as jaxdev's mm kernels run them (JAX's own
    rule would multiply the float32 cotangent in float32)."""
    a, b = saved
    rows = a.reshape(-1, a.shape[-1])
    return _half_product(g, b.T), _half_product(rows.T, g.reshape(-1, g.shape[-1]))


_half_dot.defvjp(_half_dot_forward, _half_dot_backward)


def _dot(a, b):
    if a.dtype == F32:
        return jnp.matmul(a, b, precision=jax.lax.Precision.HIGHEST)
    return _half_dot(a, b)


def _linear(x, p, name):
    return _dot(x, p[name + ".weight"].T) + p[name + ".bias"]


def _layer_norm(x, p, name):
    h = x.astype(F32)
    mean = h.mean(-1, keepdims=True)
    var = ((h - mean) ** 2).mean(-1, keepdims=True)
    out = (h - mean) * jax.lax.rsqrt(var + 1e-5) * p[name + ".weight"].astype(F32) + p[name + ".bias"].astype(F32)
    return out.astype(x.dtype)


def _attend(q, k, v, keep):
    """softmax(q k^T / sqrt(e) masked by `keep`) v, half inputs widened to float32 and multiplied at
    float32's setting (jaxdev's attention: kit.widened_product_precision)."""
    dtype = q.dtype
    q, k, v = (t.astype(F32) for t in (q, k, v))
    precision = jax.lax.Precision.HIGHEST
    root = math.sqrt(1.0 / math.sqrt(q.shape[-1]))
    scores = jnp.matmul(q * root, jnp.swapaxes(k * root, -1, -2), precision=precision)
    weights = jax.nn.softmax(jnp.where(keep, scores, -jnp.inf), axis=-1)
    return jnp.matmul(weights, v, precision=precision).astype(dtype)


def _split(t, heads):
    b, s, d = t.shape
    return t.reshape(b, s, heads, d // heads).transpose(0, 2, 1, 3)


def _merge(t):
    b, h, s, e = t.shape
    return t.transpose(0, 2, 1, 3).reshape(b, s, h * e)


def _mlp(x, p, pre):
    up = _linear(_layer_norm(x, p, pre + "ln2"), p, pre + "up")
    return x + _linear(jax.nn.gelu(up, approximate=True), p, pre + "down")


def forward(p, tokens, cfg: Config):
    s = tokens.shape[1]
    x = p["wte.weight"][tokens] + p["wpe.weight"][:s]
    causal = jnp.tril(jnp.ones((s, s), bool))
    for i in range(cfg.layers):
        pre = f"blocks.{i}."
        q, k, v = jnp.split(_linear(_layer_norm(x, p, pre + "ln1"), p, pre + "qkv"), 3, axis=-1)
        att = _attend(_split(q, cfg.heads), _split(k, cfg.heads), _split(v, cfg.heads), causal)
        x = _mlp(x + _linear(_merge(att), p, pre + "proj"), p, pre)
    return _dot(_layer_norm(x, p, "ln_f"), p["wte.weight"].T)


def cross_entropy(logits, targets):
    logp = jax.nn.log_softmax(logits.astype(F32), axis=-1).astype(logits.dtype)
    picked = jnp.take_along_axis(logp.reshape(-1, logp.shape[-1]), targets.reshape(-1, 1), axis=-1)
    return (-picked.astype(F32).mean()).astype(logits.dtype)


def adamw(p, g, m, v, t):
    """torch.optim.AdamW's update (foreach, capturable=False), in the parameters' dtype."""
    p = p * (1 - LR * WEIGHT_DECAY)
    m = m + (1 - BETAS[0]) * (g - m)
    v = v * BETAS[1] + (1 - BETAS[1]) * g * g
    step_size = (LR / (1 - BETAS[0] ** t)).astype(p.dtype)
    denom = (jnp.sqrt(v) / jnp.sqrt(1 - BETAS[1] ** t).astype(p.dtype) + EPS).astype(p.dtype)
    return p - step_size * m / denom, m, v


def params(cfg: Config, dtype) -> dict:
    return {k: jnp.asarray(v).astype(dtype) for k, v in numpy_params(cfg).items()}


def train_step(cfg: Config, dtype):
    """(step() -> loss array, state): one jitted program per step, parameters and moments donated."""
    x, y, _ = (jnp.asarray(a.astype(np.int32)) for a in numpy_batch(cfg))
    state = {"p": params(cfg, dtype)}
    state["m"] = jax.tree.map(jnp.zeros_like, state["p"])
    state["v"] = jax.tree.map(jnp.zeros_like, state["p"])
    state["t"] = 0

    @functools.partial(jax.jit, donate_argnums=(0, 1, 2))
    def update(p, m, v, t):
        loss, grads = jax.value_and_grad(lambda p: cross_entropy(forward(p, x, cfg), y))(p)
        new = {k: adamw(p[k], grads[k], m[k], v[k], t) for k in p}
        return (
            loss,
            {k: n[0] for k, n in new.items()},
            {k: n[1] for k, n in new.items()},
            {k: n[2] for k, n in new.items()},
        )

    def step():
        state["t"] += 1
        loss, state["p"], state["m"], state["v"] = update(state["p"], state["m"], state["v"], np.float32(state["t"]))
        return loss

    return step, update, state


def forward_call(cfg: Config, dtype):
    """The batch-1 forward of the prompt: () -> logits."""
    _, _, prompt = numpy_batch(cfg)
    p, prompt = params(cfg, dtype), jnp.asarray(prompt.astype(np.int32))
    run = jax.jit(lambda p, t: forward(p, t, cfg))
    return lambda: run(p, prompt)


def _decode_one(p, token, caches, position, cfg: Config):
    keep = (jnp.arange(cfg.new_tokens) <= position)[None, None, None, :]
    x = p["wte.weight"][token] + p["wpe.weight"][position][None]
    new_caches = []
    for i, (ck, cv) in enumerate(caches):
        pre = f"blocks.{i}."
        q, k, v = jnp.split(_linear(_layer_norm(x, p, pre + "ln1"), p, pre + "qkv"), 3, axis=-1)
        ck = jax.lax.dynamic_update_slice_in_dim(ck, _split(k, cfg.heads), position[0], axis=2)
        cv = jax.lax.dynamic_update_slice_in_dim(cv, _split(v, cfg.heads), position[0], axis=2)
        x = _mlp(x + _linear(_merge(_attend(_split(q, cfg.heads), ck, cv, keep)), p, pre + "proj"), p, pre)
        new_caches.append((ck, cv))
    return _dot(_layer_norm(x, p, "ln_f"), p["wte.weight"].T).argmax(-1), new_caches


def generate(cfg: Config, dtype):
    """() -> `new_tokens` greedy tokens (unread arrays) from a fresh cache, batch 1: one jitted
    program per token, the caches donated, the position uploaded per token as jaxdev's loop does."""
    p = params(cfg, dtype)
    step = jax.jit(functools.partial(_decode_one, cfg=cfg), donate_argnums=(2,))
    shape = (1, cfg.heads, cfg.new_tokens, cfg.d // cfg.heads)

    def run():
        caches = [(jnp.zeros(shape, dtype), jnp.zeros(shape, dtype)) for _ in range(cfg.layers)]
        token, out = jnp.zeros((1, 1), jnp.int32), []
        for i in range(cfg.new_tokens):
            token, caches = step(p, token, caches, np.array([i], np.int32))
            out.append(token)
        return out

    return run
