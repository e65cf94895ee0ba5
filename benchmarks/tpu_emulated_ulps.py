"""float32 torch ops on the jax device against CPU torch, with a TPU's numerics emulated on CPU: the list
of the ops a TPU computes far from CPU, found without the chip.

    python benchmarks/tpu_emulated_ulps.py [--only SUBSTR,...] [--runs tpu,fixtures,plain] [--json out.json]
    python benchmarks/tpu_emulated_ulps.py --native        (on a TPU: the chip itself, no emulation)

Three runs, in one process on CPU:
  tpu       tests/tpu_emulation.py's emulation, the one tests/ops/conftest.py's fixtures apply (the
            TPU's program facts: float64 emulated, division approximate; jaxdev's own float32 functions
            forced, a TPU's choice; every float32 division lowered as inexactly as a TPU v5e's), and
            tests/tpu_functions.py's tracer: XLA's own exp, log, tanh, atan2, pow ... 1,000 ulps off,
            so that a kernel still reaching them where jaxdev's are chosen shows (a TPU's are 40 to
            3,000 ulps from CPU's; the number is the tracer's, not the chip's)
  fixtures  the emulation without the tracer (tpu_policy + tpu_division)
  plain     this process's own CPU programs
  chip      fixtures with the TPU's sqrt emulated too (2 ulps off, tpu_emulation.sqrt)
  near      chip under JAXDEV_MATH=near's arithmetic (the platform's division, sqrt, multiply-adds)
Not emulated: a TPU's fusion, its flushing of subnormals, its sqrt and rsqrt. Its multiply-adds, rounded
twice where XLA's CPU backend fuses them (FMA), are emulated by XLA's own flag: run it under
XLA_FLAGS=--xla_cpu_max_isa=AVX and compare with a run without (2026-12-07: lerp 0 -> 3,140 ulps,
addcmul 0 -> 38, silu's gradient 2 -> 159, tanhshrink's 8 -> 256, the only ops worse; since fixed).

Every op of benchmarks/tpu_emulated_ops.py (unary and binary float ufuncs, reductions and scans, nn
activations, norms, losses) runs forward, and the input gradient of sum() where it is differentiable;
the table gives the max ulps from CPU (or the normwise relative error, for reductions and gradients
whose terms cancel, shown as `rel` and sorted as rel / 2^-23), worst first, beside the same op without
the emulation (`plain`: this process's own CPU programs): the ops the emulation makes worse come first
(the list of faults), then the rest. The special inputs (0, -0, +-inf, NaN) are judged apart (`special`: how many results there
differ from CPU's, emulated / plain). Subnormal inputs and CPU results are left out (a TPU flushes
them). A `fallback` op ran on CPU.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import sys
import time
from unittest import mock

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests"))
os.environ.setdefault("JAXDEV_FALLBACK", "silent")
# jaxdev's executable cache is keyed by the traced program, which the emulation's lowerings leave as
# they are: off, lest a perturbed executable be written for a plain program or read for one
os.environ["JAXDEV_EXEC_CACHE"] = "off"

import tpu_emulated_ops as catalog  # noqa: E402
import tpu_emulation  # noqa: E402  (tests/tpu_emulation.py)
import tpu_functions  # noqa: E402  (tests/tpu_functions.py)
from tpu_numerics import ulps  # noqa: E402

import jaxdev  # noqa: E402, F401  (the device)
from jaxdev import fallback  # noqa: E402
from jaxdev.ops.kit import math_mode  # noqa: E402

TINY = np.float32(2.0**-126)
ULP_REL = 2.0**-23  # a relative error in ulp-sized units, for sorting with the ulps rows
_SPECIALS = np.array([0.0, -0.0, np.inf, -np.inf, np.nan], np.float32)


def draw(rng, lo: float, hi: float, shape: tuple, specials: bool) -> np.ndarray:
    """Half uniform on [lo, hi], half log-uniform magnitudes (from max(lo, 1e-30) where lo > 0, from
    1e-30 otherwise, to the bound on each side), shuffled; the special values at the end if asked."""
    n = int(np.prod(shape))
    k = len(_SPECIALS) if specials else 0
    m = n - k
    parts = [rng.uniform(lo, hi, m - m // 2)]
    sides = [(1.0, hi)] if hi > 0 else []
    sides += [(-1.0, -lo)] if lo < 0 else []
    floor = lo if lo > 0 else 1e-30
    for j, (sign, top) in enumerate(sides):
        count = m // 2 // len(sides) + (m // 2 % len(sides) if j == 0 else 0)
        parts.append(sign * np.exp(rng.uniform(math.log(floor), math.log(top), count)))
    x = np.concatenate(parts)
    rng.shuffle(x)
    x = np.clip(x, lo, hi).astype(np.float32)
    return np.concatenate([x, _SPECIALS]).reshape(shape) if specials else x.reshape(shape)


def inputs(case, seed: int) -> list[torch.Tensor]:
    rng = np.random.default_rng(seed)
    specials = case.shape == catalog.EW
    made = []
    for d in case.inputs:
        floats = isinstance(d, tuple)
        made.append(torch.from_numpy(draw(rng, *d, case.shape, specials)) if floats else d(rng, case.shape))
    return made


def run(case, args: list[torch.Tensor], device: str):
    """(forward, [input gradients]) of case on `device`, as CPU numpy arrays."""
    moved = [a.detach().clone().to(device) for a in args]
    need = case.grads()
    for i in need:
        moved[i].requires_grad_(True)
    out = case.fn(*moved)
    grads = []
    if need and out.requires_grad:
        if case.kind[1] == "rel":
            w = torch.from_numpy(np.random.default_rng(7).uniform(0.5, 1.5, tuple(out.shape)).astype(np.float32))
            (out * w.to(device)).sum().backward()
        else:
            out.sum().backward()
        grads = [moved[i].grad.cpu().numpy() for i in need if moved[i].grad is not None]
    return out.detach().cpu().numpy(), grads


def judge(got: np.ndarray, want: np.ndarray, kind: str, drop: np.ndarray | None) -> float:
    """max ulps, or the normwise relative error in ulp units (ULP_REL), left out subnormal CPU results
    and the `drop` positions (subnormal or special inputs, where the inputs line up with the result
    element by element)."""
    got, want = np.asarray(got, np.float32).ravel(), np.asarray(want, np.float32).ravel()
    keep = ~((np.abs(want) < TINY) & (want != 0))
    if drop is not None and drop.size == want.size:
        keep &= ~drop.ravel()
    got, want = got[keep], want[keep]
    if got.size == 0:
        return 0.0
    if kind == "ulps":
        return float(ulps(got, want).max())
    nan = np.isnan(got) != np.isnan(want)
    finite = np.isfinite(want) & np.isfinite(got)
    mismatch = nan | (~finite & (got != want) & ~(np.isnan(got) & np.isnan(want)))
    if mismatch.any():
        return math.inf
    scale = np.abs(want[finite]).max() if finite.any() else 0.0
    err = np.abs(got[finite].astype(np.float64) - want[finite]).max() if finite.any() else 0.0
    return 0.0 if err == 0 else float(err / max(scale, TINY) / ULP_REL)


def _special_misses(got: np.ndarray, want: np.ndarray, special: np.ndarray) -> int:
    """How many results at the special inputs differ from CPU's (NaN equal to NaN, zeros by sign)."""
    got, want = np.asarray(got, np.float32).ravel(), np.asarray(want, np.float32).ravel()
    if special is None or special.size != want.size:
        return 0
    g, w = got[special.ravel()], want[special.ravel()]
    same = (g == w) & (np.signbit(g) == np.signbit(w)) | (np.isnan(g) & np.isnan(w))
    return int((~same).sum())


