"""The report across platforms: when other platforms' matrices lie beside the one rendered
(coverage/tpu/matrix.yaml beside coverage/matrix.yaml: platforms.beside), summary.md gets a table
of each platform's shares per direction and the cells whose status differs between platforms;
the HTML page gets each platform's OpInfo rows with a platform filter (report_html)."""

from __future__ import annotations

from jaxdev.audit import matrix
from jaxdev.audit.facts import DIRECTIONS

MAX_LISTED = 200


def label(m: matrix.Matrix) -> str:
    p = m.measured_on
    return p.label if p.label == p.name else f"{p.label} ({p.name})"


def shares_rows(every: list[tuple[str, matrix.Matrix]]) -> list[list[str]]:
    """platform x direction: the pass share of measured cells, and how many cells were measured."""
    directions = [d for d in DIRECTIONS if any(m.summary.get(d) for _, m in every)]
    rows = [["platform", "matrix", *directions]]
    for path, m in every:
        shares = m.shares
        cells = [
            f"{shares[d]['pass']:.1%} of {shares[d]['measured']}" if shares.get(d, {}).get("measured") else "-"
            for d in directions
        ]
        rows.append([label(m), f"`{path}`", *cells])
    return rows


def differing(every: list[tuple[str, matrix.Matrix]]) -> list[tuple[str, str, str, list[tuple[str, object]]]]:
    """(op, dtype, direction, [(platform label, cell)]) for each cell whose status differs between
    the platforms that measured it (a cell a platform lacks is not compared: its sweep may be partial)."""
    by_place: dict[tuple[str, str, str], list] = {}
    for _, m in every:
        for placed in m.cells():
            by_place.setdefault((placed.op, placed.dtype, placed.direction), []).append((label(m), placed.cell))
    out = []
    for (op, dtype, direction), seen in sorted(by_place.items()):
        if len(seen) > 1 and len({cell.status for _, cell in seen}) > 1:
            out.append((op, dtype, direction, seen))
    return out


def side_by_side(seen: list[tuple[str, object]]) -> str:
    """'pass on cpu; wrong on TPU v5 lite (tpu): output differs ...'."""
    parts = []
    for name, cell in seen:
        detail = f": {cell.reason}" if cell.status != "pass" and cell.reason else ""
        parts.append(f"{cell.status} on {name}{detail}")
    return "; ".join(parts)


def section_lines(every: list[tuple[str, matrix.Matrix]], table) -> list[str]:
    """summary.md's platforms section; `table(rows)` writes a Markdown table (report.md_table)."""
    lines = ["", "## platforms", "", "Pass share of the measured cells per direction, on each platform:", ""]
    lines += table(shares_rows(every))
    diff = differing(every)
    lines += ["", f"## where the platforms differ ({len(diff)})", ""]
    if not diff:
        lines.append("Every cell measured on more than one platform has the same status on each.")
    for op, dtype, direction, seen in diff[:MAX_LISTED]:
        text = side_by_side(seen).replace("|", "\\|").replace("\n", " ")
        lines.append(f"- `{op}` {dtype} {direction}: {text[:400]}")
    if len(diff) > MAX_LISTED:
        lines.append(f"- ... and {len(diff) - MAX_LISTED} more")
    return lines
