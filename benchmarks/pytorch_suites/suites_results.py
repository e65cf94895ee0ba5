"""What a run of PyTorch's suites found: test outcomes read back, CPU and jax compared, failures grouped.

No torch here: everything reads the JSON lines that suites_plugin.py writes, one per test phase, so
it is cheap to test (tests/test_pytorch_suites.py) and to rerun on saved results.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass, field

DEVICE_NAMES = ("cpu", "jax", "privateuse1")  # privateuse1: a class named before jaxdev renamed the key
_CLASS_SUFFIX = re.compile(r"(CPU|JAX|PRIVATEUSE1)$")
_METHOD_DEVICE = re.compile(r"_(cpu|jax|privateuse1)(?=_|$)")

PASSED, FAILED, ERROR, SKIPPED, CRASHED = "passed", "failed", "error", "skipped", "crashed"
UNREACHED = "unreached"  # in flight when the runner's time limit killed the process: not counted


def neutral_key(nodeid: str) -> str:
    """A test's name with its device taken out, so that the CPU and jax instances of one test match:
    'test_view_ops.py::TestViewOpsJAX::test_view_jax_float32' -> 'test_view_ops.py::TestViewOps::test_view_{dev}_float32'.
    PyTorch appends the device after the test's (and op's) name, before the dtype: the last
    '_cpu'/'_jax' token is the device's."""
    parts = nodeid.split("::")
    if len(parts) >= 2:
        parts[-2] = _CLASS_SUFFIX.sub("", parts[-2])
    matches = list(_METHOD_DEVICE.finditer(parts[-1]))
    if matches:
        last = matches[-1]
        parts[-1] = parts[-1][: last.start()] + "_{dev}" + parts[-1][last.end() :]
    return "::".join(parts)


@dataclass
class Outcome:
    key: str
    nodeid: str
    outcome: str
    duration: float = 0.0
    exc_type: str = ""
    message: str = ""


def _fold(phases: list[dict]) -> Outcome:
    """One test's outcome from its phases (setup, call, teardown), as pytest counts them."""
    first = phases[0]
    out = Outcome(first["key"], first["nodeid"], PASSED)
    out.duration = sum(p.get("duration", 0.0) for p in phases)
    for phase in phases:
        kind = phase["outcome"]
        if kind == UNREACHED:
            out.outcome = UNREACHED
            return out
        if kind == "failed":
            out.outcome = FAILED if phase["when"] == "call" else ERROR
            out.exc_type, out.message = phase.get("exc_type", ""), phase.get("message", "")
            return out
        if kind == "skipped" and out.outcome == PASSED:
            out.outcome = SKIPPED
            out.message = phase.get("message", "")
    if not any(p["when"] == "teardown" for p in phases) and out.outcome == PASSED:
        out.outcome = CRASHED  # started, never finished: the process died in it
    return out


def read_outcomes(lines) -> dict[str, Outcome]:
    """The outcome of every test in a results file (its lines), by neutral key. A test that started
    and has no teardown record is CRASHED (the process died while running it)."""
    phases: dict[str, list[dict]] = {}
    for line in lines:
        line = line.strip()
        if not line:
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue  # a line cut short by a killed process
        if record.get("when") == "start":
            phases.setdefault(record["key"], [])
            phases[record["key"]].append({**record, "outcome": "passed", "duration": 0.0})
            continue
        phases.setdefault(record["key"], []).append(record)
    return {key: _fold(recs) for key, recs in phases.items() if recs}


