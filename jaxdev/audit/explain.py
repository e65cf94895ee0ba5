"""`explain`: one op in plain words, in two voices.

For a user (the default): does it work on jax, in which dtypes and directions it passes or fails,
and what to do. Read from the committed coverage files (coverage/aten.yaml's verdict per overload,
coverage/matrix.yaml's cells per OpInfo) and the installed torch's schemas (jaxdev.audit.schemas):
no jax, no op_db, no device, so it answers in well under a second.

For a kernel author (`dev=True`, jaxdev.audit.explain_dev): the routes through this checkout's
dispatcher, where its kernels are registered, what registering one would take away, and the ops its
OpInfo's samples reach. That reads the live registry, so it loads the device (seconds).
"""

from __future__ import annotations

import os
import re

from jaxdev.audit import AuditError, explain_platforms, lookup, names, schemas
from jaxdev.audit.facts import DIRECTIONS, FAILURES, UNSUPPORTED_MEANING
from jaxdev.audit.model import AtenNode, Cell, Route

MAX_GLOB_OVERLOADS = 12

# What the route means for someone using the op on jax tensors.
RUNS = {
    "native": "runs on jax (jaxdev's own kernel)",
    "decomposed": "decomposes into other ops, which run on jax",
    "composite": "runs PyTorch's generic kernel, which calls other ops on jax",
    "fallback": "has no jax kernel: computed on CPU and copied back (slow; warned once per op)",
    "missing": "cannot run on jax",
}
GRADIENTS = {
    "autograd": "gradients work (a derivative formula)",
    "math": "gradients come from its decomposition",
    "lost": "gradients are silently LOST: backward through it gives none",
    "missing": "backward through it raises",
}
UNTRIABLE_BY_DESIGN = ("sparse", "quantized", "nested")

_ERROR_PATTERNS = (
    r"Could not run '(?P<op>[\w:.]+)' with arguments from the '(?P<key>\w+)' backend",
    r"(?P<op>\w+::[\w.]+) has no jax kernel",
    r"(?P<op>\w+::[\w.]+): an autograd kernel was not registered",
    r"(?P<op>\w+)_overrideable not implemented",
    r"(?P<op>\w+::\w+(?:\.\w+)?)",
)


def op_from_error(text: str) -> str:
    """The op a pasted NotImplementedError / dispatcher error is about."""
    for pattern in _ERROR_PATTERNS:
        m = re.search(pattern, text)
        if m:
            op = m["op"]
            return op if "::" in op else f"aten::{op}"
    raise AuditError("found no operator name (like aten::add.Tensor) in the pasted error text")


# ---------------------------------------------------------------------------------------------
# Names


def _opinfo_bases(opinfo: str) -> list[str]:
    """The op names an OpInfo key may stand for without op_db: `linalg.norm.subgradients_at_zero`
    is OpInfo `linalg.norm` with a variant, `nn.functional.relu` has none."""
    parts = opinfo.split(".")
    return [".".join(parts[:i]) for i in range(len(parts), 0, -1)]


def _named_after(opinfo: str, aten_base: str) -> bool:
    return any(names.namesake(opinfo, b, aten_base) for b in _opinfo_bases(opinfo))


def resolve(name: str, index: dict[str, frozenset[str]] | None = None) -> tuple[list[str], str | None]:
    """(aten overloads, OpInfo) that `name` refers to: an overload (`aten::add.Tensor`, `add.Tensor`),
    an op (`aten::add`: all its overloads), a glob on aten names, or an OpInfo name (its namesake
    overloads come with it). An unknown name is an AuditError with the nearest names, ranked."""
    aten = set(schemas.table())
    index = names.load_index() if index is None else index
    if "::" in name and not name.startswith("aten::"):
        aten = names.dispatcher_names()  # another namespace (prims::, a library's): torch's own list
    overloads = names.aten_overloads(name, aten)
    opinfo = name if name in index else None
    if opinfo is None and overloads and not names.is_glob(name):
        b = names.base(overloads[0])
        wanted = set(overloads)
        same = [op for op in index if _named_after(op, b)]
        reaching = [op for op in same if index[op] & wanted]  # named after it and reaching it: the one
        opinfo = min(reaching or same, key=lambda n: (n.replace(".", "_") != b.strip("_"), len(n), n), default=None)
    if not overloads and opinfo:
        for b in _opinfo_bases(opinfo):
            overloads = names.aten_overloads(b.replace(".", "_"), aten) or names.aten_overloads(b.split(".")[-1], aten)
            if overloads:
                break
    if names.is_glob(name) and len(overloads) > MAX_GLOB_OVERLOADS:
        raise AuditError(
            f"{name!r} matches {len(overloads)} overloads; explain takes at most {MAX_GLOB_OVERLOADS} "
            f"(`jaxdev ops '{name}'` lists them all)"
        )
    if not overloads and not opinfo:
        raise AuditError(f"{name!r} is neither an aten operator nor an OpInfo name{suggest(name, aten, index)}")
    return overloads, opinfo


