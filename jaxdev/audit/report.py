"""Reports from a coverage matrix: Markdown summary, a self-contained HTML page to explore it
(drawn by jaxdev.audit.report_html), and JUnit XML for CI systems. The baseline matrix, when given,
adds the cells whose status changed since it; the aten-level matrix (coverage/aten.yaml), when
given, adds the per-overload view."""

from __future__ import annotations

import dataclasses
import xml.etree.ElementTree as ET

import yaml

from jaxdev.audit import AuditError, matrix, report_peers, report_platforms
from jaxdev.audit.facts import (
    ARBITRATION_MEANING,
    DEGRADED,
    DIRECTIONS,
    FAILURES,
    SEVERITY,
    UNMEASURED,
    UNSUPPORTED_MEANING,
)
from jaxdev.audit.facts import shares as facts_shares
from jaxdev.audit.matrix import headline
from jaxdev.audit.model import Cell

# OpInfo name prefixes that are torch namespaces: an OpInfo's family is its namespace ("torch" else).
NAMESPACES = ("nn.functional", "linalg", "special", "fft", "masked", "signal", "sparse", "_refs", "torch")


def family(opinfo: str) -> str:
    return next((ns for ns in NAMESPACES if opinfo.startswith(ns + ".")), "torch")


@dataclasses.dataclass
class Sources:
    """What a report is drawn from: the matrix, optionally the baseline and the aten matrix (raw YAML)."""

    matrix: matrix.Matrix
    matrix_path: str
    baseline: matrix.Matrix | None = None
    baseline_path: str | None = None
    aten: dict | None = None
    aten_path: str | None = None
    reference: matrix.Matrix | None = None  # coverage/reference_matrix.yaml (cells on reference inputs)
    reference_path: str | None = None
    # other platforms' matrices beside it (coverage/tpu/matrix.yaml: platforms.beside), as (path, matrix)
    platforms: list[tuple[str, matrix.Matrix]] = dataclasses.field(default_factory=list)
    # peer backends' matrices beside it (coverage/peers/torchax/matrix.yaml: peers.beside), as (path, matrix)
    peers: list[tuple[str, matrix.Matrix]] = dataclasses.field(default_factory=list)


@dataclasses.dataclass(frozen=True)
class Change:
    """A cell whose status differs from the baseline's; `new` is "absent" when the matrix lacks it."""

    op: str
    dtype: str
    direction: str
    old: str
    new: str
    kind: str  # gate's words: new failure, unexpected pass, changed kind; "not measured" when absent
    cell: Cell  # the matrix's cell (the baseline's when absent)


def changes(m: matrix.Matrix, baseline: matrix.Matrix) -> tuple[list[Change], int]:
    """The baseline's cells whose status the matrix records otherwise, worst new status first, and
    how many of the matrix's cells the baseline does not hold (not changes: never recorded)."""
    from jaxdev.audit import gate

    out = []
    for op, dtype, direction, old in baseline.cells():
        new = m.get(op, dtype, direction)
        if new is None:
            out.append(Change(op, dtype, direction, old.status, "absent", "not measured", old))
        elif new.status != old.status:
            kind = gate.Change(op, dtype, direction, old.status, new.status, "").kind
            out.append(Change(op, dtype, direction, old.status, new.status, kind, new))
    rank = {s: i for i, s in enumerate((*SEVERITY, "absent"))}
    out.sort(key=lambda c: (rank[c.new], c.op, c.dtype, DIRECTIONS.index(c.direction)))
    unrecorded = sum(baseline.get(op, dtype, d) is None for op, dtype, d, _ in m.cells())
    return out, unrecorded


