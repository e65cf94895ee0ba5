"""One AdamW step over a Transformer-like parameter list (100 tensors: 50 of 256x256, 50 of 256):
jaxdev against torch on CPU and against the same update written in JAX, in one run.

torch.optim steps with foreach ops on every device but CPU (`_foreach_lerp_`, `_foreach_addcdiv_`,
...); jaxdev runs each call as one program over all the tensors (jaxdev/ops/foreach.py). The rows:

* jaxdev, foreach: torch.optim's default on the jax device (its calls replayed natively per key:
  jaxdev/csrc/foreach_ops.cpp);
* jaxdev, foreach in Python: the same with the native replay off (each call through its Python kernel);
* jaxdev, fused=True: `torch.optim.AdamW(fused=True)`, `aten::_fused_adamw_` as one program over
  every tensor (jaxdev/ops/fused_optimizers.py), plus the foreach increment of the step counts;
* jaxdev, per tensor: `foreach=False`, one op per tensor (what every step cost before foreach);
* torch CPU: its default there (`foreach=False`); torch CPU, fused=True: CPU's fused kernel, the values
  jaxdev's fused step reproduces;
* JAX, 7 programs: the same seven foreach calls, each one jitted program over the lists (jaxdev's
  structure with no dispatch around it);
* JAX, 1 program: the whole update jitted into one program with its state donated (optax-style),
  the floor for an eager optimizer.

Prints the median step time of each and the ratios to jaxdev's foreach step.

`--host` measures host time alone (issue 37 item 6: on a TPU the fused foreach step was host-bound):
main-thread CPU time (time.thread_time) per step under fused eager, foreach and fused=True, against the
one jitted program's in the same process, interleaved round by round; the ratios to that program.

    python benchmarks/optimizer_step.py [--steps 30] [--host] [--rounds 7]
"""

from __future__ import annotations

import argparse
import functools
import statistics
import time

import jax
import jax.numpy as jnp
import torch
from timing import ALLOCATOR, median_seconds, print_steps

import jaxdev
from jaxdev import native, tensor

SHAPES = [(256, 256)] * 50 + [(256,)] * 50
LR, BETAS, EPS, WD = 1e-3, (0.9, 0.999), 1e-8, 1e-2


def torch_step(device: str, foreach: bool, fused: bool = False):
    torch.manual_seed(0)
    params = [torch.nn.Parameter(torch.randn(s).to(device)) for s in SHAPES]
    for p in params:
        p.grad = torch.randn(p.shape).to(device)
    opt = torch.optim.AdamW(
        params, lr=LR, betas=BETAS, eps=EPS, weight_decay=WD, foreach=None if fused else foreach, fused=fused or None
    )
    if device == "jax":
        wait = lambda _: jax.block_until_ready(tensor.read(params[-1]))
    elif device == "cuda":
        wait = lambda _: torch.cuda.synchronize()
    else:
        wait = lambda _: None
    return opt.step, wait


def in_python(variant):
    """`variant` (a step, its wait) with the native foreach replay off around each step."""
    fn, wait = variant

    def step():
        previous = native.module.foreach_replay(False)
        try:
            return fn()
        finally:
            native.module.foreach_replay(previous)

    return step, wait


def _moments(ps, ms, vs, gs):
    ps = [p * (1 - LR * WD) for p in ps]
    ms = [m + (1 - BETAS[0]) * (g - m) for m, g in zip(ms, gs)]
    vs = [v * BETAS[1] + (1 - BETAS[1]) * g * g for v, g in zip(vs, gs)]
    return ps, ms, vs


def _apply(ps, ms, vs, step):
    bc1, bc2 = 1 - BETAS[0] ** step, 1 - BETAS[1] ** step
    return [p - (LR / bc1) * m / (jnp.sqrt(v) / jnp.sqrt(bc2) + EPS) for p, m, v in zip(ps, ms, vs)]


