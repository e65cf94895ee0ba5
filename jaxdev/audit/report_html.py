"""The HTML report: one self-contained page (inline CSS and script, nothing fetched) to explore a
coverage matrix. The data is embedded once as JSON and drawn by plain JS: filters by status, dtype,
direction and family, search by name or glob, a tooltip and a detail row per cell (reason, repro,
the commands to rerun and explain it), the aten overloads beside the OpInfos, and the cells whose
status changed since the baseline. The filters live in the URL hash (`#status=wrong&dir=backward`),
so a view can be linked. Without scripts the page still shows the summary and the changes, drawn
here in Python."""

from __future__ import annotations

import html
import json
from importlib import resources

from jaxdev.audit import report, report_peers, report_platforms
from jaxdev.audit.facts import DIRECTIONS, DTYPE_NAMES, SEVERITY, STATUSES, UNMEASURED, Status
from jaxdev.audit.model import Cell, OpNode

# Column order (facts.DTYPE_NAMES); dtypes not named there follow, sorted.
DTYPE_ORDER = DTYPE_NAMES
# Aten overload name prefixes that say their family; others take the families of the OpInfos reaching them.
ATEN_FAMILIES = {
    "linalg_": "linalg",
    "special_": "special",
    "fft_": "fft",
    "_foreach_": "foreach",
    "sparse_": "sparse",
    "_sparse_": "sparse",
    "_nested_": "nested",
    "quantize": "quantized",
    "_fake_quant": "quantized",
    "fake_quant": "quantized",
}
# Column headers of the aten view, in this order; other short fields of its nodes follow by name.
LABELS = {
    "verdict": "verdict",
    "category": "category",
    "route.PrivateUse1": "device route",
    "route.AutogradPrivateUse1": "autograd route",
    "evidence": "evidence",
}
MAX_STATIC_CHANGES = 500
UNKNOWN = Status("", "", "#78909c", "?")  # a status this jaxdev does not know (a newer matrix)
_NOT_SCALAR = object()


class _Interned:
    """Values embedded once, referred to by index (most cells share a handful of details)."""

    def __init__(self):
        self.items: list = []
        self._index: dict[str, int] = {}

    def __call__(self, value) -> int:
        key = json.dumps(value, sort_keys=True, default=str)
        if key not in self._index:
            self._index[key] = len(self.items)
            self.items.append(value)
        return self._index[key]


def _dtype_key(dtype: str):
    return (DTYPE_ORDER.index(dtype), "") if dtype in DTYPE_ORDER else (len(DTYPE_ORDER), dtype)


def _flat(info: dict) -> dict:
    """{route: {PrivateUse1: native}} -> {route.PrivateUse1: native}: nested scalars become columns."""
    out = {}
    for k, v in info.items():
        if isinstance(v, dict) and all(isinstance(x, str | bool | int) or x is None for x in v.values()):
            out.update({f"{k}.{kk}": vv for kk, vv in v.items()})
        else:
            out[k] = v
    return out


def _aten_nodes(raw: dict) -> dict:
    """The per-overload mapping of an aten matrix, wherever its layout keeps it."""
    for key in ("overloads", "ops", "aten"):
        if isinstance(raw.get(key), dict):
            return raw[key]
    return {k: v for k, v in raw.items() if isinstance(k, str) and "::" in k}


def _aten_results(node: dict) -> dict:
    """{dtype: {direction: entry}} of an aten node; {direction: {dtype: ...}} is turned around."""
    results = next((node[k] for k in ("results", "statuses", "cells") if isinstance(node.get(k), dict)), {})
    if results and set(results) <= set(DIRECTIONS):
        flipped: dict = {}
        for direction, by_dtype in results.items():
            for dtype, entry in (by_dtype or {}).items():
                flipped.setdefault(dtype, {})[direction] = entry
        return flipped
    return results


