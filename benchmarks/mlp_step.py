"""One training step of a 784-512-512-10 MLP (batch 128, Adam): jaxdev against torch on CPU and
against the same model written directly in JAX (eager, op by op, and jitted whole), in one run.

Prints the median step time of each and the ratios to jaxdev.

    python benchmarks/mlp_step.py [--steps 30]
"""

from __future__ import annotations

import argparse

import jax
import jax.numpy as jnp
import torch
from timing import ALLOCATOR, median_seconds, print_steps
from torch import nn

import jaxdev

BATCH, SIZES = 128, (784, 512, 512, 10)


def torch_step_fn(device: str):
    torch.manual_seed(0)
    layers = []
    for a, b in zip(SIZES, SIZES[1:]):
        layers += [nn.Linear(a, b), nn.ReLU()]
    model = nn.Sequential(*layers[:-1]).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    x = torch.randn(BATCH, SIZES[0]).to(device)
    y = torch.randint(0, SIZES[-1], (BATCH,)).to(device)

    def step():
        opt.zero_grad(set_to_none=True)
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss

    def wait(loss):
        loss.item()

    return step, wait


def jax_step_fn(jit: bool):
    key = jax.random.key(0)
    params = []
    for a, b in zip(SIZES, SIZES[1:]):
        key, k = jax.random.split(key)
        params.append((jax.random.normal(k, (a, b), jnp.float32) / jnp.sqrt(a), jnp.zeros((b,), jnp.float32)))
    x = jax.random.normal(key, (BATCH, SIZES[0]), jnp.float32)
    y = jax.random.randint(key, (BATCH,), 0, SIZES[-1])

    def loss_fn(params):
        h = x
        for i, (w, b) in enumerate(params):
            h = h @ w + b
            if i < len(params) - 1:
                h = jax.nn.relu(h)
        logp = jax.nn.log_softmax(h)
        return -jnp.mean(jnp.take_along_axis(logp, y[:, None], axis=1))

    state = {
        "params": params,
        "m": jax.tree.map(jnp.zeros_like, params),
        "v": jax.tree.map(jnp.zeros_like, params),
        "t": 0,
    }

    def adam(params, grads, m, v, t, lr=1e-3, b1=0.9, b2=0.999, eps=1e-8):
        m = jax.tree.map(lambda m_, g: b1 * m_ + (1 - b1) * g, m, grads)
        v = jax.tree.map(lambda v_, g: b2 * v_ + (1 - b2) * g * g, v, grads)
        mhat = jax.tree.map(lambda m_: m_ / (1 - b1**t), m)
        vhat = jax.tree.map(lambda v_: v_ / (1 - b2**t), v)
        params = jax.tree.map(lambda p, a, b: p - lr * a / (jnp.sqrt(b) + eps), params, mhat, vhat)
        return params, m, v

    def update(params, m, v, t):
        loss, grads = jax.value_and_grad(loss_fn)(params)
        params, m, v = adam(params, grads, m, v, t)
        return loss, params, m, v

    run = jax.jit(update) if jit else update

    def step():
        state["t"] += 1
        loss, state["params"], state["m"], state["v"] = run(state["params"], state["m"], state["v"], state["t"])
        return loss

    return step, lambda loss: loss.block_until_ready()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=30)
    args = parser.parse_args()
    print(f"MLP {'-'.join(map(str, SIZES))}, batch {BATCH}, Adam; jax {jax.__version__} on {jax.devices()[0].platform}")
    print(ALLOCATOR)
    jaxdev.reset_fallback_counts()
    results = {
        "jaxdev (torch on jax)": median_seconds(*torch_step_fn("jax"), args.steps),
        "torch CPU": median_seconds(*torch_step_fn("cpu"), args.steps),
        "JAX eager": median_seconds(*jax_step_fn(jit=False), args.steps),
        "JAX jit": median_seconds(*jax_step_fn(jit=True), args.steps),
    }
    print_steps(results, "jaxdev (torch on jax)")


if __name__ == "__main__":
    main()
