"""The CI gate: a fresh sweep against the committed baseline matrix. The baseline only ratchets
forward: a new failure fails the gate, and so does an unexpected pass (accept it to record it).
A failure that changed kind (wrong -> exception, missing -> wrong) fails it too: the device
behaves differently from what was recorded, better or worse, and someone should look; it is
reported as such, apart from new failures."""

from __future__ import annotations

import dataclasses

from jaxdev.audit import AuditError, matrix, samples, sweep

GOOD = ("pass",)
UNSUPPORTED = "unsupported"


@dataclasses.dataclass(frozen=True)
class Change:
    op: str
    dtype: str
    direction: str
    old: str  # "absent" when the baseline had no such cell
    new: str
    reason: str

    @property
    def kind(self) -> str:
        """new failure | unexpected pass | new pass / new unsupported (a cell the baseline lacks) |
        changed kind. `unsupported` (jaxdev cannot hold the tensors) is neither good nor a failure:
        pass -> unsupported is a new failure (a regression), unsupported -> pass an unexpected pass
        (an improvement), unsupported -> a failure a new failure (the cell now runs, and fails)."""
        if self.old == "absent":
            return "new pass" if self.new in GOOD else "new unsupported" if self.new == UNSUPPORTED else "new failure"
        if self.old in GOOD:
            return "new failure"
        if self.new in GOOD:
            return "unexpected pass"
        if self.old == UNSUPPORTED:
            return "new failure"
        return "changed kind"


def load_baseline(path: str) -> dict:
    import os

    if not os.path.exists(path):
        raise AuditError(f"no baseline at {path}; create one with `jaxdev gate OPS --init --baseline {path}`")
    try:
        return matrix.load(path)
    except AuditError as e:
        raise AuditError(f"cannot use baseline: {e}") from e


def scope(baseline: matrix.Matrix, ops=(), backward=True, dtypes=(), mode: str = "eager") -> list[samples.Unit]:
    """Units to rerun: the given OpInfos (all their cells, or those dtypes), else every cell of the baseline."""
    if ops:
        return sweep.plan(ops, dtypes, backward, mode=mode)
    db = samples.op_db()
    units = []
    for op, dtype, direction, _ in baseline.cells():
        if op not in db:
            raise AuditError(
                f"baseline names OpInfo {op!r}, which this torch does not have; refresh the baseline with --accept OPS"
            )
        if backward or direction != "backward":
            units.append(samples.Unit(op, dtype, direction))
    if not units:
        raise AuditError("the baseline has no results to check")
    return units


def compare(baseline: matrix.Matrix, fresh: matrix.Matrix) -> list[Change]:
    changes = []
    for op, dtype, direction, entry in fresh.cells():
        old = baseline.get(op, dtype, direction)
        old_status = old["status"] if old else "absent"
        if old_status != entry["status"]:
            changes.append(Change(op, dtype, direction, old_status, entry["status"], entry.get("reason", "")))
    return changes


def failed(changes: list[Change]) -> bool:
    """Every change fails the gate, a failure that changed kind included; --accept records it."""
    return bool(changes)


def tally(changes: list[Change]) -> dict[str, int]:
    """Changes by kind, in a fixed order, kinds with none left out."""
    kinds = ("new failure", "changed kind", "unexpected pass", "new pass", "new unsupported")
    return {k: n for k in kinds if (n := sum(c.kind == k for c in changes))}


def accept(baseline: matrix.Matrix, fresh: matrix.Matrix, path: str) -> None:
    """Write the fresh cells into the baseline (others untouched), atomically."""
    for op, dtype, direction, entry in fresh.cells():
        baseline.put(op, dtype, direction, entry, fresh.aten(op))
    baseline.versions = matrix.versions()
    for key in ("max_samples", "timeout_s"):
        baseline.run[key] = fresh.run.get(key)
    baseline.run["complete"] = True
    matrix.save(baseline, path)
