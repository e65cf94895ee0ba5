"""How benchmarks/tpu_check.sh measures, shared by its three processes (tpu_jaxdev.py, tpu_torchax.py,
tpu_jaxjit.py), so that every implementation is timed and counted the same way.

* ms per step: variants of one process run round by round (interleaved); a round runs a variant's
  step `steps` times and waits once for the last result (`sync_each`: waits after every call, for
  latency-bound calls such as a batch-1 forward); the figure is the median over rounds.
* host ms per step: the median time until the step's Python call returns, its results waited for
  outside the timing: dispatch, autograd, recording, guards, tracing-cache lookups.
* programs per step: XLA executions counted by JAX's profiler over settled steps (the TPU's "XLA
  Modules" line, one event per executable run on the chip; on CPU, PJRT's execute events on the
  host). Nothing counts itself: a per-op step's hundreds of programs are counted as a whole-step
  program is.
* first step: the first call of a freshly built step until its result is on the host; `first_cache`
  says whether the process's compile caches were empty when it started. benchmarks/tpu_first.py
  measures it in fresh processes (cold: empty caches; warm: the caches the cold run filled).

Rows go to $TPUCHECK_ROWS (JSON lines; a row may come in parts, merged by its key: a row cut short
still says what it measured) and to stdout as they finish.
"""

from __future__ import annotations

import collections
import contextlib
import json
import os
import re
import shutil
import statistics
import sys
import tempfile
import time

import jax

ROWS = os.environ.get("TPUCHECK_ROWS")
RUN = os.environ.get("TPUCHECK_RUN", "adhoc")
_COMPILE_EVENTS = ("/jax/core/compile/backend_compile_duration",)
_CACHE_HIT_EVENTS = ("/jax/compilation_cache/cache_hits",)


class Compiles:
    """XLA compiles and persistent-cache loads in this process, from JAX's monitoring events, and the
    seconds spent in XLA's compiler (what of a first step is the compiler's, the rest the host's)."""

    compiled = 0
    loaded = 0
    seconds = 0.0

    @classmethod
    def total(cls) -> int:
        return cls.compiled + cls.loaded


def _on_event(event: str, *args, **kwargs) -> None:
    if event in _COMPILE_EVENTS:
        Compiles.compiled += 1
        Compiles.seconds += args[0] if args and isinstance(args[0], float) else 0.0
    elif event in _CACHE_HIT_EVENTS:
        Compiles.loaded += 1


jax.monitoring.register_event_listener(_on_event)
jax.monitoring.register_event_duration_secs_listener(_on_event)


def emit(row: dict) -> None:
    """One (part of a) row: appended to $TPUCHECK_ROWS, printed."""
    row = {"run": RUN, "t": time.time(), **row}
    if ROWS:
        with open(ROWS, "a") as f:
            f.write(json.dumps(row, default=str) + "\n")
    shown = {k: v for k, v in row.items() if k not in ("run", "t", "dots", "counters")}
    print("ROW " + json.dumps(shown, default=lambda v: round(v, 3) if isinstance(v, float) else str(v)), flush=True)


def key(workload: str, impl: str, mode: str) -> dict:
    """A row's key; a jaxdev row under a JAXDEV_MATH set names it in its mode ("fused [auto]"), so that
    tpu_check's runs of one mode under several settings (TPUCHECK_LM_MATHS) stay apart; unset, the
    platform's default (jaxdev/math_settings.py: near on an accelerator, auto on CPU)."""
    math = os.environ.get("JAXDEV_MATH", "").strip().lower()
    if impl == "jaxdev" and math:
        mode = f"{mode} [{math}]"
    return {"workload": workload, "impl": impl, "mode": mode}


class Budget:
    """A soft deadline: nothing new starts after it (the shell's `timeout` is the hard one)."""

    def __init__(self, seconds: float):
        self.end = time.monotonic() + seconds

    def left(self) -> float:
        return self.end - time.monotonic()


def settle(call, wait, limit: int = 8) -> tuple[int, float]:
    """Runs the step until one compiles nothing (an optimizer's second step, fused eager's storm guard
    and learned segments all build programs after the first); returns the steps run and their seconds
    (with the first step's, the time to a steady step: fused eager's second step compiles a program
    as large as its first, the first having created the optimizer's state inside it)."""
    t0 = time.perf_counter()
    for n in range(1, limit + 1):
        before = Compiles.total()
        wait(call())
        if Compiles.total() == before:
            return n, time.perf_counter() - t0
    return limit, time.perf_counter() - t0


