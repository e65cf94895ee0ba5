"""Reports from a coverage matrix: Markdown summary, HTML page with an op x dtype heatmap
(an SVG drawn here, so no plotting dependency), and JUnit XML for CI systems."""

from __future__ import annotations

import html
import os
import xml.etree.ElementTree as ET

from jaxdev.audit import matrix
from jaxdev.audit.facts import DEGRADED, DIRECTIONS, FAILURES, SEVERITY, UNMEASURED, UNSUPPORTED_MEANING
from jaxdev.audit.facts import shares as facts_shares

COLOURS = {
    "pass": "#2e7d32",
    "fallback": "#f9a825",
    "untraced": "#ef6c00",
    "missing": "#c62828",
    "lost_autograd": "#ad1457",
    "exception": "#e53935",
    "wrong": "#6a1b9a",
    "dtype_mismatch": "#8e24aa",
    "shape_mismatch": "#5e35b1",
    "stride_mismatch": "#f9a825",
    "crash": "#000000",
    "timeout": "#424242",
    "unsupported": "#90a4ae",
    "skip": "#bdbdbd",
}
CELL, LABEL_W, HEADER_H = 12, 260, 90
_SHORT = {"forward": "fwd", "backward": "bwd", "compile": "compiled"}


def _columns(m: matrix.Matrix) -> list[tuple[str, str]]:
    cols = {(dtype, direction) for _, dtype, direction, _ in m.cells()}
    return sorted(cols, key=lambda c: (DIRECTIONS.index(c[1]), c[0]))


def heatmap_svg(m: matrix.Matrix) -> str:
    ops = sorted(m.ops)
    cols = _columns(m)
    width, height = LABEL_W + CELL * len(cols) + 10, HEADER_H + CELL * len(ops) + 10
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="monospace" font-size="10">'
    ]
    for j, (dtype, direction) in enumerate(cols):
        x = LABEL_W + j * CELL + CELL - 2
        label = f"{dtype} {_SHORT[direction]}"
        parts.append(f'<text transform="translate({x},{HEADER_H - 4}) rotate(-90)">{html.escape(label)}</text>')
    for i, op in enumerate(ops):
        y = HEADER_H + i * CELL
        parts.append(f'<text x="{LABEL_W - 4}" y="{y + CELL - 2}" text-anchor="end">{html.escape(op)}</text>')
        for j, (dtype, direction) in enumerate(cols):
            entry = m.get(op, dtype, direction)
            if entry is None:
                continue
            tip = html.escape(f"{op} {dtype} {direction}: {entry['status']} {entry.get('reason', '')}"[:300])
            parts.append(
                f'<rect x="{LABEL_W + j * CELL}" y="{y}" width="{CELL - 1}" height="{CELL - 1}" '
                f'fill="{COLOURS[entry["status"]]}"><title>{tip}</title></rect>'
            )
    parts.append("</svg>")
    return "\n".join(parts)


def failures(m: matrix.Matrix) -> dict[str, list[tuple[str, str, str, dict]]]:
    """Failures, degraded and unsupported cells by status, worst first."""
    by: dict[str, list] = {}
    for op, dtype, direction, entry in m.cells():
        if entry["status"] in FAILURES or entry["status"] in DEGRADED or entry["status"] == "unsupported":
            by.setdefault(entry["status"], []).append((op, dtype, direction, entry))
    return {k: by[k] for k in SEVERITY if k in by}


def _summary_rows(m: matrix.Matrix) -> list[list[str]]:
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


def _by_dtype_rows(m: matrix.Matrix, direction: str) -> list[list[str]]:
    """status x dtype counts for one direction (backward is measured in every dtype the OpInfo differentiates)."""
    counts: dict[str, dict[str, int]] = {}
    for _, dtype, d, entry in m.cells():
        if d == direction:
            row = counts.setdefault(dtype, {})
            row[entry["status"]] = row.get(entry["status"], 0) + 1
    if not counts:
        return []
    statuses = [s for s in SEVERITY if any(s in c for c in counts.values())]
    dtypes = sorted(counts)
    rows = [["status", *dtypes]]
    rows += [[s, *(str(counts[t].get(s, 0)) for t in dtypes)] for s in statuses]
    shares = {t: facts_shares(counts[t]) for t in dtypes}
    rows.append(["pass share", *(f"{shares[t]['pass']:.0%}" if shares[t]["measured"] else "-" for t in dtypes)])
    return rows


def _md_table(rows: list[list[str]]) -> list[str]:
    return ["| " + " | ".join(rows[0]) + " |", "|" + "---|" * len(rows[0])] + [
        "| " + " | ".join(r) + " |" for r in rows[1:]
    ]


