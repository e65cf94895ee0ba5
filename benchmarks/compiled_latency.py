"""The compiled path's latency-bound calls (issue 37 item 2): issue 37's GPT LM, batch 1, its forward
of 32 tokens and one greedy decoding step over a static KV cache, as jaxdev's `torch.compile(model,
backend="jax")` runs them against the same forward written by hand in `jax.jit`, in one process.

On a TPU v5e the batch-1 forward took 0.76 ms under torchax's jitted path and 1.41 ms compiled by
jaxdev: at that size a call is the host's work around one small program, and the host's work is
the same on CPU. So the model is shrunk until its arithmetic is negligible (6 layers as in issue 37,
d 32, vocabulary 256) and every side is timed in one process, interleaved round by round, each call
on a drained device, its result waited for (the forward's logits, the step's token) outside the
call's own CPU time:

* jax.jit: benchmarks/tpu_gpt_jax.py's forward and decoding step (caches donated), the stricter
  reference (torchax's jitted path adds its own Python; it cannot share a process with jaxdev);
* jaxdev compiled: `torch.compile(..., backend="jax")`, eval, under `torch.no_grad()`;
* jaxdev compiled, fused eager: the same compiled call inside `jaxdev.eager_mode("fused")`;
* jaxdev fused eager, per-op eager: the model not compiled, in that eager mode (`--eager`; issue 37
  item 3 asks fused eager's batch-1 forward to be within 2x of the compiled one);
* torch CPU eager: the model on CPU, for scale.

Columns: host us (CPU time of the calling thread per call, `time.thread_time`: what load on shared
cores barely moves), wall us (the call and its wait), and each one's ratio to jax.jit's. A decoding
step uploads its position as a tensor in the call, as benchmarks/tpu_check.sh's loop does.
`--compare NAME` adds a row of jaxdev compiled with one of the compiled path's cuts undone
(COMPARISONS below): the two rows' calls alternate call by call on the same compiled model, so both
meet the same load and the same caches: before/after in one process.

    python benchmarks/compiled_latency.py [--rounds 7] [--calls 200] [--only fwd,decode] [--compare NAME]
        [--eager fused,op]
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
os.environ.setdefault("JAXDEV_CACHE_DIR", tempfile.mkdtemp(prefix="jaxdev-benchmark-cache-"))

import jax
import jax.numpy as jnp
import numpy as np
import quiet
import torch
import tpu_gpt
import tpu_gpt_jax
from timing import ALLOCATOR

import jaxdev
from jaxdev.graphs import outputs as graph_outputs
from jaxdev.graphs import program as graph_program

tpu_gpt.SIZES["latency"] = dict(layers=6, d=32, heads=4, vocab=256, batch=1, seq=32, fwd_tokens=32, new_tokens=32)

# --compare NAME: the (module, attribute, value) settings that undo one cut, for the row "before NAME";
# the attributes' own values are what the "jaxdev compiled" row measures; "all" undoes every cut
CUTS: dict[str, list[tuple[object, str, object]]] = {
    "prefetch": [(graph_program, "PREFETCH_ON_CPU", True)],  # the check flag's host copy started on CPU too
    "match": [(graph_program, "NATIVE_MATCH", False)],  # Inputs and Guard in Python, no native key
    "read": [(graph_outputs, "FAST_FLAG_READ", False)],  # the check flag read by bool(array)
}
COMPARISONS = {**CUTS, "all": [setting for settings in CUTS.values() for setting in settings]}
BEFORE = "before "


class Side:
    """One implementation of a call: `call()` (timed) returns what `wait(result)` waits for; `context`
    is entered around its rounds (an eager mode, a no_grad); `read(result)` gives numpy values to
    compare."""

    def __init__(self, call, wait, read, context=contextlib.nullcontext, toggle=None):
        self.call, self.wait, self.read, self.context, self.toggle = call, wait, read, context, toggle


def _jax_wait(result) -> None:
    jax.block_until_ready(result)


def _jaxdev_wait(result) -> None:
    jax.block_until_ready(jaxdev.tensor.read(result))  # a pending fused value is flushed here


def _no_grad(mode: str | None):
    """The context a side's calls run in: no_grad, and jaxdev's eager mode if it names one."""

    @contextlib.contextmanager
    def context():
        with torch.no_grad(), jaxdev.eager_mode(mode) if mode else contextlib.nullcontext():
            yield

    return context


# The model run eagerly, not compiled, in these jaxdev eager modes (--eager; "" for none)
EAGER_ROWS = ["fused", "op"]


# --- the batch-1 forward ---------------------------------------------------------------------------


def forward_sides(cfg) -> dict[str, Side]:
    prompt = tpu_gpt.numpy_batch(cfg)[2]
    jitted = tpu_gpt_jax.forward_call(cfg, jnp.float32)
    sides = {"jax.jit": Side(jitted, _jax_wait, np.asarray)}
    model = tpu_gpt.torch_model(cfg, torch.float32).eval()
    on_jax = tpu_gpt.torch_model(cfg, torch.float32).to("jax").eval()
    compiled, tokens = torch.compile(on_jax, backend="jax"), torch.from_numpy(prompt).to("jax")
    run = lambda: compiled(tokens)
    read = lambda r: r.cpu().numpy()
    sides["jaxdev compiled"] = Side(run, _jaxdev_wait, read, _no_grad(None))
    for name, toggle in COMPARISONS.items():
        sides[BEFORE + name] = Side(run, _jaxdev_wait, read, _no_grad(None), toggle)
    sides["compiled in fused eager"] = Side(run, _jaxdev_wait, read, _no_grad("fused"))
    for mode in EAGER_ROWS:  # the model not compiled (issue 37 item 3: fused's forward <= 2x compiled's)
        sides[f"{mode} eager"] = Side(lambda: on_jax(tokens), _jaxdev_wait, read, _no_grad(mode))
    cpu_tokens = torch.from_numpy(prompt)
    sides["torch CPU eager"] = Side(lambda: model(cpu_tokens), lambda r: None, lambda r: r.numpy(), _no_grad(None))
    return sides


# --- one decoding step -------------------------------------------------------------------------------


def _jax_decoder(cfg):
    """() -> the next token: tpu_gpt_jax's step, its caches donated, cycling over the cache's positions."""
    p = tpu_gpt_jax.params(cfg, jnp.float32)
    step = jax.jit(functools.partial(tpu_gpt_jax._decode_one, cfg=cfg), donate_argnums=(2,))
    shape = (1, cfg.heads, cfg.new_tokens, cfg.d // cfg.heads)
    state = {"i": 0, "token": jnp.zeros((1, 1), jnp.int32)}
    state["caches"] = [(jnp.zeros(shape, jnp.float32), jnp.zeros(shape, jnp.float32)) for _ in range(cfg.layers)]

    def call():
        i = state["i"]
        state["i"] = (i + 1) % cfg.new_tokens
        state["token"], state["caches"] = step(p, state["token"], state["caches"], np.array([i], np.int32))
        return state["token"]

    return call


def _torch_decoder(cfg, device: str, compile_it: bool):
    """() -> the next token [1, 1]: tpu_gpt's decode_step on `device`, the position uploaded per call."""
    model = tpu_gpt.torch_model(cfg, torch.float32).to(device).eval()
    step = torch.compile(model.decode_step, backend="jax") if compile_it else model.decode_step
    state = {"i": 0, "token": torch.zeros(1, 1, dtype=torch.long, device=device)}
    state["caches"] = tpu_gpt.empty_caches(cfg, torch.float32, device)

    def call():
        i = state["i"]
        state["i"] = (i + 1) % cfg.new_tokens
        state["token"] = step(state["token"], state["caches"], torch.tensor([i], device=device))
        return state["token"]

    return call


