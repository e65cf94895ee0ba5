"""Hostile input, fuzzed (issue 14, item 5): random and extreme arguments to ~50 ops, on CPU and on jax.

Cases are data: tests/data/fuzz_corpus.json, read by tests/fuzz_cases.py (what a case is and how it is
judged is described there; tests/fuzz_draw.py draws them, for another seed or count too): jax
raises where CPU raises (the same exception class), matches CPU where CPU succeeds (values with NaN
positions, dtype, shape, strides of views, inputs after the call), and the process survives. Cases
with sizes past int32 run in child processes, a batch per child, so a crash or a hang fails that one
case (with its repro) instead of killing pytest.

Seeded and reproducible: JAXDEV_FUZZ_SEED (default below), JAXDEV_FUZZ_CASES (default small for CI;
a long run: JAXDEV_FUZZ_CASES=5000). Every failure prints a one-line repro:
`.venv/bin/python tests/fuzz_draw.py SEED INDEX  # op(args)`. CPU fallback is allowed (as by
default); the ops that reached it are counted and reported at the end of the module.
"""

from __future__ import annotations

import collections
import dataclasses
import json
import math
import os
import subprocess

import pytest
import torch
from fuzz_cases import DEVICE, Case, T, Verdict, check_case, load_corpus
from fuzz_draw import cases, make_case
from jaxdev_testing import describe_exit, run_python

import jaxdev

SEED = int(os.environ.get("JAXDEV_FUZZ_SEED", "20261201"))
CASES = int(os.environ.get("JAXDEV_FUZZ_CASES", "400"))
CHILD_TIMEOUT = 240  # seconds for one child's batch of risky cases


# Known differences from CPU that are not fixed yet: (reason, predicate on a case). Random cases they
# match are left out of the run; each has a concrete case below, an xfail(strict=True) test, so that
# fixing it shows.
def _tensors(case: Case):
    return [x for x in (*case.args, *case.kwargs.values()) if isinstance(x, T)]


def _set_storage_grows(case: Case) -> bool:
    if case.op != "set_storage":
        return False
    dst, src, offset, size, stride = case.args
    if 0 in size or any(n < 0 for n in size):
        return False
    # in bytes: set_ views the storage in dst's dtype (a float32 tensor set on an int16 storage)
    needed = (offset + 1 + sum((n - 1) * st for n, st in zip(size, stride))) * dst.dtype.itemsize
    return needed > max(math.prod(src.shape), 0) * src.dtype.itemsize


KNOWN: list[tuple[str, object]] = [
    (
        "index_put_ with an empty tuple of indices: CPU fails inside (RuntimeError 'sym_strides() called on an "
        "undefined Tensor'); jax puts the values into the whole tensor",
        lambda c: c.op == "index_put_" and len(c.args[1]) == 0,
    ),
    (
        "set_ onto a storage too small for the sizes: CPU grows the storage in place; jax storages have a fixed "
        "size (RuntimeError 'Trying to resize storage that is not resizable')",
        _set_storage_grows,
    ),
]
KNOWN_CASES: dict[str, Case] = load_corpus().known  # each a concrete case of a KNOWN difference


def _known(case: Case) -> str | None:
    for reason, matches in KNOWN:
        if matches(case):
            return reason
    return None


ALL = cases(SEED, CASES)
RUN = [c for c in ALL if _known(c) is None]
SAFE = [c.index for c in RUN if not c.risky]
RISKY = [c.index for c in RUN if c.risky]
STATS = collections.Counter()
SIMILARITY: list[float] = []
FALLBACKS = collections.Counter()


@pytest.fixture(scope="module", autouse=True)
def _fallback_allowed_and_counted(request):
    saved = os.environ.get("JAXDEV_FALLBACK")
    os.environ["JAXDEV_FALLBACK"] = "silent"  # allowed, as by default, without a warning per call
    jaxdev.reset_fallback_counts()
    yield
    FALLBACKS.update(jaxdev.fallback_counts())
    if saved is None:
        os.environ.pop("JAXDEV_FALLBACK", None)
    else:
        os.environ["JAXDEV_FALLBACK"] = saved
    report = request.config.pluginmanager.get_plugin("terminalreporter")
    capture = request.config.pluginmanager.get_plugin("capturemanager")
    if report is not None and capture is not None:
        sims = f", identical messages {sum(s == 1 for s in SIMILARITY)}" if SIMILARITY else ""
        mean = f", mean message similarity {sum(SIMILARITY) / len(SIMILARITY):.2f}" if SIMILARITY else ""
        with capture.global_and_fixture_disabled():
            report.write_line(
                f"\nfuzz (seed {SEED}): {len(ALL)} cases drawn, {len(ALL) - len(RUN)} left out as known differences; "
                f"run {STATS['run']}, mismatches {STATS['mismatch']}; both raised {STATS['raised']}{sims}{mean}; "
                f"CPU fallbacks {dict(FALLBACKS) or 'none'}"
            )


