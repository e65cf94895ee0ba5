"""The GPT-style LM of issue 37 in PyTorch, its sizes, and the weights and data every implementation
of benchmarks/tpu_check.sh starts from.

Pre-LayerNorm blocks (fused qkv projection, causal `scaled_dot_product_attention`, tanh-GELU MLP 4x),
learned positions, a head tied to the token embedding. Weights and data are made with numpy from fixed
seeds, parameter by parameter under the PyTorch names, so jaxdev, torchax and the hand-written JAX twin
(tpu_gpt_jax.py) start from the same bits and their first losses can be compared.

`decode_step` is the batch-1 greedy decoding step over a static KV cache: it writes the position's
key and value into every layer's cache in place (`index_copy_`, as a static-cache generate loop does)
and attends over the whole cache with a mask of the positions written so far, so every token runs the
same shapes and ops.
"""

from __future__ import annotations

import os

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

# full: issue 37's workload; quick: the CPU rehearsal (tpu_check.sh quick)
SIZES = {
    "full": dict(layers=6, d=512, heads=8, vocab=8192, batch=16, seq=256, fwd_tokens=32, new_tokens=32),
    "quick": dict(layers=2, d=64, heads=4, vocab=256, batch=2, seq=32, fwd_tokens=8, new_tokens=4),
}
LR, BETAS, EPS, WEIGHT_DECAY = 1e-3, (0.9, 0.999), 1e-8, 1e-2  # torch.optim.AdamW's defaults
SEED = 37


class Config:
    def __init__(self, size: str | None = None):
        self.size = size or os.environ.get("TPUCHECK_SIZE", "full")
        for k, v in SIZES[self.size].items():
            setattr(self, k, v)
        self.context = max(self.seq, self.fwd_tokens, self.new_tokens)

    def describe(self) -> str:
        return (
            f"GPT {self.layers} layers, d {self.d}, {self.heads} heads, vocabulary {self.vocab}, tied head; "
            f"train batch {self.batch} x {self.seq}; forward 1 x {self.fwd_tokens}; decode {self.new_tokens} tokens"
        )


def param_shapes(cfg: Config) -> dict[str, tuple[int, ...]]:
    """Parameter name (PyTorch's) -> shape, in a fixed order."""
    d = cfg.d
    shapes = {"wte.weight": (cfg.vocab, d), "wpe.weight": (cfg.context, d)}
    for i in range(cfg.layers):
        for name, shape in (
            ("ln1.weight", (d,)),
            ("ln1.bias", (d,)),
            ("qkv.weight", (3 * d, d)),
            ("qkv.bias", (3 * d,)),
            ("proj.weight", (d, d)),
            ("proj.bias", (d,)),
            ("ln2.weight", (d,)),
            ("ln2.bias", (d,)),
            ("up.weight", (4 * d, d)),
            ("up.bias", (4 * d,)),
            ("down.weight", (d, 4 * d)),
            ("down.bias", (d,)),
        ):
            shapes[f"blocks.{i}.{name}"] = shape
    shapes["ln_f.weight"], shapes["ln_f.bias"] = (d,), (d,)
    return shapes


def numpy_params(cfg: Config) -> dict[str, np.ndarray]:
    """GPT-2's initialisation (normal 0.02, residual projections scaled by 1/sqrt(2 layers), zero
    biases, unit LayerNorm gains), float32, one seeded generator per parameter."""
    params = {}
    for i, (name, shape) in enumerate(param_shapes(cfg).items()):
        if name.endswith(".bias"):
            params[name] = np.zeros(shape, np.float32)
        elif ".ln" in name or name.startswith("ln"):
            params[name] = np.ones(shape, np.float32)
        else:
            std = 0.02 / (2 * cfg.layers) ** 0.5 if name.endswith(("proj.weight", "down.weight")) else 0.02
            params[name] = np.random.default_rng([SEED, i]).normal(0.0, std, shape).astype(np.float32)
    return params