def _positions(case, args) -> tuple:
    """(subnormal, special): the element positions where a float input is subnormal, and where the
    inputs are the special values (an elementwise case's last len(_SPECIALS) elements)."""
    floats = [a.numpy() for a in args if a.dtype == torch.float32]
    if not floats:
        return None, None
    subnormal = np.zeros(floats[0].shape, bool)
    for a in floats:
        if a.shape == subnormal.shape:
            subnormal |= (np.abs(a) < TINY) & (a != 0)
    special = np.zeros(subnormal.size, bool)
    if case.shape == catalog.EW:
        special[-len(_SPECIALS) :] = True
    return subnormal, special.reshape(subnormal.shape)


def measure(case, seed: int) -> dict:
    """The jax device against CPU: forward and gradients judged away from subnormal and special
    inputs; `special`: how many results at the special inputs differ (forward and gradients)."""
    args = inputs(case, seed)
    subnormal, special = _positions(case, args)
    drop = None if subnormal is None else subnormal | special
    want, want_g = run(case, args, "cpu")
    before = sum(fallback.fallback_counts().values())
    got, got_g = run(case, args, "jax")
    row = {"fallback": sum(fallback.fallback_counts().values()) > before}
    row["fwd"] = judge(got, want, case.kind[0], drop)
    if got_g:
        row["grad"] = max(judge(g, w, case.kind[1], drop) for g, w in zip(got_g, want_g))
    pairs = [(got, want), *zip(got_g, want_g)]
    row["special"] = sum(_special_misses(g, w, special) for g, w in pairs)
    return row


def measure_all(cases: dict, seed: int, label: str) -> dict:
    rows = {}
    for name, case in cases.items():
        t = time.perf_counter()
        try:
            rows[name] = measure(case, seed)
        except Exception as e:  # an op that fails is a row of the table
            rows[name] = {"error": f"{type(e).__name__}: {str(e).splitlines()[0][:100] if str(e) else ''}"}
        print(f"[{label}] {name}: {rows[name]} ({time.perf_counter() - t:.1f} s)", file=sys.stderr, flush=True)
    return rows