_NUMBER = re.compile(r"(?<![A-Za-z_])[-+]?(\d+\.?\d*(e[-+]?\d+)?|\.\d+)", re.IGNORECASE)
_QUOTED = re.compile(r"'[^']*'|\"[^\"]*\"|`[^`]*`")
_HEX = re.compile(r"0x[0-9a-f]+", re.IGNORECASE)
_DTYPE = re.compile(
    r"\b(torch\.)?(u?int(1|2|3|4|5|6|7|8|16|32|64)|float(16|32|64)|bfloat16|complex(32|64|128)|bool|half|double"
    r"|bits\w+|float8_\w+|float4_\w+|q?u?int\d+x?\d*|qint\d+|quint\w+)\b"
)
_DEVICE_WORDS = re.compile(r"\b(jax|cpu|privateuse1)(:\d+)?\b")
_SPACE = re.compile(r"\s+")


def normalise(exc_type: str, message: str) -> str:
    """A failure's cause: the exception type and the first line of its message, with the numbers,
    quoted names, addresses, dtypes and devices in it taken out, so failures of one cause in many
    tests (dtypes, shapes, ops) fall together."""
    first = next((ln for ln in message.splitlines() if ln.strip()), "")
    first = _HEX.sub("#", first)
    first = _QUOTED.sub("'…'", first)
    first = _DTYPE.sub("<dtype>", first)
    first = _DEVICE_WORDS.sub("<dev>", first)
    first = _NUMBER.sub("#", first)
    first = _SPACE.sub(" ", first).strip()
    if len(first) > 160:
        first = first[:157] + "..."
    return f"{exc_type or 'Error'}: {first}" if first else (exc_type or "Error")


@dataclass
class Comparison:
    """One suite, CPU against jax: counts over the tests both runs reached."""

    suite: str
    cpu_passed: int = 0
    jax_passed: int = 0  # of the CPU passes
    jax_skipped: int = 0  # CPU passed, jax skipped (a decorator that excludes the device, or a refusal)
    not_reached: int = 0  # CPU passed, jax never ran it (time limit)
    cpu_only_failures: int = 0  # jax passed, CPU failed
    jax_only: list[Outcome] = field(default_factory=list)  # CPU passed, jax failed, errored or crashed
    skip_reasons: Counter = field(default_factory=Counter)  # why jax skipped what CPU passed

    @property
    def ratio(self) -> float | None:
        """Jax passes over the CPU passes that jax ran (skips and unreached tests left out)."""
        ran = self.jax_passed + len(self.jax_only)
        return self.jax_passed / ran if ran else None


def compare(suite: str, cpu: dict[str, Outcome], jax: dict[str, Outcome]) -> Comparison:
    result = Comparison(suite)
    for key, ref in cpu.items():
        dev = jax.get(key)
        if ref.outcome != PASSED:
            if ref.outcome in (FAILED, ERROR) and dev is not None and dev.outcome == PASSED:
                result.cpu_only_failures += 1
            continue
        result.cpu_passed += 1
        if dev is None or dev.outcome == UNREACHED:
            result.not_reached += 1
        elif dev.outcome == PASSED:
            result.jax_passed += 1
        elif dev.outcome == SKIPPED:
            result.jax_skipped += 1
            result.skip_reasons[(dev.message.splitlines() or [""])[0][:120]] += 1
        else:
            result.jax_only.append(dev)
    return result


@dataclass
class Cause:
    cause: str
    count: int
    example: str  # one test's node id
    tests: list[str]


def group_causes(failures: list[Outcome]) -> list[Cause]:
    """Failures grouped by normalised cause, most frequent first (ties by name, so the order is stable)."""
    by_cause: dict[str, list[Outcome]] = {}
    for failure in failures:
        exc = failure.exc_type or ("Crash" if failure.outcome == CRASHED else "")
        message = failure.message or ("the process died in this test" if failure.outcome == CRASHED else "")
        by_cause.setdefault(normalise(exc, message), []).append(failure)
    counts = Counter({cause: len(items) for cause, items in by_cause.items()})
    ordered = sorted(counts, key=lambda c: (-counts[c], c))
    return [
        Cause(c, counts[c], sorted(o.nodeid for o in by_cause[c])[0], sorted(o.nodeid for o in by_cause[c]))
        for c in ordered
    ]