def interleaved(variants: dict, rounds: int, steps: int, sync_each: bool, budget: Budget) -> dict[str, float]:
    """Median seconds per call of each variant {name: (call, wait)}, round by round; stops adding
    rounds when the budget runs out (at least one round)."""
    times = {name: [] for name in variants}
    for r in range(rounds):
        if r and budget.left() < 0:
            break
        for name, (call, wait) in variants.items():
            t0 = time.perf_counter()
            if sync_each:
                for _ in range(steps):
                    wait(call())
            else:
                for _ in range(steps):
                    result = call()
                wait(result)
            times[name].append((time.perf_counter() - t0) / steps)
    return {name: statistics.median(ts) for name, ts in times.items() if ts}


def host_seconds(call, wait, n: int) -> float:
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        result = call()
        times.append(time.perf_counter() - t0)
        wait(result)
    return statistics.median(times)


_HOST_EXECUTE = ("ExecuteHelperOnSingleDevice", "ExecuteHelper", "ExecuteSharded", "::Execute")


def profiled_planes(call, wait, steps: int) -> list:
    """The profiler's planes (devices, host threads) from a session around `steps` settled steps."""
    from jax._src.lib import _profiler

    session = _profiler.ProfilerSession()
    try:
        for _ in range(steps):
            wait(call())
    finally:
        data = session.stop()
    return list(jax.profiler.ProfileData.from_serialized_xspace(data).planes)


def count_programs(call, wait, steps: int) -> tuple[float | None, str]:
    """(XLA executions per step, how counted) from a profiler session around `steps` settled steps."""
    try:
        planes = profiled_planes(call, wait, steps)
    except Exception as e:  # a profiler that cannot start here: say so, measure the rest
        return None, f"profiler failed: {type(e).__name__}: {str(e)[:80]}"
    device, host = collections.Counter(), collections.Counter()
    for plane in planes:
        for line in plane.lines:
            if plane.name.startswith("/device:") and line.name == "XLA Modules":
                device[plane.name] += sum(1 for _ in line.events)
            elif plane.name.startswith("/host:"):
                for event in line.events:
                    if "Execute" in event.name:
                        host[event.name] += 1
    if device:
        return max(device.values()) / steps, "profiler: device 'XLA Modules' events"
    for marker in _HOST_EXECUTE:
        found = [(n, c) for n, c in host.items() if n.endswith(marker) or marker in n]
        if found:
            name, n = max(found, key=lambda nc: nc[1])
            return n / steps, f"profiler: host '{name}' events"
    return 0.0, "profiler: no execution events seen"


_PRODUCT = re.compile(r"stablehlo\.(dot_general|convolution)\b")
_PRECISION = re.compile(r"precision = \[(\w+), (\w+)\]")
_TYPES = re.compile(r": \((tensor<[^>]*>), (tensor<[^>]*>)\) -> (tensor<[^>]*>)")


def _element(tensor_type: str) -> str:
    return tensor_type[len("tensor<") : -1].split("x")[-1]


@contextlib.contextmanager
def dots_lowered():
    """Collects the products (dot_general, convolution) of every program JAX lowers inside the block:
    {"lhs x rhs -> result precision": count}, from StableHLO dumped by `jax_dump_ir_to`."""
    folder = tempfile.mkdtemp(prefix="tpucheck-ir-")
    found: dict[str, int] = {}
    from jax._src import config

    previous = config.jax_dump_ir_to.value
    jax.config.update("jax_dump_ir_to", folder)
    try:
        yield found
    finally:
        jax.config.update("jax_dump_ir_to", previous)
        for name in sorted(os.listdir(folder)):
            with open(os.path.join(folder, name), errors="replace") as f:
                for line in f:
                    product, types = _PRODUCT.search(line), _TYPES.search(line)
                    if product and types:
                        precision = _PRECISION.search(line)
                        lhs, rhs, out = (_element(t) for t in types.groups())
                        how = precision.group(1) if precision else "no precision attribute"
                        sig = f"{product.group(1)} {lhs} x {rhs} -> {out} {how}"
                        found[sig] = found.get(sig, 0) + 1
        shutil.rmtree(folder, ignore_errors=True)