def numpy_batch(cfg: Config) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(training inputs, targets, the forward's tokens): int64 token ids."""
    rng = np.random.default_rng([SEED, 10_000])
    tokens = rng.integers(0, cfg.vocab, (cfg.batch, cfg.seq + 1))
    prompt = rng.integers(0, cfg.vocab, (1, cfg.fwd_tokens))
    return tokens[:, :-1], tokens[:, 1:], prompt


class Block(nn.Module):
    def __init__(self, d: int, heads: int):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.up, self.down = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def _split(self, t):  # [b, s, d] -> [b, heads, s, d / heads]
        b, s, d = t.shape
        return t.view(b, s, self.heads, d // self.heads).transpose(1, 2)

    def _mlp(self, x):
        return x + self.down(F.gelu(self.up(self.ln2(x)), approximate="tanh"))

    def forward(self, x):
        q, k, v = self.qkv(self.ln1(x)).split(x.shape[-1], dim=-1)
        att = F.scaled_dot_product_attention(self._split(q), self._split(k), self._split(v), is_causal=True)
        return self._mlp(x + self.proj(att.transpose(1, 2).reshape(x.shape)))

    def decode(self, x, cache_k, cache_v, position, mask):
        q, k, v = self.qkv(self.ln1(x)).split(x.shape[-1], dim=-1)
        cache_k.index_copy_(2, position, self._split(k))  # the static cache, written in place
        cache_v.index_copy_(2, position, self._split(v))
        att = F.scaled_dot_product_attention(self._split(q), cache_k, cache_v, attn_mask=mask)
        return self._mlp(x + self.proj(att.transpose(1, 2).reshape(x.shape)))


class GPT(nn.Module):
    def __init__(self, cfg: Config):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(cfg.vocab, cfg.d), nn.Embedding(cfg.context, cfg.d)
        self.blocks = nn.ModuleList(Block(cfg.d, cfg.heads) for _ in range(cfg.layers))
        self.ln_f = nn.LayerNorm(cfg.d)
        # the decode mask is computed from these inside the step, so no implementation writes one
        self.register_buffer("slots", torch.arange(cfg.new_tokens), persistent=False)

    def forward(self, tokens):
        x = self.wte(tokens) + self.wpe.weight[: tokens.shape[1]]
        for block in self.blocks:
            x = block(x)
        return self.ln_f(x) @ self.wte.weight.t()  # the tied head

    def decode_step(self, token, caches, position):
        """token [1, 1], caches [(k, v)] of [1, heads, new_tokens, d / heads], position [1] ->
        the next token [1, 1] (greedy)."""
        mask = (self.slots <= position).view(1, 1, 1, -1)
        x = self.wte(token) + self.wpe(position)[None]
        for block, (k, v) in zip(self.blocks, caches):
            x = block.decode(x, k, v, position, mask)
        return (self.ln_f(x) @ self.wte.weight.t()).argmax(-1)


def torch_model(cfg: Config, dtype: torch.dtype) -> GPT:
    """The model on CPU in `dtype`, loaded with numpy_params."""
    model = GPT(cfg)
    state = {k: torch.from_numpy(v) for k, v in numpy_params(cfg).items()}
    model.load_state_dict(state)
    return model.to(dtype)


def loss_fn(logits, targets):
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


def empty_caches(cfg: Config, dtype: torch.dtype, device) -> list[tuple[torch.Tensor, torch.Tensor]]:
    shape = (1, cfg.heads, cfg.new_tokens, cfg.d // cfg.heads)
    return [
        (torch.zeros(shape, dtype=dtype, device=device), torch.zeros(shape, dtype=dtype, device=device))
        for _ in range(cfg.layers)
    ]


def make_adamw(params):
    return torch.optim.AdamW(params, lr=LR, betas=BETAS, eps=EPS, weight_decay=WEIGHT_DECAY)
