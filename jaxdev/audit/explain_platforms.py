"""`explain` across platforms: where another platform's files lie beside the ones `explain` reads
(coverage/tpu/matrix.yaml and coverage/tpu/aten.yaml beside coverage/matrix.yaml and
coverage/aten.yaml: platforms.folder), an OpInfo's cells whose status differs between platforms and
an overload's verdict on each platform, side by side. Reads the files as explain does (one entry at
a time: no jax, no device)."""

from __future__ import annotations

from jaxdev.audit import lookup, platforms
from jaxdev.audit.facts import DIRECTIONS


def sources(main: str | None) -> list[dict]:
    """Each platform's file beside `main` (main's first), when there is more than one platform."""
    files = platforms.beside(main) if main else []
    if len(files) < 2:
        return []
    return [{"platform": p.name, "device_kind": p.device_kind, "label": p.label, "path": path} for p, path in files]


def differing_cells(opinfo: str, main: str | None) -> list[dict]:
    """The OpInfo's cells whose status differs between the platforms' matrices beside `main`:
    [{dtype, direction, platforms: [{platform, status, reason}], line}] (a cell a platform lacks is
    not compared: a platform's sweep may be partial); `line` says it in words (side_by_side)."""
    files = platforms.beside(main) if main else []
    nodes = [(p, node) for p, path in files if (node := lookup.op_node(path, opinfo)) is not None]
    if len(nodes) < 2:
        return []
    slots = {(dtype, d) for _, node in nodes for dtype, dirs in node.results.items() for d in dirs}
    rows = []
    for dtype, direction in sorted(slots, key=lambda s: (s[0], DIRECTIONS.index(s[1]))):
        seen = [(p, node.results.get(dtype, {}).get(direction)) for p, node in nodes]
        seen = [(p, cell) for p, cell in seen if cell is not None]
        if len({cell.status for _, cell in seen}) > 1:
            each = [{"platform": p.label, "status": cell.status, "reason": cell.reason} for p, cell in seen]
            line = f"{opinfo} {dtype} {direction}: {side_by_side(each, 'status')}"
            rows.append({"dtype": dtype, "direction": direction, "platforms": each, "line": line})
    return rows


def verdicts(overload: str, main: str | None) -> dict | None:
    """The overload's verdict in each platform's aten matrix beside `main` (coverage/aten.yaml), when
    more than one holds it: {verdicts: [{platform, verdict, category, reason}], line} (None else)."""
    files = platforms.beside(main) if main else []
    each = []
    for p, path in files:
        node = lookup.aten_node(path, overload)
        if node is not None:
            each.append(
                {"platform": p.label, "verdict": node.verdict, "category": node.category, "reason": node.reason}
            )
    return {"verdicts": each, "line": side_by_side(each, "verdict")} if len(each) > 1 else None


def side_by_side(entries: list[dict], key: str, where: str = "platform") -> str:
    """'pass on cpu; wrong on TPU v5 lite: output differs ...': each entry's `key` (status or
    verdict, with its category) on its `where` (its platform, or a backend: explain_peers), with the
    reason of those that do not pass."""
    parts = []
    for e in entries:
        word = e[key] + (f" ({e['category']})" if e.get("category") else "")
        detail = f": {e['reason']}" if e[key] != "pass" and e.get("reason") else ""
        parts.append(f"{word} on {e[where]}{detail}")
    return "; ".join(parts)