def suggest(name: str, aten, opinfos) -> str:
    """'; nearest: reshape, reshape_as, ...' or a pointer to `jaxdev ops` when nothing is near."""
    near = ranked(name, aten, opinfos)
    if near:
        return f"; nearest: {', '.join(near)}"
    return f" (nothing near it; `jaxdev ops '*{names.base(name).strip('*')}*'` lists aten names by glob)"


def ranked(name: str, aten, opinfos, n: int = 5) -> list[str]:
    """Near names, best first: the same base name (`add` for `add.Tensr`), then by difflib's
    similarity, shorter names first among equals. Aten names without their namespace."""
    return names.nearest(name, names.short_names(aten) | set(opinfos), n)


# ---------------------------------------------------------------------------------------------
# The user's answer


def aten_path() -> str | None:
    from jaxdev.audit import aten_matrix

    return aten_matrix.default_path()


def matrix_path(given: str | None) -> str | None:
    """The coverage matrix to read cells from: the one given, else coverage/matrix.yaml (then
    baseline.yaml) where the index is read from."""
    if given:
        if not os.path.exists(given):
            raise AuditError(f"no coverage matrix at {given}")
        return given
    index = names.index_path()
    return index if index and os.path.exists(index) else None


def overload_answer(name: str, node: AtenNode | None) -> dict:
    """Schema, how it runs, its verdict and cells, and what to do, for one overload."""
    info = schemas.table().get(name, {})
    out: dict = {"name": name, "schema": info.get("schema")}
    if node is None:
        out["todo"] = "no verdict in coverage/aten.yaml for it; `jaxdev coverage --aten NAME` tries it"
        return out
    device, autograd = node.route or Route()
    out.update(device=device, autograd=autograd, runs=RUNS.get(device, device), gradients=GRADIENTS.get(autograd))
    known = {k: v for k, v in node.to_yaml().items() if k in ANSWERED}
    out.update({k: known[k] for k in ANSWERED if known.get(k) not in (None, "", {})})
    out["by_status"] = by_status(node.cells)
    out["todo"] = what_to_do(out)
    return out


# An aten node's fields `explain` answers with, when they say something.
ANSWERED = ("verdict", "category", "evidence", "reason", "repro", "cells")
# A cell's fields a problem row gives, when they say something.
PROBLEM_FIELDS = ("status", "reason", "repro", "max_abs", "max_rel", "arbitrated")


def _problem(cell: Cell) -> dict:
    written = cell.to_yaml()
    return {k: written[k] for k in PROBLEM_FIELDS if written.get(k) not in (None, "")}


def by_status(cells: dict) -> dict[str, list[str]]:
    """{status: ['float32 forward, backward', ...]}: which dtypes and directions have each status."""
    out: dict[str, dict[str, list[str]]] = {}
    for dtype, dirs in cells.items():
        for direction in DIRECTIONS:
            if direction in (dirs or {}):
                out.setdefault(dirs[direction], {}).setdefault(dtype, []).append(direction)
    return {s: [f"{d} {', '.join(ds)}" for d, ds in per.items()] for s, per in out.items()}


def what_to_do(a: dict) -> str:
    verdict, category = a.get("verdict"), a.get("category")
    if a["autograd"] == "lost":
        return "forward works, but do not train through it on jax: compute it on CPU where gradients matter"
    if verdict == "fails" and category == "stride_mismatch":
        return (
            "values are right, but the result is laid out with other strides than on CPU: call "
            "`.contiguous()` on it before `.view()` or code that reads `.stride()`"
        )
    if verdict == "fails":
        bad = "; ".join(x for s, xs in a["by_status"].items() if s in FAILURES or s == "stride_mismatch" for x in xs)
        return (
            f"avoid it on jax where it fails ({bad or category}): run that call on CPU (`.cpu()`, then "
            "`.to('jax')`), and report it with the repro"
        )
    if verdict == "fallback" or a["device"] == "fallback":
        return "nothing required: results are right; for speed keep it off hot paths (JAXDEV_FALLBACK=error finds each use)"
    if a["device"] == "missing":
        return "run it on CPU: move its inputs with `.cpu()` and the result back with `.to('jax')`"
    if verdict == "untriable":
        if category in UNTRIABLE_BY_DESIGN:
            return f"jax tensors cannot hold {category} layouts (by design): use CPU for it"
        return "no verdict (it could not be tried automatically); try your call on jax against CPU"
    return "nothing: use it on jax"