def decode_sides(cfg) -> dict[str, Side]:
    compiled = _torch_decoder(cfg, "jax", True)
    read = lambda r: r.cpu().numpy()
    sides = {"jax.jit": Side(_jax_decoder(cfg), _jax_wait, np.asarray)}
    sides["jaxdev compiled"] = Side(compiled, _jaxdev_wait, read, _no_grad(None))
    for name, toggle in COMPARISONS.items():  # the same model and caches: its calls alternate with the row's
        sides[BEFORE + name] = Side(compiled, _jaxdev_wait, read, _no_grad(None), toggle)
    fused = _torch_decoder(cfg, "jax", True)  # its own caches: the sides' tokens are compared call by call
    sides["compiled in fused eager"] = Side(fused, _jaxdev_wait, read, _no_grad("fused"))
    for mode in EAGER_ROWS:
        sides[f"{mode} eager"] = Side(_torch_decoder(cfg, "jax", False), _jaxdev_wait, read, _no_grad(mode))
    sides["torch CPU eager"] = Side(_torch_decoder(cfg, "cpu", False), lambda r: None, lambda r: r.numpy())
    return sides


# --- timing ------------------------------------------------------------------------------------------


@contextlib.contextmanager
def _toggled(settings):
    kept = [(module, attribute, getattr(module, attribute)) for module, attribute, _ in settings or ()]
    for module, attribute, value in settings or ():
        setattr(module, attribute, value)
    try:
        yield
    finally:
        for module, attribute, value in kept:
            setattr(module, attribute, value)


