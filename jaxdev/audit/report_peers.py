"""The report beside peer backends: where a peer's matrix lies beside the one rendered
(coverage/peers/torchax/matrix.yaml beside coverage/matrix.yaml: peers.beside), summary.md gets a
section per peer (how its cells ran; per direction the cells both measured and how many each side
passes; "jaxdev passes N cells torchax fails; torchax passes M jaxdev fails", and those cells), and
the report folder a file per peer, peers/NAME.md: every OpInfo and dtype both measured, jaxdev's
status beside the peer's in each direction. The HTML page shows the peer's rows beside jaxdev's
(report_html, as another platform's). Counting is peers.side_by_side's."""

from __future__ import annotations

from jaxdev.audit import matrix
from jaxdev.audit.facts import DIRECTIONS
from jaxdev.audit.peers import side_by_side as sides

MAX_LISTED = 200


def label(m: matrix.Matrix) -> str:
    """'torchax 0.0.13 on cpu', 'jaxdev on TPU v5 lite': the backend a matrix measured, and where."""
    return f"{m.peer.label if m.peer else 'jaxdev'} on {m.measured_on.label}"


def _short(m: matrix.Matrix) -> str:
    return m.peer.name if m.peer else "jaxdev"


def _text(cell, limit: int = 160) -> str:
    reason = cell.reason.replace("|", "\\|").replace("\n", " ")[:limit]
    return f"{cell.status} ({reason})" if reason else cell.status


def counts_rows(found: list[sides.Pair], peer: str) -> list[list[str]]:
    """direction x (cells both measured, each side's passes, N, M, both fail)."""
    rows = [
        [
            "direction",
            "both measured",
            "jaxdev passes",
            f"{peer} passes",
            f"jaxdev passes, {peer} fails",
            f"{peer} passes, jaxdev fails",
            "both fail",
        ]
    ]
    for direction, c in sides.tally(found).items():
        ours, theirs = c["ours"] + c["both"], c["theirs"] + c["both"]
        rows.append(
            [direction, *(f"{n:,}" for n in (c["compared"], ours, theirs, c["ours"], c["theirs"], c["neither"]))]
        )
    return rows


def _by_status(found: list[sides.Pair], kind: str, side: str) -> str:
    """'lost_autograd 812, exception 301, ...': the failing side's statuses among the cells of `kind`."""
    counts: dict[str, int] = {}
    for p in found:
        if p.kind == kind:
            status = getattr(p, side).status
            counts[status] = counts.get(status, 0) + 1
    return ", ".join(f"{s} {n:,}" for s, n in sorted(counts.items(), key=lambda kv: -kv[1]))


def section_lines(source: str, m: matrix.Matrix, path: str, peer_m: matrix.Matrix, table) -> list[str]:
    """summary.md's section on one peer; `table(rows)` writes a Markdown table (report.md_table)."""
    name, found = _short(peer_m), sides.pairs(m, peer_m)
    counts = sides.tally(found).get("all") or dict.fromkeys(("ours", "theirs", "compared"), 0)
    lines = [
        "",
        f"## beside {peer_m.peer.label if peer_m.peer else name}",
        "",
        matrix.headline(peer_m, path),
        "",
        "How its cells ran:",
        "",
    ]
    lines += [f"- {how}" for how in (peer_m.peer.how if peer_m.peer else ())]
    lines += ["", f"**{sides.sentence(counts, name)}.**", ""]
    lines.append(
        f"A side passes a cell when its result is correct ({', '.join(sides.PASSES)}) and fails it with a failure "
        "status; skip and unsupported cells are neither. Only cells both matrices hold are compared. "
        f"Every OpInfo and dtype side by side: `peers/{name}.md` beside this file."
    )
    lines += ["", *table(counts_rows(found, name))]
    for kind, side, title in (
        ("ours", "theirs", f"jaxdev passes, {name} fails"),
        ("theirs", "ours", f"{name} passes, jaxdev fails"),
    ):
        listed = [p for p in found if p.kind == kind]
        lines += ["", f"### {title} ({len(listed):,})", ""]
        if listed:
            lines += [f"{name if side == 'theirs' else 'jaxdev'}'s statuses: {_by_status(found, kind, side)}.", ""]
        for p in listed[:MAX_LISTED]:
            lines.append(f"- `{p.op}` {p.dtype} {p.direction}: {_text(getattr(p, side))}")
        if len(listed) > MAX_LISTED:
            lines.append(f"- ... and {len(listed) - MAX_LISTED:,} more (`peers/{name}.md`)")
    return lines


def page(source: str, m: matrix.Matrix, path: str, peer_m: matrix.Matrix) -> str:
    """peers/NAME.md: every OpInfo and dtype both matrices measured, a row each, the statuses
    'jaxdev / peer' per direction (bold where one passes and the other fails)."""
    name, found = _short(peer_m), sides.pairs(m, peer_m)
    counts = sides.tally(found).get("all") or dict.fromkeys(("ours", "theirs", "compared"), 0)
    directions = [d for d in DIRECTIONS if any(p.direction == d for p in found)]
    lines = [f"# jaxdev beside {label(peer_m)}", "", matrix.headline(m, source), "", matrix.headline(peer_m, path)]
    lines += ["", f"{sides.sentence(counts, name)}.", "", f"Each cell: jaxdev's status / {name}'s.", ""]
    rows: dict[tuple[str, str], dict[str, sides.Pair]] = {}
    for p in found:
        rows.setdefault((p.op, p.dtype), {})[p.direction] = p
    lines += ["| OpInfo | dtype | " + " | ".join(directions) + " |", "|---|---|" + "---|" * len(directions)]
    for (op, dtype), dirs in rows.items():
        cells = []
        for d in directions:
            p = dirs.get(d)
            text = f"{p.ours.status} / {p.theirs.status}" if p else ""
            cells.append(f"**{text}**" if p and p.kind in ("ours", "theirs") else text)
        lines.append(f"| `{op}` | {dtype} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"