def _score(row: dict) -> float:
    return max(row.get("fwd", 0.0), row.get("grad", 0.0)) if "error" not in row else -1.0


def _cell(row: dict | None, key: str, kind: str) -> str:
    if row is None or key not in row:
        return "-"
    v = row[key]
    text = "inf" if math.isinf(v) else f"{v:.0f}" if v >= 10 or v == int(v) else f"{v:.1f}"
    return text + (" rel" if kind == "rel" else "")


def _worse(first: dict, last: dict | None) -> float:
    """The first run's worst number among its forward and gradient that are worse than the last (plain)
    run's past 2x + 4; 0 where neither is."""
    if last is None or "error" in last or "error" in first:
        return 0.0
    return max([first[k] for k in ("fwd", "grad") if first.get(k, 0.0) > 2 * last.get(k, 0.0) + 4], default=0.0)


def _notes(first: dict, last: dict | None) -> str:
    """`special N/M`: results at the special inputs unlike CPU's in the first run / the last;
    `fallback`: ran on CPU."""
    notes = []
    if first.get("special") or (last or {}).get("special"):
        notes.append(f"special {first.get('special', 0)}/{(last or {}).get('special', '-')}")
    if first.get("fallback"):
        notes.append("fallback")
    return ("  " + " ".join(notes)) if notes else ""


def table(cases: dict, runs: dict) -> str:
    """One line per op, each run's forward and gradient, worst first by the first run's numbers: the ops
    whose forward or gradient the emulation makes worse than the last run's (plain) past 2x + 4 first,
    then the rest."""
    labels = list(runs)
    head = f"{'op':34s}" + "".join(f" {label + ' fwd':>12s} {label + ' grad':>12s}" for label in labels)
    first, last = runs[labels[0]], runs[labels[-1]] if len(labels) > 1 else None
    worse, rest = [], []
    for name in sorted(first, key=lambda n: -_score(first[n])):
        before = last.get(name) if last else None
        kind, row = cases[name].kind, first[name]
        if "error" in row:
            rest.append((0.0, f"{name:34s} error {row['error']}"))
            continue
        line = f"{name:34s}"
        for label in labels:
            other = runs[label].get(name)
            line += f" {_cell(other, 'fwd', kind[0]):>12s} {_cell(other, 'grad', kind[1]):>12s}"
        excess = _worse(row, before)
        (worse if excess else rest).append((excess, line + _notes(row, before)))
    worse = [line for _, line in sorted(worse, key=lambda pair: -pair[0])]
    rest = [line for _, line in rest]
    if last is None:
        return "\n".join([head, *worse, *rest])
    return "\n".join(
        [f"worse than {labels[-1]} ({len(worse)} ops; sorted by their worse numbers)", head, *worse, "",
         f"no worse than {labels[-1]} past 2x + 4 ({len(rest)} ops)", head, *rest]
    )  # fmt: skip


def _emulated(functions: bool, sqrt: bool = False, near: bool = False):
    stack = contextlib.ExitStack()
    stack.enter_context(tpu_emulation.policy())
    stack.enter_context(tpu_emulation.division())
    if functions:
        stack.enter_context(tpu_functions.functions())
    if sqrt:
        stack.enter_context(tpu_emulation.sqrt())
    if near:  # JAXDEV_MATH=near's arithmetic beside the policy's own functions (on CPU near alone is XLA's)
        stack.enter_context(mock.patch.object(math_mode, "platform_arithmetic", lambda: True))
    return stack


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="", help="comma-separated substrings of the op names to run")
    parser.add_argument("--runs", default="tpu,fixtures,plain", help="which of tpu, fixtures, plain, chip, near")
    parser.add_argument("--native", action="store_true", help="no emulation: this platform as it is (a TPU)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", help="also write the rows to this file")
    args = parser.parse_args()
    cases = catalog.all_cases()
    if args.only:
        wanted = [s for s in args.only.split(",") if s]
        cases = {n: c for n, c in cases.items() if any(w in n for w in wanted)}
    contexts = {
        "tpu": lambda: _emulated(True),
        "fixtures": lambda: _emulated(False),
        "plain": contextlib.nullcontext,
        "chip": lambda: _emulated(False, sqrt=True),
        "near": lambda: _emulated(False, sqrt=True, near=True),
    }
    labels = ["native"] if args.native else [r for r in args.runs.split(",") if r]
    runs = {}
    for label in labels:
        with contexts.get(label, contextlib.nullcontext)():
            runs[label] = measure_all(cases, args.seed, label)
    print(table(cases, runs))
    print(f"\nleft out (another change rewrites them): {', '.join(catalog.LEFT_OUT)}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"runs": runs, "left_out": catalog.LEFT_OUT}, f, indent=1)


if __name__ == "__main__":
    main()
