"""`explain --peers`: jaxdev's verdicts beside each peer backend's, where a peer's files lie beside
the ones explain reads (coverage/peers/torchax/aten.yaml and matrix.yaml beside coverage/aten.yaml
and coverage/matrix.yaml: peers.beside): an overload's verdict on each backend, and an OpInfo's
cells per dtype and direction on each, with the counts of cells one passes and the other fails
(peers.side_by_side). Reads the files as explain does, one entry at a time: no jax, no device."""

from __future__ import annotations

from jaxdev.audit import lookup, peers
from jaxdev.audit.explain_platforms import side_by_side
from jaxdev.audit.facts import DIRECTIONS
from jaxdev.audit.model import Peer
from jaxdev.audit.peers import side_by_side as sides


def label(path: str, aten: bool) -> str:
    """The peer a file records ("torchax 0.0.13"): meta.peer of an aten matrix, `peer` of a matrix."""
    data = lookup.meta(path).get("peer") if aten else lookup.section(path, "peer")
    peer = Peer.from_yaml(data)
    return peer.label if peer else "?"


def verdicts(overload: str, aten_path: str | None) -> dict:
    """The overload's verdict on jaxdev and on each peer whose aten.yaml lies beside `aten_path`:
    {verdicts: [{backend, verdict, category, reason}], line} (a backend without it says so)."""
    each = []
    files = [("jaxdev", aten_path)] if aten_path else []
    files += [(label(p, aten=True), p) for _, p in peers.beside(aten_path, "aten.yaml")]
    for backend, path in files:
        node = lookup.aten_node(path, overload)
        if node is None:
            each.append({"backend": backend, "verdict": "no verdict", "category": "", "reason": f"not in {path}"})
        else:
            each.append({"backend": backend, "verdict": node.verdict, "category": node.category, "reason": node.reason})
    return {"verdicts": each, "line": side_by_side(each, "verdict", where="backend")}


def cells(opinfo: str, matrix_path: str | None) -> list[dict]:
    """For each peer whose matrix.yaml lies beside `matrix_path`: the OpInfo's cells both measured,
    {peer, path, counts, sentence, grid: {dtype: {direction: [jaxdev's status, the peer's]}},
    differing: [{dtype, direction, line}]} (the cells whose outcome differs, with their reasons)."""
    ours = lookup.op_node(matrix_path, opinfo) if matrix_path else None
    out = []
    for _, path in peers.beside(matrix_path, "matrix.yaml"):
        theirs, name = lookup.op_node(path, opinfo), label(path, aten=False)
        found = sides.node_pairs(opinfo, ours, theirs) if ours and theirs else []
        grid: dict[str, dict[str, list[str]]] = {}
        differing = []
        for p in found:
            grid.setdefault(p.dtype, {})[p.direction] = [p.ours.status, p.theirs.status]
            if p.ours.status != p.theirs.status:
                each = [
                    {"backend": "jaxdev", "status": p.ours.status, "reason": p.ours.reason},
                    {"backend": name, "status": p.theirs.status, "reason": p.theirs.reason},
                ]
                line = f"{p.dtype} {p.direction}: {side_by_side(each, 'status', where='backend')}"
                differing.append({"dtype": p.dtype, "direction": p.direction, "kind": p.kind, "line": line})
        counts = sides.tally(found).get("all")
        entry = {"peer": name, "path": path, "grid": grid, "differing": differing, "counts": counts}
        entry["sentence"] = sides.sentence(counts, name.split()[0]) if counts else f"no cells of {opinfo} in {path}"
        out.append(entry)
    return out


def directions(rows: list[dict]) -> list[str]:
    """The directions any peer's grid holds, in facts.DIRECTIONS' order."""
    held = {d for r in rows for dirs in r["grid"].values() for d in dirs}
    return [d for d in DIRECTIONS if d in held]
