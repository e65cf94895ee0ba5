"""A GPT-2-like decoder generating tokens one at a time (batch 1, a static KV cache): the
latency-bound case. Per-op eager, fused eager and compiled jaxdev against torch CPU eager and
torch.compile's inductor on CPU, interleaved round by round in one process (medians of ms per token).

The model is written here in plain PyTorch (pre-LayerNorm blocks, GELU MLP, tied embeddings), the way
a static-cache generate loop runs it: each step writes one position of every layer's key and value
cache in place and attends over the whole cache with a mask of the positions written so far, so every
step has the same shapes and the same ops. Fused mode runs a step's ~100 ops as one cached program;
per-op mode runs each as its own; the compiled variant is `torch.compile(step, backend="jax")`, the
inductor one the same step under `torch.compile(step)` on CPU, its compiler's log notes and warnings
kept out of the output (quiet.quiet_compilers).

    python benchmarks/decode_loop.py [--layers 4] [--d 256] [--tokens 32] [--rounds 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import warnings

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import jax
import quiet
import torch
from torch import nn

import jaxdev
from jaxdev.fused import recorder

VOCAB, HEADS, CONTEXT = 1000, 4, 128


class Block(nn.Module):
    def __init__(self, d: int):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.up, self.down = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x, cache_k, cache_v, position, mask):
        b, d = x.shape[0], x.shape[-1]
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=-1)  # [b, 1, d] each
        heads = lambda t: t.view(b, 1, HEADS, d // HEADS).transpose(1, 2)  # [b, h, 1, d/h]
        cache_k.index_copy_(2, position, heads(k))  # the static cache, written in place at `position`
        cache_v.index_copy_(2, position, heads(v))
        att = nn.functional.scaled_dot_product_attention(heads(q), cache_k, cache_v, attn_mask=mask)
        x = x + self.proj(att.transpose(1, 2).reshape(b, 1, d))
        return x + self.down(nn.functional.gelu(self.up(self.ln2(x))))


class Decoder(nn.Module):
    def __init__(self, layers: int, d: int):
        super().__init__()
        self.embed, self.pos = nn.Embedding(VOCAB, d), nn.Embedding(CONTEXT, d)
        self.blocks = nn.ModuleList(Block(d) for _ in range(layers))
        self.ln = nn.LayerNorm(d)

    def forward(self, token, caches, position, mask):
        x = self.embed(token) + self.pos(position)[None]
        for block, (k, v) in zip(self.blocks, caches):
            x = block(x, k, v, position, mask)
        return self.ln(x) @ self.embed.weight.t()  # tied output projection


def decoder(device: str, layers: int, d: int, mode: str):
    """A `generate(n)` closure: n greedy tokens from a fresh cache, returned as a list of ints."""
    torch.manual_seed(0)
    model = Decoder(layers, d).to(device).eval()
    shape = (1, HEADS, CONTEXT, d // HEADS)

    def step(token, caches, position, mask):
        return model(token, caches, position, mask).argmax(-1)

    if mode == "compiled":
        run = torch.compile(step, backend="jax")
    elif mode == "inductor":
        run = torch.compile(step, backend="inductor")
    else:
        run = step

    @torch.no_grad()
    def generate(n: int) -> list[int]:
        caches = [(torch.zeros(shape, device=device), torch.zeros(shape, device=device)) for _ in model.blocks]
        mask = torch.zeros(1, 1, 1, CONTEXT, dtype=torch.bool, device=device)
        token, out = torch.zeros(1, 1, dtype=torch.long, device=device), []
        with jaxdev.eager_mode("fused" if mode == "fused" else "op"):
            for i in range(n):
                position = torch.tensor([i], device=device)
                mask[..., i] = True
                token = run(token, caches, position, mask)
                out.append(token)
            return [int(t) for t in out]  # one read at the end: nothing waits between tokens

    return quiet.quietly(generate) if mode == "inductor" else generate


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--d", type=int, default=256)
    parser.add_argument("--tokens", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument(
        "--inductor",
        choices=["auto", "yes", "no"],
        default="auto",
        help="the torch.compile inductor row on CPU (auto: yes unless a GPU is lent, whose time is scarce)",
    )
    args = parser.parse_args()
    print(f"torch {torch.__version__}, jax {jax.__version__} on {jax.devices()[0].platform}")
    print(f"decoder: {args.layers} layers, d={args.d}, {HEADS} heads, context {CONTEXT}; {args.tokens} tokens, batch 1")
    variants = {
        "jaxdev fused eager": decoder("jax", args.layers, args.d, "fused"),
        "jaxdev per-op eager": decoder("jax", args.layers, args.d, "op"),
        "jaxdev compiled": decoder("jax", args.layers, args.d, "compiled"),
        "torch CPU eager": decoder("cpu", args.layers, args.d, "op"),
    }
    if args.inductor == "yes" or (args.inductor == "auto" and not torch.cuda.is_available()):
        variants["torch CPU inductor"] = decoder("cpu", args.layers, args.d, "inductor")
    if torch.cuda.is_available():  # where a GPU is lent: torch's own accelerator eager
        variants["torch CUDA eager"] = decoder("cuda", args.layers, args.d, "op")
    first, tokens = {}, {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name, generate in variants.items():
            built = recorder.STATS.programs
            t0 = time.perf_counter()
            tokens[name] = generate(args.tokens)
            first[name] = time.perf_counter() - t0
            built = recorder.STATS.programs - built
            flushes = recorder.STATS.flushes
            generate(args.tokens)  # settled: every program built
            if name == "jaxdev fused eager":
                fused_counts = (built, recorder.STATS.flushes - flushes)
        before = recorder.STATS.programs
        times: dict[str, list[float]] = {name: [] for name in variants}
        for _ in range(args.rounds):
            for name, generate in variants.items():
                t0 = time.perf_counter()
                generate(args.tokens)
                times[name].append((time.perf_counter() - t0) / args.tokens)
    per_token = {name: statistics.median(ts) for name, ts in times.items()}
    same = all(t == tokens["torch CPU eager"] for t in tokens.values())
    print(f"{'variant':<22} {'ms/token':>9} {'first run s':>12} {'this / per-op':>14}")
    for name, t in per_token.items():
        print(f"{name:<22} {t * 1e3:>9.3f} {first[name]:>12.2f} {t / per_token['jaxdev per-op eager']:>14.2f}")
    print(f"same tokens in every variant: {same}; fused programs built while timed: {recorder.STATS.programs - before}")
    print(
        f"fused: {fused_counts[0]} programs built in the first run, {fused_counts[1]} programs run per {args.tokens} "
        f"tokens once settled, {recorder.STATS.moved} ops keyed with offsets as program data"
    )
    ratios = f"fused / compiled: {per_token['jaxdev fused eager'] / per_token['jaxdev compiled']:.2f}"
    if "torch CPU inductor" in per_token:
        ratios += f"; compiled jaxdev / torch CPU inductor: {per_token['jaxdev compiled'] / per_token['torch CPU inductor']:.2f}"
    print(ratios)


if __name__ == "__main__":
    main()