class _Builder:
    def __init__(self, src: report.Sources):
        self.src = src
        self.statuses = list(SEVERITY)
        self.directions = list(DIRECTIONS)
        self.details = _Interned()
        self.dtypes: set[str] = set()

    def _index(self, values: list, value: str) -> int:
        if value not in values:
            values.append(value)
        return values.index(value)

    def detail(self, cell: Cell) -> int:
        """A cell's facts but its status and sample count (those are in the cell itself)."""
        return self._detail(cell.to_yaml())

    def _detail(self, entry: dict) -> int:
        return self.details({k: v for k, v in entry.items() if k not in ("status", "samples")})

    def opinfo_cells(self, node: OpNode) -> list:
        """Flat [dtype, direction, status, samples, detail] * cells; dtypes by name until `finish`."""
        flat: list = []
        for dtype, by_direction in node.results.items():
            for direction, cell in by_direction.items():
                flat += self._flat(dtype, direction, cell.status, cell.samples, self.detail(cell))
        return flat

    def _flat(self, dtype: str, direction: str, status: str, samples: int, detail: int) -> list:
        self.dtypes.add(str(dtype))
        return [
            str(dtype),
            self._index(self.directions, str(direction)),
            self._index(self.statuses, status),
            samples,
            detail,
        ]

    def aten_cells(self, results: dict) -> list:
        """opinfo_cells for an aten node's cells ({dtype: {direction: status}}; a mapping of a cell's
        fields in place of a status is read too: a file of another layout draws as well as it can)."""
        flat: list = []
        for dtype, by_direction in (results or {}).items():
            for direction, entry in (by_direction or {}).items():
                entry = entry if isinstance(entry, dict) else {"status": str(entry)}
                status = str(entry.get("status", "unknown"))
                flat += self._flat(dtype, direction, status, entry.get("samples", 0), self._detail(entry))
        return flat

    def finish(self, tables: list[list], changes: list) -> None:
        """Dtypes by index in column order; details renumbered by use, so the common ones cost a digit."""
        self.dtype_list = sorted(self.dtypes, key=_dtype_key)
        at = {d: i for i, d in enumerate(self.dtype_list)}
        uses = [0] * len(self.details.items)
        for rows in tables:
            for row in rows:
                row[3][0::5] = [at[d] for d in row[3][0::5]]
                for i in row[3][4::5]:
                    uses[i] += 1
        order = sorted(range(len(uses)), key=lambda i: -uses[i])
        new = {old: i for i, old in enumerate(order)}
        self.details.items = [self.details.items[i] for i in order]
        for rows in tables:
            for row in rows:
                row[3][4::5] = [new[i] for i in row[3][4::5]]
        for row in changes:
            row[-1] = new[row[-1]]


def data(src: report.Sources) -> dict:
    """What the page's script draws, compact: names once, details interned, cells as flat lists."""
    m = src.matrix
    b = _Builder(src)
    aten_names = sorted({a for op in m.ops for a in m.aten(op)})
    aten_at = {a: i for i, a in enumerate(aten_names)}
    opinfos = sorted(m.ops)
    opinfo_at = {op: i for i, op in enumerate(opinfos)}
    rows = [[op, report.family(op), [aten_at[a] for a in m.aten(op)], b.opinfo_cells(m.ops[op])] for op in opinfos]
    platforms = _platform_rows(src, b, aten_names, rows)
    reached: dict[str, list[int]] = {}
    for op in opinfos:
        for a in m.aten(op):
            reached.setdefault(a, []).append(opinfo_at[op])

    aten = _aten_view(src, b, aten_names, reached, rows)
    changes = _changes(src, b)
    b.finish([rows, aten["rows"]], changes["rows"] if changes else [])
    shown = {"platforms": platforms} if platforms else {}  # the page of one platform, as before platforms
    return {
        **shown,
        "headline": report.headline(m, src.matrix_path),
        "statuses": b.statuses,
        "colours": {s: STATUSES[s].html if s in STATUSES else UNKNOWN.html for s in b.statuses},
        "glyphs": {s: STATUSES[s].glyph if s in STATUSES else UNKNOWN.glyph for s in b.statuses},
        "meaning": {s: STATUSES[s].meaning if s in STATUSES else UNKNOWN.meaning for s in b.statuses},
        "unmeasured": list(UNMEASURED),
        "directions": b.directions,
        "dtypes": b.dtype_list,
        "details": b.details.items,
        "aten_names": aten_names,
        "opinfo": rows,
        "aten": aten,
        "changes": changes,
    }


