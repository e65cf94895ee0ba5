"""jaxdev's cells beside a peer backend's (pure: no torch, no jax): which cells both measured, where
one gives a correct result and the other fails, counted per direction.

A side *passes* a cell when its result was correct (pass, untraced, fallback or stride_mismatch:
values right, however they were computed or laid out) and *fails* it with a failure status
(facts.FAILURES: crash, timeout, missing, lost_autograd, exception, shape_mismatch,
dtype_mismatch, wrong); skip and unsupported cells are neither. A cell only one side holds is not
compared (a sweep may be scoped, and each backend runs its own directions).
"""

from __future__ import annotations

import dataclasses

from jaxdev.audit.facts import DIRECTIONS, FAILURES

PASSES = ("pass", "untraced", "fallback", "stride_mismatch")


def outcome(status: str) -> str | None:
    """passes, fails, or None (not measured: skip, unsupported)."""
    if status in PASSES:
        return "passes"
    if status in FAILURES:
        return "fails"
    return None


@dataclasses.dataclass(frozen=True)
class Pair:
    """One cell both sides measured: where it is, and each side's Cell."""

    op: str
    dtype: str
    direction: str
    ours: object  # model.Cell (jaxdev's)
    theirs: object  # model.Cell (the peer's)

    @property
    def kind(self) -> str:
        """'ours' (jaxdev passes, the peer fails), 'theirs' (the reverse), 'both', 'neither' or 'other'."""
        a, b = outcome(self.ours.status), outcome(self.theirs.status)
        if a == "passes" and b == "fails":
            return "ours"
        if a == "fails" and b == "passes":
            return "theirs"
        if a == b == "passes":
            return "both"
        if a == b == "fails":
            return "neither"
        return "other"


def pairs(ours, theirs) -> list[Pair]:
    """The cells both matrices (matrix.Matrix, or anything with cells() and get()) hold, sorted."""
    out = []
    for placed in theirs.cells():
        mine = ours.get(placed.op, placed.dtype, placed.direction)
        if mine is not None:
            out.append(Pair(placed.op, placed.dtype, placed.direction, mine, placed.cell))
    return out


def node_pairs(op: str, ours, theirs) -> list[Pair]:
    """The cells two OpNodes of OpInfo `op` (jaxdev's, the peer's) both hold, by dtype and direction."""
    out = []
    for dtype in sorted(theirs.results):
        for direction in DIRECTIONS:
            cell, mine = theirs.results[dtype].get(direction), ours.results.get(dtype, {}).get(direction)
            if cell is not None and mine is not None:
                out.append(Pair(op, dtype, direction, mine, cell))
    return out


def tally(found: list[Pair]) -> dict[str, dict[str, int]]:
    """direction -> {compared, ours, theirs, both, neither, other} (and "all": the sums)."""
    out: dict[str, dict[str, int]] = {}
    for p in found:
        for key in (p.direction, "all"):
            counts = out.setdefault(key, dict.fromkeys(("compared", "ours", "theirs", "both", "neither", "other"), 0))
            counts["compared"] += 1
            counts[p.kind] += 1
    order = [d for d in DIRECTIONS if d in out] + (["all"] if out else [])
    return {d: out[d] for d in order}


def sentence(counts: dict[str, int], peer: str) -> str:
    """'jaxdev passes N cells torchax fails; torchax passes M jaxdev fails (of K compared)'."""
    return (
        f"jaxdev passes {counts['ours']:,} cells {peer} fails; {peer} passes {counts['theirs']:,} jaxdev fails "
        f"(of {counts['compared']:,} cells both measured)"
    )