def _html_table(rows: list[list[str]]) -> str:
    return (
        "<table><tr>"
        + "".join(f"<th>{html.escape(c)}</th>" for c in rows[0])
        + "</tr>"
        + "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in r) + "</tr>" for r in rows[1:])
        + "</table>"
    )


def markdown(m: matrix.Matrix, source: str) -> str:
    v, run = m.versions, m.run
    lines = [
        "# jaxdev coverage report",
        "",
        f"Matrix `{source}`: torch {v.get('torch')}, jax {v.get('jax')}, jaxdev {v.get('jaxdev')}; "
        f"{len(m.ops)} OpInfos, {run.get('samples', '?')} samples (at most {run.get('max_samples', '?')} per cell), "
        f"{'complete' if run.get('complete') else 'PARTIAL'} run, {run.get('wall_s', '?')} s.",
        "",
    ]
    lines += _md_table(_summary_rows(m))
    lines += ["", f"Shares are of measured cells: {' and '.join(UNMEASURED)} cells are left out.", ""]
    backward = _by_dtype_rows(m, "backward")
    if backward:
        lines += ["## backward by dtype", ""] + _md_table(backward)
    for status, cells in failures(m).items():
        lines += ["", f"## {status} ({len(cells)})", ""]
        if status == "unsupported":
            lines += [UNSUPPORTED_MEANING[0].upper() + UNSUPPORTED_MEANING[1:] + ".", ""]
        for op, dtype, direction, entry in cells[:200]:
            reason = entry.get("reason", "").replace("|", "\\|").replace("\n", " ")[:200]
            lines.append(f"- `{op}` {dtype} {direction}: {reason}")
        if len(cells) > 200:
            lines.append(f"- ... and {len(cells) - 200} more")
    return "\n".join(lines) + "\n"


def html_page(m: matrix.Matrix, source: str) -> str:
    table = _html_table(_summary_rows(m))
    table += f"<p>Shares are of measured cells: {' and '.join(UNMEASURED)} cells are left out.</p>"
    backward = _by_dtype_rows(m, "backward")
    if backward:
        table += "<h2>backward by dtype</h2>" + _html_table(backward)
    legend = " ".join(f'<span style="background:{c};color:#fff;padding:1px 4px">{s}</span>' for s, c in COLOURS.items())
    sections = []
    for status, cells in failures(m).items():
        items = "".join(
            f"<li><code>{html.escape(op)}</code> {dtype} {direction}: {html.escape(e.get('reason', '')[:300])}</li>"
            for op, dtype, direction, e in cells[:300]
        )
        note = f"<p>{html.escape(UNSUPPORTED_MEANING)}.</p>" if status == "unsupported" else ""
        sections.append(f"<h2>{status} ({len(cells)})</h2>{note}<ul>{items}</ul>")
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><title>jaxdev coverage</title>"
        f"<style>body{{font-family:sans-serif}} td,th{{padding:2px 8px;text-align:right}}</style></head><body>"
        f"<h1>jaxdev coverage</h1><p>{html.escape(markdown(m, source).splitlines()[2])}</p>{table}"
        f"<h2>op x dtype (eager forward, eager backward, then forward under torch.compile)</h2><p>{legend}</p>{heatmap_svg(m)}{''.join(sections)}</body></html>\n"
    )


def junit(m: matrix.Matrix) -> str:
    root = ET.Element("testsuites", name="jaxdev-coverage")
    for direction in DIRECTIONS:
        cells = [(op, dtype, e) for op, dtype, d, e in m.cells() if d == direction]
        suite = ET.SubElement(
            root,
            "testsuite",
            name=f"coverage.{direction}",
            tests=str(len(cells)),
            failures=str(sum(e["status"] in FAILURES for _, _, e in cells)),
            skipped=str(sum(e["status"] in UNMEASURED for _, _, e in cells)),
        )
        for op, dtype, e in cells:
            case = ET.SubElement(suite, "testcase", classname=f"coverage.{direction}.{op}", name=dtype)
            if e["status"] in FAILURES:
                f = ET.SubElement(case, "failure", type=e["status"], message=e.get("reason", "")[:500])
                f.text = e.get("repro", "")
            elif e["status"] in UNMEASURED:
                ET.SubElement(case, "skipped", message=f"{e['status']}: {e.get('reason', '')}")
            elif e["status"] in DEGRADED:
                ET.SubElement(case, "system-out").text = e.get("reason", "")
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"


def write(m: matrix.Matrix, source: str, out_dir: str) -> list[str]:
    os.makedirs(out_dir, exist_ok=True)
    files = {"summary.md": markdown(m, source), "index.html": html_page(m, source), "junit.xml": junit(m)}
    paths = []
    for name, text in files.items():
        path = os.path.join(out_dir, name)
        tmp = path + ".tmp"
        with open(tmp, "w") as f:
            f.write(text)
        os.replace(tmp, path)
        paths.append(path)
    return paths