def _platform_rows(src: report.Sources, b: _Builder, aten_names: list[str], rows: list) -> list[str]:
    """Each other platform's and each peer backend's OpInfo rows after the matrix's own, a row's fifth
    field the index of its platform in the list returned (the labels, the matrix's first; [] for one).
    An overload only another platform's samples reached joins `aten_names`."""
    if not src.platforms and not src.peers:
        return []
    # a peer backend's rows as another platform's; with peers, every label names its backend
    label = report_peers.label if src.peers else report_platforms.label
    labels = [label(src.matrix)]
    for _, m in [*src.platforms, *src.peers]:
        labels.append(label(m))
        aten_names += sorted({a for op in m.ops for a in m.aten(op)} - set(aten_names))
        at = {a: i for i, a in enumerate(aten_names)}
        for op in sorted(m.ops):
            rows.append(
                [op, report.family(op), [at[a] for a in m.aten(op)], b.opinfo_cells(m.ops[op]), len(labels) - 1]
            )
    return labels


def _aten_view(src: report.Sources, b: _Builder, aten_names: list[str], reached: dict, rows: list) -> dict:
    """The aten tab: a row per overload (its families, the OpInfos reaching it, its cells, its
    node's other facts interned), and the short scalar fields that become columns and filters."""
    opinfo_at: dict[str, int] = {}
    for i, row in enumerate(rows):
        opinfo_at.setdefault(row[0], i)  # the matrix's own row (other platforms' rows follow it)
    aten = {"source": src.aten_path, "present": src.aten is not None, "rows": [], "columns": [], "labels": LABELS}
    aten["meta"] = (src.aten or {}).get("meta") if isinstance((src.aten or {}).get("meta"), dict) else None
    nodes = _aten_nodes(src.aten) if src.aten is not None else dict.fromkeys(aten_names)
    infos = _Interned()
    for name in sorted(nodes, key=str):
        node = nodes[name] if isinstance(nodes[name], dict) else {}
        full = name if "::" in str(name) else f"aten::{name}"
        info = _flat({k: v for k, v in node.items() if k not in ("results", "statuses", "cells")})
        reach = list(reached.get(full, []))
        for value in info.values():  # the aten matrix's own lists of OpInfos (reaching it, judging it)
            if isinstance(value, list) and value and all(v in opinfo_at for v in value):
                reach = sorted(set(reach) | {opinfo_at[v] for v in value})
        info.pop("opinfos", None)  # the same as `reach`, embedded once
        base = full.split("::", 1)[1].split(".")[0]
        prefix = next((f for p, f in ATEN_FAMILIES.items() if base.startswith(p)), None)
        families = [prefix] if prefix else sorted({rows[i][1] for i in reach}) or ["torch"]
        aten["rows"].append([full, families, reach, b.aten_cells(_aten_results(node)), infos(info)])
    aten["infos"] = infos.items
    # Short scalar fields of the aten nodes (routes, verdicts) become columns and filters.
    values: dict[str, set] = {}
    for info in infos.items:
        for k, v in info.items():
            scalar = isinstance(v, str | bool | int) or v is None
            values.setdefault(k, set()).add(v if scalar else _NOT_SCALAR)
    columns = [
        k for k, vs in values.items() if k not in ("reason", "repro") and _NOT_SCALAR not in vs and len(vs) <= 16
    ]
    aten["columns"] = sorted(columns, key=lambda k: (list(LABELS).index(k) if k in LABELS else len(LABELS), k))
    return aten


def _changes(src: report.Sources, b: _Builder) -> dict | None:
    """The cells whose status differs from the baseline's (None without a baseline)."""
    m = src.matrix
    changes = None
    if src.baseline is not None:
        changed, unrecorded = report.changes(m, src.baseline)
        b.dtypes.update(c.dtype for c in changed)  # a cell the matrix lacks may be the only one of its dtype
        changes = {
            "source": src.baseline_path,
            "cells": sum(1 for _ in src.baseline.cells()),
            "unrecorded": unrecorded,
            "rows": [
                [c.op, report.family(c.op), c.dtype, c.direction, c.old, c.new, c.kind, b.detail(c.cell)]
                for c in changed
            ],
        }
    return changes


def _table(rows: list[list[str]]) -> str:
    head = "".join(f"<th>{html.escape(c)}</th>" for c in rows[0])
    body = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in r) + "</tr>" for r in rows[1:])
    return f"<table class='counts'><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _badge(status: str) -> str:
    return f"<span class='badge s-{html.escape(status)}'>{html.escape(status)}</span>"


