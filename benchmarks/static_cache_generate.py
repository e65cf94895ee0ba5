"""Hugging Face `generate` with a static KV cache, on jax against CPU, in one process: a tiny GPT-2 of
random weights (no download), greedy decoding, tokens per second and whether both devices chose the
same tokens.

A static cache (transformers' StaticCache) writes each new position with `keys.index_copy_(2, pos, k)`
into a cache of `--cache-len` positions per layer: on jax that write gives the cache's buffer to its
program (jaxdev/ops/kit/indexed_writes.py), so a step costs what it computes, not a copy of the cache.

Needs transformers, which jaxdev does not depend on: `pip install "torch==<the installed one>"
transformers` (naming torch keeps pip from replacing it).

    python benchmarks/static_cache_generate.py [--new-tokens 32] [--cache-len 4096] [--repeat 3]
"""

from __future__ import annotations

import argparse
import copy
import statistics
import sys
import time

import torch
from torchvision_import import import_torchvision

import jaxdev


def model_and_prompt(prompt_len: int):
    import_torchvision()  # transformers imports it where it is installed: PyPI's CUDA build needs its stub
    from transformers import GPT2Config, GPT2LMHeadModel

    config = GPT2Config(
        n_layer=2,
        n_embd=128,
        n_head=4,
        vocab_size=512,
        n_positions=8192,
        bos_token_id=0,
        eos_token_id=0,
        pad_token_id=0,
    )
    torch.manual_seed(0)
    model = GPT2LMHeadModel(config).eval()
    prompt = torch.randint(0, config.vocab_size, (1, prompt_len), generator=torch.Generator().manual_seed(1))
    return model, prompt


def generate(model, prompt, new_tokens: int, cache_len: int) -> torch.Tensor:
    from transformers import StaticCache

    # cache_len 0: generate's own static cache, as long as the prompt and the new tokens
    if cache_len:
        cache = {"cache": StaticCache(config=model.config, max_cache_len=cache_len)}
    else:
        cache = {"cache_implementation": "static"}
    with torch.no_grad():
        out = model.generate(
            prompt,
            attention_mask=torch.ones_like(prompt),
            max_new_tokens=new_tokens,
            min_new_tokens=new_tokens,
            do_sample=False,
            **cache,
        )
    return out.cpu()


def tokens_per_second(model, prompt, new_tokens: int, cache_len: int, repeat: int) -> tuple[float, torch.Tensor]:
    """Median new tokens per second over `repeat` calls, after one that compiles; and the tokens."""
    tokens = generate(model, prompt, new_tokens, cache_len)
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        generate(model, prompt, new_tokens, cache_len)
        times.append(time.perf_counter() - t0)
    return new_tokens / statistics.median(times), tokens


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--new-tokens", type=int, default=32)
    parser.add_argument("--prompt-len", type=int, default=8)
    parser.add_argument(
        "--cache-len", type=int, default=4096, help="positions the static cache holds (0: generate's own)"
    )
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    try:
        import transformers
    except ImportError:
        print("transformers is not installed: nothing measured (see this script's docstring)")
        sys.exit(0)
    print(f"torch {torch.__version__}, transformers {transformers.__version__}; GPT-2 2 layers, 128 wide, random")
    cache = f"a static cache of {args.cache_len} positions" if args.cache_len else "generate's own static cache"
    print(f"prompt {args.prompt_len} tokens, {args.new_tokens} new, greedy, {cache}")
    model, prompt = model_and_prompt(args.prompt_len)
    on_jax = copy.deepcopy(model).to("jax")
    rate_cpu, tokens_cpu = tokens_per_second(model, prompt, args.new_tokens, args.cache_len, args.repeat)
    rate_jax, tokens_jax = tokens_per_second(on_jax, prompt.to("jax"), args.new_tokens, args.cache_len, args.repeat)
    print(f"cpu: {rate_cpu:8.1f} tokens/s")
    print(f"jax: {rate_jax:8.1f} tokens/s (ops on the CPU fallback: {sum(jaxdev.fallback_counts().values())})")
    same = torch.equal(tokens_cpu, tokens_jax)
    print(f"same tokens: {'yes' if same else 'no'}")
    if not same:
        print(f"cpu: {tokens_cpu.tolist()}\njax: {tokens_jax.tolist()}")


if __name__ == "__main__":
    main()