def load_aten(path: str) -> dict:
    """coverage/aten.yaml as YAML; any problem is one AuditError sentence."""
    try:
        with open(path) as f:
            data = yaml.load(f, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except (yaml.YAMLError, UnicodeDecodeError) as e:
        raise AuditError(f"{path} is not valid YAML ({type(e).__name__})") from e
    except OSError as e:
        raise AuditError(f"cannot read {path}: {e.strerror}") from e
    if not isinstance(data, dict):
        raise AuditError(f"{path} is not an aten coverage matrix (not a mapping)")
    return data


def failures(m: matrix.Matrix) -> dict[str, list[matrix.Placed]]:
    """Failures, degraded and unsupported cells by status, worst first."""
    by: dict[str, list] = {}
    for placed in m.cells():
        status = placed.cell.status
        if status in FAILURES or status in DEGRADED or status == "unsupported":
            by.setdefault(status, []).append(placed)
    return {k: by[k] for k in SEVERITY if k in by}


def summary_rows(m: matrix.Matrix) -> list[list[str]]:
    summary = m.summary
    statuses = [s for s in SEVERITY if any(s in summary.get(d, {}) for d in DIRECTIONS)]
    rows = [["status", *DIRECTIONS]]
    for s in statuses:
        rows.append([s, *(str(summary.get(d, {}).get(s, 0)) for d in DIRECTIONS)])
    shares = m.shares
    for s in ("pass", "fallback"):
        rows.append(
            [
                f"{s} share",
                *(f"{shares[d][s]:.1%}" if shares.get(d, {}).get(s) is not None else "-" for d in DIRECTIONS),
            ]
        )
    rows.append(["measured", *(str(shares.get(d, {}).get("measured", 0)) for d in DIRECTIONS)])
    return rows


# Directions whose counts reports also break down by dtype: backward is measured in every dtype the
# OpInfo differentiates, the compiled directions in float32 by default and in the dtypes scoped runs add.
BY_DTYPE = ("backward", "compile", "compile-backward")


def by_dtype_tables(m: matrix.Matrix) -> list[tuple[str, list[list[str]]]]:
    """(title, rows) of each BY_DTYPE direction the matrix holds."""
    return [(f"{d} by dtype", rows) for d in BY_DTYPE if (rows := by_dtype_rows(m, d))]


def by_dtype_rows(m: matrix.Matrix, direction: str) -> list[list[str]]:
    """status x dtype counts for one direction."""
    counts: dict[str, dict[str, int]] = {}
    for _, dtype, d, cell in m.cells():
        if d == direction:
            row = counts.setdefault(dtype, {})
            row[cell.status] = row.get(cell.status, 0) + 1
    if not counts:
        return []
    statuses = [s for s in SEVERITY if any(s in c for c in counts.values())]
    dtypes = sorted(counts)
    rows = [["status", *dtypes]]
    rows += [[s, *(str(counts[t].get(s, 0)) for t in dtypes)] for s in statuses]
    shares = {t: facts_shares(counts[t]) for t in dtypes}
    rows.append(["pass share", *(f"{shares[t]['pass']:.0%}" if shares[t]["measured"] else "-" for t in dtypes)])
    return rows


def md_table(rows: list[list[str]]) -> list[str]:
    return ["| " + " | ".join(rows[0]) + " |", "|" + "---|" * len(rows[0])] + [
        "| " + " | ".join(r) + " |" for r in rows[1:]
    ]


def reference_section(m: matrix.Matrix, source: str) -> list[str]:
    """summary.md's section on the reference-input matrix: its headline, its counts per direction,
    and its failing and restrided cells (these are not in the table above, drawn from sample inputs)."""
    lines = ["", "## reference inputs", "", headline(m, source), ""]
    for direction, counts in m.summary.items():
        if counts:
            lines.append(f"- {direction}: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
    bad = [c for c in m.cells() if c.cell.status in FAILURES or c.cell.status == "stride_mismatch"]
    lines += ["", f"{len(bad)} cells fail or restride on reference inputs:" if bad else "No cell fails on them."]
    for op, dtype, direction, cell in bad[:100]:
        reason = cell.reason.replace("|", "\\|").replace("\n", " ")[:160]
        lines.append(f"- {cell.status}: `{op}` {dtype} {direction}: {reason}")
    if len(bad) > 100:
        lines.append(f"- ... and {len(bad) - 100} more")
    return lines


def markdown(
    m: matrix.Matrix,
    source: str,
    baseline: tuple[str, matrix.Matrix] | None = None,
    reference: tuple[str, matrix.Matrix] | None = None,
    others: list[tuple[str, matrix.Matrix]] = (),
    peers: list[tuple[str, matrix.Matrix]] = (),
) -> str:
    lines = ["# jaxdev coverage report", "", headline(m, source), ""]
    lines += md_table(summary_rows(m))
    lines += ["", f"Shares are of measured cells: {' and '.join(UNMEASURED)} cells are left out.", ""]
    for i, (title, rows) in enumerate(by_dtype_tables(m)):
        lines += ([""] if i else []) + [f"## {title}", ""] + md_table(rows)
    for status, cells in failures(m).items():
        lines += ["", f"## {status} ({len(cells)})", ""]
        if status == "unsupported":
            lines += [UNSUPPORTED_MEANING[0].upper() + UNSUPPORTED_MEANING[1:] + ".", ""]
        for op, dtype, direction, cell in cells[:200]:
            reason = cell.reason.replace("|", "\\|").replace("\n", " ")[:200]
            lines.append(f"- `{op}` {dtype} {direction}: {reason}")
        if len(cells) > 200:
            lines.append(f"- ... and {len(cells) - 200} more")
    arbitrated = [placed for placed in m.cells() if placed.cell.arbitrated and placed.cell.status == "pass"]
    if arbitrated:
        lines += ["", f"## passed by float64 arbitration ({len(arbitrated)})", "", ARBITRATION_MEANING, ""]
        for op, dtype, direction, cell in arbitrated[:200]:
            reason = cell.reason.replace("|", "\\|").replace("\n", " ")[:200]
            lines.append(f"- `{op}` {dtype} {direction} ({cell.arbitrated} of {cell.samples}): {reason}")
        if len(arbitrated) > 200:
            lines.append(f"- ... and {len(arbitrated) - 200} more")
    if baseline:
        changed, _ = changes(m, baseline[1])
        lines += ["", f"## changed since the baseline `{baseline[0]}` ({len(changed)})", ""]
        lines += [f"- {c.kind}: `{c.op}` {c.dtype} {c.direction}: {c.old} -> {c.new}" for c in changed[:200]]
        if not changed:
            lines.append("No cell of the baseline changed status.")
        if len(changed) > 200:
            lines.append(f"- ... and {len(changed) - 200} more")
    if reference:
        lines += reference_section(reference[1], reference[0])
    if others:
        lines += report_platforms.section_lines([(source, m), *others], md_table)
    for path, peer_m in peers:
        lines += report_peers.section_lines(source, m, path, peer_m, md_table)
    return "\n".join(lines) + "\n"


def junit(m: matrix.Matrix) -> str:
    root = ET.Element("testsuites", name="jaxdev-coverage")
    for direction in DIRECTIONS:
        cells = [(op, dtype, c) for op, dtype, d, c in m.cells() if d == direction]
        suite = ET.SubElement(
            root,
            "testsuite",
            name=f"coverage.{direction}",
            tests=str(len(cells)),
            failures=str(sum(c.status in FAILURES for _, _, c in cells)),
            skipped=str(sum(c.status in UNMEASURED for _, _, c in cells)),
        )
        for op, dtype, c in cells:
            case = ET.SubElement(suite, "testcase", classname=f"coverage.{direction}.{op}", name=dtype)
            if c.status in FAILURES:
                f = ET.SubElement(case, "failure", type=c.status, message=c.reason[:500])
                f.text = c.repro
            elif c.status in UNMEASURED:
                ET.SubElement(case, "skipped", message=f"{c.status}: {c.reason}")
            elif c.status in DEGRADED:
                ET.SubElement(case, "system-out").text = c.reason
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"