def jax_step(programs: int):
    key = jax.random.PRNGKey(0)
    # float32 throughout, as torch's parameters: importing jaxdev turns JAX's x64 on, under which the
    # defaults are float64 (emulated on a TPU: its compile took past the chip check's budget)
    f32 = jnp.float32
    ps = [jax.random.normal(jax.random.fold_in(key, i), s, f32) for i, s in enumerate(SHAPES)]
    gs = [jax.random.normal(jax.random.fold_in(key, 1000 + i), s, f32) for i, s in enumerate(SHAPES)]
    state = {"p": ps, "m": [jnp.zeros(s, f32) for s in SHAPES], "v": [jnp.zeros(s, f32) for s in SHAPES], "t": 0}
    donate = functools.partial(jax.jit, donate_argnums=(0, 1, 2))
    if programs == 1:

        @donate
        def update(ps, ms, vs, gs, step):
            ps, ms, vs = _moments(ps, ms, vs, gs)
            return _apply(ps, ms, vs, step), ms, vs

        def step():
            state["t"] += 1
            state["p"], state["m"], state["v"] = update(state["p"], state["m"], state["v"], gs, f32(state["t"]))
            return state["p"]

        return step
    # AdamW's seven foreach calls (torch/optim/adam.py, capturable=False), each one jitted program.
    lists = functools.partial(jax.jit, donate_argnums=(0,))
    decay = lists(lambda ps: [p * (1 - LR * WD) for p in ps])
    lerp = lists(lambda ms, gs: [m + (1 - BETAS[0]) * (g - m) for m, g in zip(ms, gs)])
    mul = lists(lambda vs: [v * BETAS[1] for v in vs])
    addcmul = lists(lambda vs, gs: [v + (1 - BETAS[1]) * g * g for v, g in zip(vs, gs)])
    sqrt = jax.jit(lambda vs: [jnp.sqrt(v) for v in vs])
    div = lists(lambda ds, cs: [d / c for d, c in zip(ds, cs)])
    add = lists(lambda ds: [d + EPS for d in ds])
    addcdiv = lists(lambda ps, ms, ds, ss: [p + s * m / d for p, m, d, s in zip(ps, ms, ds, ss)])

    def step():
        state["t"] += 1
        t = state["t"]
        n = len(SHAPES)
        state["p"] = decay(state["p"])
        state["m"] = lerp(state["m"], gs)
        state["v"] = addcmul(mul(state["v"]), gs)
        denom = add(div(sqrt(state["v"]), jnp.full(n, (1 - BETAS[1] ** t) ** 0.5, f32)))
        state["p"] = addcdiv(state["p"], state["m"], denom, jnp.full(n, -LR / (1 - BETAS[0] ** t), f32))
        return state["p"]

    return step


def host_times(rounds: int, steps: int) -> dict[str, float]:
    """Median main-thread CPU ms per step of fused eager's foreach and fused=True steps and of the one
    jitted program, interleaved round by round (what this machine's other load does falls on all alike).
    Each step is waited for outside the timed part, so XLA's threads never compute one while another is
    timed. Each round starts with 5 untimed steps: on this 2-core CPU a foreach step right after 10 jitted
    ones took 4.7 ms of host time, the next ones 4.0, 3.6, 3.5, then 3.0-3.2 (one run)."""
    with jaxdev.eager_mode("fused"):
        variants = {
            "fused eager, foreach": torch_step("jax", True),
            "fused eager, fused=True": torch_step("jax", False, fused=True),
            "JAX, 1 program": (jax_step(1), lambda ps: jax.block_until_ready(ps[-1])),
        }
        times: dict[str, list] = {name: [] for name in variants}
        for _ in range(rounds + 1):  # the first round builds every program, untimed
            for name, (fn, wait) in variants.items():
                for _ in range(5):  # a round's first steps after another variant's run slower, untimed
                    wait(fn())
                spent = 0.0
                for _ in range(steps):
                    t0 = time.thread_time()
                    r = fn()
                    spent += time.thread_time() - t0
                    wait(r)
                times[name].append(spent / steps * 1e3)
    return {name: statistics.median(t[1:]) for name, t in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--host", action="store_true", help="host time under fused eager against one jitted program")
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    if args.host:
        ms = host_times(args.rounds, args.steps)
        print(f"AdamW over {len(SHAPES)} tensors, main-thread CPU ms per step ({args.rounds} rounds, median)")
        for name, t in ms.items():
            print(f"{name:<26} {t:>7.3f} {t / ms['JAX, 1 program']:>6.2f}x the jitted program")
        return
    total = sum(torch.Size(s).numel() for s in SHAPES)
    print(
        f"AdamW over {len(SHAPES)} tensors ({total / 1e6:.1f}M floats); jax {jax.__version__} on {jax.devices()[0].platform}"
    )
    print(ALLOCATOR)
    jaxdev.reset_fallback_counts()
    wait_jax = lambda ps: jax.block_until_ready(ps[-1])
    steps = {
        "jaxdev, foreach": torch_step("jax", True),
        **({"jaxdev, foreach in Python": in_python(torch_step("jax", True))} if native.module is not None else {}),
        "jaxdev, fused=True": torch_step("jax", False, fused=True),
        "jaxdev, per tensor": torch_step("jax", False),
        "torch CPU": torch_step("cpu", False),
        "torch CPU, fused=True": torch_step("cpu", False, fused=True),
        "JAX, 7 programs": (jax_step(7), wait_jax),
        "JAX, 1 program": (jax_step(1), wait_jax),
    }
    # interleaved: each variant's steps in three rounds, so load on the machine falls on all alike; the
    # best round's median counts
    results = {name: float("inf") for name in steps}
    for _ in range(3):
        for name, (fn, wait) in steps.items():
            results[name] = min(results[name], median_seconds(fn, wait, max(args.steps // 3, 1)))
    print_steps(results, "jaxdev, foreach")


if __name__ == "__main__":
    main()