def _round(sides: list[Side], calls: int) -> list[tuple[float, float]]:
    """Per side, median (thread CPU us, wall us with the wait) of `calls` calls, each on a drained
    device; several sides (one model, toggled) take turns call by call."""
    cpu, wall = [[] for _ in sides], [[] for _ in sides]
    with sides[0].context():
        for _ in range(calls):
            for k, side in enumerate(sides):
                with _toggled(side.toggle):
                    w0, c0 = time.perf_counter(), time.thread_time()
                    result = side.call()
                    cpu[k].append(time.thread_time() - c0)
                    side.wait(result)
                    wall[k].append(time.perf_counter() - w0)
    return [(statistics.median(c) * 1e6, statistics.median(w) * 1e6) for c, w in zip(cpu, wall)]


def _settle(sides: dict[str, Side]) -> dict[str, list]:
    """Each side's first results (compiles, traces), read as numpy, then a few calls more."""
    first = {}
    for label, side in sides.items():
        with side.context(), _toggled(side.toggle):
            first[label] = [side.read(side.call()) for _ in range(3)]
            for _ in range(5):
                side.wait(side.call())
    return first


def compare(title: str, sides: dict[str, Side], rounds: int, calls: int) -> None:
    first = _settle(sides)
    cpu = {label: [] for label in sides}
    wall = {label: [] for label in sides}
    # the toggled rows take turns with "jaxdev compiled", call by call
    paired = ["jaxdev compiled", *(label for label in sides if label.startswith(BEFORE))]
    groups = [paired] + [[label] for label in sides if label not in paired]
    for r in range(rounds):
        for group in groups[r % len(groups) :] + groups[: r % len(groups)]:  # each group in each place
            for label, (c, w) in zip(group, _round([sides[label] for label in group], calls)):
                cpu[label].append(c)
                wall[label].append(w)
    c_ref, w_ref = statistics.median(cpu["jax.jit"]), statistics.median(wall["jax.jit"])
    print(f"\n{title}: per call, medians of {rounds} interleaved rounds of {calls} calls")
    print(f"  {'':<28} {'host us':>9} {'/ jax.jit':>9} {'wall us':>9} {'/ jax.jit':>9}   results")
    for label in sides:
        c, w = statistics.median(cpu[label]), statistics.median(wall[label])
        print(f"  {label:<28} {c:>9.1f} {c / c_ref:>8.2f}x {w:>9.1f} {w / w_ref:>8.2f}x   {_agreement(first, label)}")


def _agreement(first: dict[str, list], label: str) -> str:
    """How `label`'s first results compare with jax.jit's and with jaxdev compiled's."""
    if label.startswith(BEFORE):
        return "(tests compare its bits)"  # its decoding steps continue jaxdev compiled's
    mine = first[label]
    words = []
    for other in ("jax.jit", "jaxdev compiled"):
        if other == label:
            continue
        theirs = first[other]
        if all(a.shape == b.shape and np.array_equal(a, b) for a, b in zip(mine, theirs)):
            words.append(f"= {other}")
        elif mine[0].dtype.kind == "f":
            diff = max(float(np.max(np.abs(a - b))) for a, b in zip(mine, theirs))
            words.append(f"{other} +-{diff:.1e}")
        else:
            words.append(f"!= {other}")
    return ", ".join(words)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--only", default="fwd,decode")
    parser.add_argument("--compare", action="append", choices=sorted(COMPARISONS), default=[])
    parser.add_argument("--eager", default=",".join(EAGER_ROWS), help="the model run eagerly in these modes")
    args = parser.parse_args()
    EAGER_ROWS[:] = [m for m in args.eager.split(",") if m]
    for name in set(COMPARISONS) - set(args.compare):
        del COMPARISONS[name]
    cfg = tpu_gpt.Config("latency")
    print(f"torch {torch.__version__}, jax {jax.__version__}, {jax.devices()[0].platform}; {ALLOCATOR}")
    print(cfg.describe() + ", float32")
    # dynamo's log notes off once for the whole run: quiet.quietly per call costs ~1 ms of logging setLevel
    with quiet.quiet_compilers(warnings_too=False):
        if "fwd" in args.only:
            compare(f"batch-1 forward of {cfg.fwd_tokens} tokens", forward_sides(cfg), args.rounds, args.calls)
        if "decode" in args.only:
            compare("batch-1 decoding step", decode_sides(cfg), args.rounds, args.calls)


if __name__ == "__main__":
    main()