def _cards(m) -> str:
    """Per direction: a bar of the cells by status, and the pass and fallback shares."""
    cards = []
    for direction, counts in m.summary.items():
        total = sum(counts.values())
        if not total:
            continue
        bar = "".join(
            f"<span class='s-{s}' style='flex:{counts[s]}' title='{s}: {counts[s]}'></span>"
            for s in reversed(SEVERITY)
            if counts.get(s)
        )
        shares = m.shares.get(direction, {})
        facts = " · ".join(f"{k} <b>{shares[k]:.1%}</b>" for k in ("pass", "fallback") if shares.get(k) is not None)
        worst = ", ".join(
            f"{_badge(s)} {counts[s]}" for s in SEVERITY if counts.get(s) and s not in ("pass", *UNMEASURED)
        )
        cards.append(
            f"<div class='card'><h3>{direction}</h3><div class='bar'>{bar}</div>"
            f"<p><b>{total}</b> cells, {shares.get('measured', 0)} measured · {facts}</p>"
            f"<p class='worst'>{worst or 'no failures'}</p></div>"
        )
    return "<section class='cards'>" + "".join(cards) + "</section>"


def _static_changes(d: dict) -> str:
    c = d["changes"]
    if c is None:
        return ""
    rows = "".join(
        f"<tr><td>{html.escape(kind)}</td><td>{html.escape(op)}</td><td>{html.escape(dtype)}</td>"
        f"<td>{direction}</td><td>{_badge(old)} → {_badge(new)}</td></tr>"
        for op, _, dtype, direction, old, new, kind, _ in c["rows"][:MAX_STATIC_CHANGES]
    )
    more = f"<p>… and {len(c['rows']) - MAX_STATIC_CHANGES} more.</p>" if len(c["rows"]) > MAX_STATIC_CHANGES else ""
    table = (
        f"<table class='counts left'><thead><tr><th>change</th><th>OpInfo</th><th>dtype</th><th>direction</th>"
        f"<th>baseline → now</th></tr></thead><tbody>{rows}</tbody></table>{more}"
        if rows
        else "<p>No cell of the baseline changed status.</p>"
    )
    return (
        f"<section class='nojs'><h2>Changed since the baseline ({len(c['rows'])})</h2>"
        f"<p>Cells of <code>{html.escape(c['source'])}</code> ({c['cells']}) whose status differs here.</p>{table}</section>"
    )


def page(src: report.Sources) -> str:
    d = data(src)
    m = src.matrix
    counts = _table(report.summary_rows(m))
    for title, rows in report.by_dtype_tables(m):
        counts += f"<h3>{html.escape(title)}</h3>" + _table(rows)
    sources = [f"baseline <code>{html.escape(src.baseline_path)}</code>" if src.baseline is not None else "no baseline"]
    sources.append(
        f"aten matrix <code>{html.escape(src.aten_path)}</code>" if src.aten is not None else "no aten matrix"
    )
    style = "".join(
        f".s-{s}{{background:{c};color:{'#222' if s in STATUSES and STATUSES[s].dark_text else '#fff'}}}"
        for s, c in d["colours"].items()
    )
    payload = json.dumps(d, separators=(",", ":"), ensure_ascii=False, default=str).replace("<", "\\u003c")
    assets = resources.files("jaxdev.audit")
    # the explorer in two halves (data and filters; drawing and events), one closure once joined
    script = assets.joinpath("report.js").read_text() + assets.joinpath("report_draw.js").read_text()
    return (
        "<!doctype html><html lang='en'><head><meta charset='utf-8'>"
        "<meta name='viewport' content='width=device-width, initial-scale=1'><title>jaxdev coverage</title>"
        f"<style>{assets.joinpath('report.css').read_text()}{style}</style></head><body>"
        f"<header><h1>jaxdev coverage</h1><p>{html.escape(d['headline'])}</p>"
        f"<p class='muted'>{' · '.join(sources)}. Shares are of measured cells: {' and '.join(UNMEASURED)} "
        "cells are left out.</p></header>"
        f"{_cards(m)}<details class='numbers' open><summary>Counts by status and direction</summary>{counts}</details>"
        "<noscript><p class='note'>The explorer (filters, search, per-cell details, the aten view) needs "
        "JavaScript; summary.md beside this page lists every failure.</p></noscript>"
        f"{_static_changes(d)}"
        "<main id='app' hidden><nav id='tabs' class='tabs'></nav><div id='toolbar' class='toolbar'></div>"
        "<div id='view'></div></main><div id='tip' hidden></div>"
        f"<script type='application/json' id='data'>{payload}</script>"
        f"<script>{script}</script></body></html>\n"
    )