def _judge(case: Case, verdict: Verdict) -> None:
    STATS["run"] += 1
    if verdict.similarity is not None:
        STATS["raised"] += 1
        SIMILARITY.append(verdict.similarity)
    if not verdict.ok and verdict.jax_error.startswith("PlatformDtypeError"):
        pytest.skip(f"the platform refuses a dtype this case uses: {verdict.jax_error}")  # on CPU none is
    if not verdict.ok:
        STATS["mismatch"] += 1
        pytest.fail(f"repro: {case.repro()}\n  {verdict.reason}", pytrace=False)


@pytest.mark.parametrize("index", SAFE, ids=lambda i: f"case{i}")
def test_hostile_case_matches_cpu(index):
    _judge(ALL[index], check_case(ALL[index]))


# --- the risky cases, in child processes ------------------------------------------------------------

_CHILD = """
import dataclasses, json, os, sys
os.environ["JAXDEV_FALLBACK"] = "silent"
import jaxdev
from fuzz_cases import check_case
from fuzz_draw import cases
ALL = cases({seed}, {count})
for i in {indices!r}:
    print("START", i, flush=True)
    v = check_case(ALL[i])
    print("END", i, json.dumps(dataclasses.asdict(v)), flush=True)
print("FALLBACKS", json.dumps(jaxdev.fallback_counts()), flush=True)
"""


_child_verdicts: dict[int, Verdict] = {}


def _run_children(indices: list[int]) -> None:
    """Verdicts of the risky cases, from child interpreters: one batch per child, a new child after a
    case that killed (or hung) the one before."""
    remaining = list(indices)
    while remaining:
        try:
            proc = run_python(_CHILD.format(indices=remaining, seed=SEED, count=CASES), timeout=CHILD_TIMEOUT)
            out, died = proc.stdout, (None if proc.returncode == 0 else describe_exit(proc))
        except subprocess.TimeoutExpired as e:
            out = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
            died = f"the child process hung (killed after {CHILD_TIMEOUT} s)"
        started = None
        for line in out.splitlines():
            word, _, rest = line.partition(" ")
            if word == "START":
                started = int(rest)
            elif word == "END":
                i, _, verdict = rest.partition(" ")
                _child_verdicts[int(i)] = Verdict(**json.loads(verdict))
                started = None
            elif word == "FALLBACKS":
                FALLBACKS.update(json.loads(rest))
        if died is None:
            return
        if started is None:  # died before its first case or after its last: nothing to blame
            for i in remaining:
                _child_verdicts.setdefault(i, Verdict(False, f"the child process died: {died}"))
            return
        _child_verdicts[started] = Verdict(False, f"the process did not survive this case: {died}")
        remaining = remaining[remaining.index(started) + 1 :]


@pytest.mark.parametrize("index", RISKY, ids=lambda i: f"case{i}")
def test_hostile_case_with_huge_sizes_matches_cpu_in_a_child(index):
    if index not in _child_verdicts:
        _run_children([i for i in RISKY if i not in _child_verdicts])
    _judge(ALL[index], _child_verdicts[index])


# --- known differences ----------------------------------------------------------------------------------


@pytest.mark.parametrize("name", list(KNOWN_CASES))
@pytest.mark.xfail(strict=True, reason="a known difference from CPU (KNOWN above): fixing it makes this pass")
def test_known_difference(name):
    case = KNOWN_CASES[name]
    assert _known(case) is not None, "each known case is one the random cases leave out"
    verdict = check_case(case)
    assert verdict.ok, f"{case}: {verdict.reason}"


def test_the_cases_are_a_pure_function_of_seed_and_index():
    a, b = make_case(SEED, 17), make_case(SEED, 17)
    assert str(a) == str(b) and a.args == b.args and dataclasses.asdict(a) == dataclasses.asdict(b)
    assert isinstance(T((2,)).build(torch.device("cpu")), torch.Tensor) and repr(DEVICE) == "DEVICE"