def meta() -> dict:
    import torch

    device = jax.devices()[0]
    return {
        "device": getattr(device, "device_kind", str(device)),
        "platform": device.platform,
        "jax": jax.__version__,
        "torch": torch.__version__,
        "python": sys.version.split()[0],
        # what changes jaxdev's arithmetic or programs (JAXDEV_MATH: its own transcendentals off CPU)
        "env": {k: v for k, v in os.environ.items() if k.startswith(("JAXDEV_", "XLA_FLAGS", "LIBTPU"))},
    }


class Variant:
    """What a builder returns: the step `call() -> result`, `wait(result)` (blocks until the device
    is done with it), `check(result)`: what the first call computed, kept in the row as `check_name`
    (step 1's loss, greedy tokens) to compare implementations, `dots`: collect the products the
    first call lowers (tpu_check's precision check), and fields for its row."""

    def __init__(self, call, wait, check=None, check_name="check", dots=False, **info):
        self.call, self.wait, self.info = call, wait, info
        self.check, self.check_name, self.dots = check, check_name, dots


def first_call(variant: Variant) -> dict:
    before, xla = Compiles.total(), Compiles.seconds
    with dots_lowered() if variant.dots else contextlib.nullcontext() as dots:
        t0 = time.perf_counter()
        result = variant.call()
        variant.wait(result)
        first = time.perf_counter() - t0
    row = {"first_s": first, "built_first": Compiles.total() - before, "first_xla_s": Compiles.seconds - xla}
    if variant.check is not None:
        row[variant.check_name] = variant.check(result)
    if dots is not None:
        row["dots"] = dots
    return row


def measure(workload, impl, variants, *, rounds, steps, sync_each, budget, per=1, counters=None, extra=None):
    """The whole protocol for one workload's variants {mode: builder() -> Variant}: build and
    first-call each (a row part per variant as it finishes), settle, interleave, host time, count.
    `per` divides every per-call figure (a decoding call makes `per` tokens). `counters()` (optional)
    returns an implementation's own cumulative counts, reported per step as a cross-check of the
    profiler's count; `extra` adds fields to every row (the cache's state)."""
    live = {}
    for mode, build in variants.items():
        k = key(workload, impl, mode)
        if budget.left() < 0:
            emit({**k, "event": "skipped", "note": "no time left in this process's budget"})
            continue
        emit({**k, "event": "start"})
        try:
            variant = build()
            row = first_call(variant)
            row["settle_steps"], row["settle_s"] = settle(variant.call, variant.wait)
        except Exception as e:
            failed(k, e)
            continue
        emit({**k, **(extra or {}), **variant.info, **row})
        live[mode] = (variant.call, variant.wait)
    if not live:
        return
    seconds = interleaved(live, rounds, steps, sync_each, budget)
    for mode, (call, wait) in live.items():
        k = key(workload, impl, mode)
        try:
            row = {
                **k,
                "ms": seconds[mode] * 1e3 / per,
                "host_ms": host_seconds(call, wait, max(rounds * steps, 5)) * 1e3 / per,
            }
            before = counters() if counters else None
            programs, row["programs_how"] = count_programs(call, wait, 1)
            row["programs"] = None if programs is None else programs / per
            if counters:
                after = counters()
                row["counters"] = {n: (after[n] - before[n]) / per for n in after}
        except Exception as e:
            failed(k, e)
            continue
        emit({**row, "event": "done"})


def failed(k: dict, e: BaseException) -> None:
    import traceback

    emit({**k, "event": "error", "note": f"{type(e).__name__}: {str(e).splitlines()[0][:160] if str(e) else ''}"})
    print("".join(traceback.format_exception(e)[-30:]), file=sys.stderr, flush=True)


def release() -> None:
    """Drops what the last section left (models, optimizer state, compiled steps) before the next."""
    import gc

    gc.collect()


@contextlib.contextmanager
def warnings_noted(impl: str):
    """Keeps warnings out of the output (dynamo's notes, the storm guard's) but reports each distinct
    one once, with its count, at the end: a compiled graph that ran op by op must show."""
    import warnings

    counts: collections.Counter = collections.Counter()

    def note(message, category, *args, **kwargs):
        counts[f"{category.__name__}: {str(message).splitlines()[0][:200]}"] += 1

    with warnings.catch_warnings():
        warnings.simplefilter("always")
        warnings.showwarning = note
        try:
            yield
        finally:
            emit({"event": "warnings", "impl": impl, "warnings": dict(counts.most_common(20))})