def opinfo_cells(opinfo: str, path: str) -> dict | None:
    """The OpInfo's cells from the coverage matrix: a dtype x direction grid of statuses, and the
    cells that are not plain passes with their reasons and repros (one note for unsupported ones)."""
    node = lookup.op_node(path, opinfo)
    if not node:
        return None
    grid: dict[str, dict[str, str]] = {}
    problems, unsupported = [], []
    for dtype in sorted(node.results):
        dirs = node.results[dtype]
        for direction in DIRECTIONS:
            cell = dirs.get(direction)
            if cell is None:
                continue
            grid.setdefault(dtype, {})[direction] = cell.status
            if cell.status == "unsupported":
                unsupported.append(f"{dtype} {direction}")
            elif cell.status not in ("pass", "skip") or cell.arbitrated:
                problems.append({"dtype": dtype, "direction": direction, **_problem(cell)})
    out = {"opinfo": opinfo, "source": path, "grid": grid, "problems": problems}
    if unsupported:
        out["unsupported"] = {"cells": unsupported, "meaning": UNSUPPORTED_MEANING}
    return out


def explain(name: str, matrix: str | None = None, *, dev: bool = False, peers: bool = False) -> dict:
    """Everything `jaxdev explain NAME` prints, as data (see the module docstring); `peers`: each
    peer backend's verdicts and cells beside jaxdev's (explain_peers), when its files lie beside."""
    index = names.load_index(matrix_path(matrix)) if matrix else None
    overloads, opinfo = resolve(name, index)
    path = aten_path()
    report: dict = {
        "query": name,
        "opinfo": opinfo,
        "sources": {"aten": path, "matrix": matrix_path(matrix)},
        "overloads": [overload_answer(n, lookup.aten_node(path, n) if path else None) for n in overloads],
    }
    for answer in report["overloads"]:
        across = explain_platforms.verdicts(answer["name"], path)
        if across:
            answer["platforms"] = across
    if path:
        built, now = (lookup.meta(path).get("versions") or {}).get("torch"), schemas.torch_version()
        if built and now and built != now:
            report["stale"] = f"{path} was built with torch {built}; this is torch {now}"
    source = report["sources"]["matrix"]
    report["coverage"] = opinfo_cells(opinfo, source) if opinfo and source else None
    report["platforms"] = explain_platforms.sources(source)
    if report["coverage"] and report["platforms"]:
        report["coverage"]["by_platform"] = explain_platforms.differing_cells(opinfo, source)
    if not report["platforms"]:
        del report["platforms"]  # one platform: the answer as before
    if peers:
        _add_peers(report, path, source)
    if dev:
        from jaxdev.audit import explain_dev

        report["dev"] = explain_dev.section(overloads, opinfo, source, path)
    return report


def _add_peers(report: dict, aten: str | None, source: str | None) -> None:
    """Each overload's verdict on every backend, and the OpInfo's cells beside each peer's; one
    sentence when no peer's files lie beside the ones read."""
    from jaxdev.audit import explain_peers
    from jaxdev.audit import peers as peer_files

    if not peer_files.beside(aten, "aten.yaml") and not peer_files.beside(source, "matrix.yaml"):
        where = os.path.dirname(os.path.abspath(aten or source or os.path.join("coverage", "aten.yaml")))
        where = where if os.path.relpath(where).startswith("..") else os.path.relpath(where)
        raise AuditError(
            f"no peer backend's files beside {where} (peers/NAME/aten.yaml, matrix.yaml): "
            "`jaxdev coverage --backend torchax` and `--aten --backend torchax` make them"
        )
    for answer in report["overloads"]:
        answer["peers"] = explain_peers.verdicts(answer["name"], aten)
    if report["opinfo"] and source:
        report["peer_cells"] = explain_peers.cells(report["opinfo"], source)


def aten_verdicts(overloads: list[str], path: str | None = None) -> dict[str, dict]:
    """The aten matrix's verdicts (coverage/aten.yaml, when there is one) for these overloads:
    {name: {verdict, category, reason, evidence, cells, repro}} (keys present when known)."""
    path = path or aten_path()
    if not path or not os.path.exists(path):
        return {}
    keys = ("verdict", "category", "reason", "evidence", "cells", "repro")
    out = {}
    for n in overloads:
        node = lookup.aten_node(path, n)
        if node is not None:
            written = node.to_yaml()
            out[n] = {k: written[k] for k in keys if k in written}
    return out


def describe(name: str) -> dict:
    """The live dispatcher's view of one overload (loads the device): see explain_dev.describe."""
    from jaxdev.audit import explain_dev

    return explain_dev.describe(name)
