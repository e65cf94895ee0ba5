"""The CI gate: a fresh sweep against the committed baseline matrix. The baseline only ratchets
forward: a new failure fails the gate, and so does an unexpected pass (accept it to record it).
A failure that changed kind (wrong -> exception, missing -> wrong) fails it too: the device
behaves differently from what was recorded, better or worse, and someone should look; it is
reported as such, apart from new failures."""

from __future__ import annotations

import dataclasses
import os

from jaxdev.audit import AuditError, matrix, platforms, samples
from jaxdev.audit.facts import BACKWARD_DIRECTIONS, DEFAULT_BASELINE, DIRECTIONS, MODE_DIRECTIONS
from jaxdev.audit.model import Platform

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


def load_baseline(path: str) -> matrix.Matrix:
    if not os.path.exists(path):
        raise AuditError(f"no baseline at {path}; create one with `jaxdev gate OPS --init --baseline {path}`")
    try:
        return matrix.load(path)
    except AuditError as e:
        raise AuditError(f"cannot use baseline: {e}") from e


def check_platform(baseline: matrix.Matrix, path: str, now: Platform) -> None:
    """A baseline is gated on the platform it was measured on only: one sentence otherwise."""
    if baseline.measured_on != now:
        recorded = baseline.measured_on
        own = platforms.path(os.path.dirname(DEFAULT_BASELINE), "baseline.yaml", now)
        raise AuditError(
            f"{path} was measured on {recorded.label} ({recorded.name}) and this JAX runs on {now.label} "
            f"({now.name}): gate against {own} (create it with --init OPS) or run on {recorded.name}"
        )


@dataclasses.dataclass
class Scope:
    """What a gate run checks: `units` to rerun, and the cells of the named OPS that the baseline
    does not hold (`not_in_baseline`: run, and failing the gate, only when strict)."""

    units: list[samples.Unit]
    not_in_baseline: list[samples.Unit]
    selections: list  # names.Selection per OPS pattern


def scope(
    baseline: matrix.Matrix,
    ops=(),
    backward=True,
    dtypes=(),
    mode: str | None = None,
    *,
    strict: bool = False,
    all_reaching: bool = False,
) -> Scope:
    """The baseline's cells (of OPS when given; OpInfo or aten names, see jaxdev.audit.names),
    narrowed by dtypes, mode (None: every direction) and backward. With OPS, their other cells
    (what `jaxdev coverage OPS` would run) are `not_in_baseline`, and rerun too when strict."""
    from jaxdev.audit import names

    directions = set(MODE_DIRECTIONS[mode] if mode else DIRECTIONS)
    if not backward:
        directions -= set(BACKWARD_DIRECTIONS)
    parsed = samples.parse_dtypes(dtypes)
    wanted_dtypes = {samples.dtype_name(d) for d in parsed} if parsed is not None else set()
    db = samples.op_db()
    selections = []
    chosen = None
    if ops:
        index = {op: frozenset(baseline.aten(op)) for op in baseline.ops}
        for op, reached in names.load_index().items():
            index[op] = index.get(op, frozenset()) | reached
        selections = names.resolve(ops, db, all_reaching=all_reaching, index=index)
        chosen = set(names.opinfos(selections))
    units = []
    for op, dtype, direction, _ in baseline.cells():
        if chosen is not None and op not in chosen:
            continue
        if direction not in directions or (wanted_dtypes and dtype not in wanted_dtypes):
            continue
        if op not in db:
            raise AuditError(
                f"baseline names OpInfo {op!r}, which this torch does not have; refresh the baseline with --accept OPS"
            )
        units.append(samples.Unit(op, dtype, direction))
    absent = []
    if chosen is not None:
        planned = samples.units(sorted(chosen), dtypes, backward, mode or "both")
        absent = [u for u in planned if u.direction in directions and baseline.get(u.op, u.dtype, u.direction) is None]
    elif not units:
        raise AuditError("the baseline has no results to check" + (" in this scope" if dtypes or mode else ""))
    return Scope(sorted(units + absent) if strict else units, absent, selections)


def compare(baseline: matrix.Matrix, fresh: matrix.Matrix) -> list[Change]:
    changes = []
    for op, dtype, direction, cell in fresh.cells():
        old = baseline.get(op, dtype, direction)
        old_status = old.status if old else "absent"
        if old_status != cell.status:
            changes.append(Change(op, dtype, direction, old_status, cell.status, cell.reason))
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
    for op, dtype, direction, cell in fresh.cells():
        baseline.put(op, dtype, direction, cell, fresh.aten(op))
    baseline.versions = matrix.versions()
    baseline.platform = fresh.platform or baseline.platform
    baseline.run.max_samples, baseline.run.timeout_s = fresh.run.max_samples, fresh.run.timeout_s
    baseline.run.complete = True
    matrix.save(baseline, path)
