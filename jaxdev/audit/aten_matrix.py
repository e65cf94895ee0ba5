"""The aten-level coverage matrix, `coverage/aten.yaml`: every aten overload of the dispatcher with
its routes to the jax device, the OpInfos whose samples reached it, its status per dtype and
direction, and one verdict with a reason.

Layout (keys sorted, canonical YAML like matrix.yaml):

    schema: 1
    meta:
      versions: {torch, jax, jaxdev, python}
      source: coverage/matrix.yaml          # the OpInfo matrix the cells were aggregated from
      scope: [patterns]                      # only when a run was limited to some overloads
      counts:
        overloads: 3110                      # every aten overload in the dispatcher (or the scope)
        verdicts: {pass, fails, fallback, untriable}
        evidence: {opinfo, direct, none}     # where the verdict came from
        fails: {category: n}                 # worst status of the failing overloads
        untriable: {category: n}             # why (facts.aten.UNTRIABLE)
        tried: n                             # verdict pass, fails or fallback
        tried_share: 0.9                     # tried / overloads
        dense: n                             # overloads neither sparse, quantized nor nested (NOT_DENSE)
        tried_share_dense: 0.95              # tried / dense
        comparable: n                        # dense ones with a CPU kernel to compare with
        tried_share_comparable: 0.95         # tried / comparable
      direct: {tried: n, jobs, timeout_s, wall_s}   # the direct trials of this run
    overloads:
      aten::add.Tensor:
        route: {PrivateUse1: native, AutogradPrivateUse1: autograd}   # as `jaxdev ops` computes them
        opinfos: [add, ...]                  # every OpInfo whose samples reached it (CPU trace)
        judged_by: [add]                     # the OpInfos its cells come from, when not all of opinfos
        evidence: opinfo | direct | none
        verdict: pass | fails | fallback | untriable
        category: wrong                      # fails: the worst status; untriable: why (see above)
        reason: str                          # one line: what decided the verdict
        repro: str                           # when known: the sample or direct call that decided it
        cells: {float32: {forward: pass, backward: pass, compile: pass}, ...}

Aggregation rule (evidence `opinfo`). An OpInfo reaches an overload when the overload is in its
`aten:` list (the overloads its CPU samples reached, over all its cells). The overload's cells
come from the OpInfos named after it (names.namesake: `add` for aten::add.Tensor) when any reach
it, else from every OpInfo that reaches it; a `*_backward` overload takes only their backward and
compile-backward cells. Cell (dtype, direction) = the worst status (facts.SEVERITY) of those OpInfos' cells in that
dtype and direction, with one attribution: an OpInfo cell of status `fallback` whose fallback list
does not name this overload ran it on jax kernels, and counts as `pass` for it. So a cell is `pass`
only if every judging OpInfo's cell passes (or fell back on other ops only). The verdict is the
worst measured cell (skip and unsupported are not measured): a failure status (facts.FAILURES) or
stride_mismatch -> `fails` with that status as category; fallback -> `fallback`; untraced or pass
-> `pass`. The reason names the OpInfo, dtype and direction of the deciding cell. An overload
reached only indirectly (no namesake OpInfo) may inherit a failure of another op in the same
samples, so when its OpInfo verdict is `fails` it is also tried directly (below) and the trial
decides the verdict (evidence `direct`; the reason quotes the OpInfo cells, which stay in `cells`
except the trial's own slot); an untriable trial leaves the OpInfo verdict.

Direct trials (evidence `direct`): an overload that no OpInfo reaches, or whose cells are all
unmeasured, is tried on jax:0 against CPU with inputs built from its schema (schema_samples):
one cell, the dtype of the first candidate CPU accepted, direction forward. Overloads that cannot
be tried by construction (sparse, quantized, no CPU kernel, no tensor argument, unbuildable
argument types) and those CPU rejects on every candidate are `untriable` (evidence `none`).
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Callable

from jaxdev.audit import AuditError, matrix
from jaxdev.audit.facts import BACKWARD_DIRECTIONS, DIRECTIONS, FAILURES, SEVERITY, UNMEASURED, worst

SCHEMA = 1
ATEN_FILE = "aten.yaml"
VERDICTS = ("pass", "fails", "fallback", "untriable")
NOT_DENSE = ("sparse", "quantized", "nested")  # layouts jax tensors cannot hold by design


# ---------------------------------------------------------------------------------------------
# Aggregation (pure: no torch)


def reaching(ops: dict) -> dict[str, list[str]]:
    """overload -> the OpInfos whose `aten:` lists name it, from a matrix's `ops` mapping."""
    out: dict[str, list[str]] = {}
    for op in sorted(ops):
        for name in ops[op].get("aten", ()) or ():
            out.setdefault(name, []).append(op)
    return out


def _attributed(entry: dict, overload: str) -> str:
    status = entry["status"]
    if status == "fallback" and overload not in entry.get("fallback", ()):
        return "pass"  # the fallback ran other ops; this one ran on jax kernels
    return status


def aggregate(overload: str, ops: dict, judges: list[str]) -> tuple[dict, dict | None]:
    """(cells, deciding) for one overload from the judging OpInfos' cells (the module's rule):
    cells {dtype: {direction: status}}; deciding {opinfo, dtype, direction, status, reason, repro}
    for the worst measured cell (None when nothing was measured)."""
    backward_only = overload.split("::", 1)[-1].split(".")[0].endswith("_backward")
    cells: dict[str, dict[str, str]] = {}
    deciding = None
    for op in judges:
        for dtype, dirs in (ops[op].get("results") or {}).items():
            for direction, entry in (dirs or {}).items():
                if backward_only and direction not in BACKWARD_DIRECTIONS:
                    continue
                status = _attributed(entry, overload)
                slot = cells.setdefault(dtype, {})
                slot[direction] = worst([slot[direction], status]) if direction in slot else status
                if status in UNMEASURED:
                    continue
                if deciding is None or _rank(status) < _rank(deciding["status"]):
                    deciding = {
                        "opinfo": op,
                        "dtype": dtype,
                        "direction": direction,
                        "status": status,
                        "reason": entry.get("reason", "") if status == entry["status"] else "",
                        "repro": entry.get("repro"),
                    }
    ordered = {d: {k: cells[d][k] for k in DIRECTIONS if k in cells[d]} for d in sorted(cells)}
    return ordered, deciding


def _rank(status: str) -> int:
    """A status's place when the worst cell decides the verdict: SEVERITY's, but untraced (its verdict
    is pass: correct, the graph ran op by op) as pass, so a fallback in an eager cell is not hidden
    behind a compiled cell's untraced (matrix_exp's half precision: fallback eagerly, untraced compiled)."""
    return SEVERITY.index("pass" if status == "untraced" else status)


def verdict_of(status: str) -> tuple[str, str | None]:
    """(verdict, category) for the worst measured status."""
    if status in FAILURES or status == "stride_mismatch":
        return "fails", status
    if status == "fallback":
        return "fallback", None
    return "pass", None


def from_opinfos(overload: str, ops: dict, reached_by: list[str], namesakes: list[str]) -> dict | None:
    """The overload's node from the OpInfo matrix; None when none of its cells is measured."""
    judges = namesakes or reached_by
    cells, deciding = aggregate(overload, ops, judges)
    if deciding is None:
        return None
    verdict, category = verdict_of(deciding["status"])
    where = f"{deciding['opinfo']} {deciding['dtype']} {deciding['direction']}"
    indirect = "" if namesakes else f"; indirect: reached by {len(reached_by)} OpInfo(s), none named after it"
    untraced = any("untraced" in d.values() for d in cells.values())
    if verdict == "pass":
        reason = f"every measured cell of {len(judges)} OpInfo(s) passes" + (
            " (compile: untraced in some)" if untraced else ""
        )
    else:
        detail = f": {deciding['reason']}" if deciding["reason"] else ""
        reason = f"{deciding['status']} in OpInfo {where}{detail}"
    node = {
        "opinfos": list(reached_by),
        "evidence": "opinfo",
        "verdict": verdict,
        "reason": reason + indirect,
        "cells": cells,
    }
    if judges != reached_by:
        node["judged_by"] = list(judges)
    if category:
        node["category"] = category
    if verdict != "pass" and deciding.get("repro"):
        node["repro"] = deciding["repro"]
    return node


def from_trial(result: dict) -> dict:
    """The overload's node from a direct trial (schema_samples.trial's verdict)."""
    status = result["status"]
    if status == "untriable":
        node = {"evidence": "none", "verdict": "untriable", "category": result["category"], "cells": {}}
    else:
        verdict, category = verdict_of(status)
        node = {
            "evidence": "direct",
            "verdict": verdict,
            "cells": {result.get("dtype", "float32"): {"forward": status}},
        }
        if category:
            node["category"] = category
    reason = result.get("reason", "")
    if status == "pass":
        reason = "direct trial: equal to CPU" + (f" ({reason})" if reason else "")
    elif status != "untriable":
        reason = f"direct trial: {status}: {reason}" if reason else f"direct trial: {status}"
    node["reason"] = reason
    if result.get("repro"):
        node["repro"] = result["repro"]
    return node


def _family(name: str) -> str:
    """`aten::add_.Tensor`, `aten::add.out` -> `add`: the overloads that share arguments."""
    return name.split("::", 1)[-1].split(".")[0].rstrip("_") or name


def donors(todo, reach: dict[str, list[str]], ops: dict, per: int = 3) -> dict[str, list[tuple[str, str]]]:
    """overload -> up to `per` (sibling overload an OpInfo reaches, that OpInfo): a sibling shares
    the family (`add.out` for `add.Tensor`), functional overloads first; its captured arguments
    are the first candidates of the direct trial (schema_samples.donor_candidates)."""
    by_family: dict[str, list[str]] = {}
    for name, reached_by in reach.items():
        if any(op in ops for op in reached_by):
            by_family.setdefault(_family(name), []).append(name)
    out = {}
    for name in todo:
        sibs = sorted(by_family.get(_family(name), ()), key=lambda n: ("out" in n, n.endswith("_"), n))
        picked = [(s, next(op for op in reach[s] if op in ops)) for s in sibs[:per]]
        if picked:
            out[name] = picked
    return out


def counts(overloads: dict) -> dict:
    """meta.counts for the overload nodes (see the module docstring)."""
    verdicts = {v: 0 for v in VERDICTS}
    evidence: dict[str, int] = {}
    fails: dict[str, int] = {}
    untriable: dict[str, int] = {}
    for node in overloads.values():
        verdicts[node["verdict"]] += 1
        evidence[node["evidence"]] = evidence.get(node["evidence"], 0) + 1
        if node["verdict"] == "fails":
            fails[node["category"]] = fails.get(node["category"], 0) + 1
        if node["verdict"] == "untriable":
            untriable[node["category"]] = untriable.get(node["category"], 0) + 1
    n = len(overloads)
    tried = n - verdicts["untriable"]
    dense = n - sum(untriable.get(c, 0) for c in NOT_DENSE)
    comparable = dense - untriable.get("no_cpu_kernel", 0)
    return {
        "overloads": n,
        "verdicts": verdicts,
        "evidence": dict(sorted(evidence.items())),
        "fails": dict(sorted(fails.items())),
        "untriable": dict(sorted(untriable.items())),
        "tried": tried,
        "tried_share": round(tried / n, 4) if n else 0.0,
        "dense": dense,
        "tried_share_dense": round(tried / dense, 4) if dense else 0.0,
        "comparable": comparable,
        "tried_share_comparable": round(tried / comparable, 4) if comparable else 0.0,
    }


# ---------------------------------------------------------------------------------------------
# The file


@dataclasses.dataclass
class AtenMatrix:
    """coverage/aten.yaml as an object: the overload nodes and the run's meta (versions, source,
    scope, direct, this_run); meta.counts is computed from the nodes when written."""

    meta: dict
    overloads: dict[str, dict]

    @classmethod
    def of_run(cls, overloads: dict, source: str, direct: dict, scope=()) -> AtenMatrix:
        """The matrix one `build` made of `overloads`."""
        meta = {"versions": matrix.versions(), "source": source, "direct": direct}
        if scope:
            meta["scope"] = list(scope)
        return cls(meta, overloads)

    def counts(self) -> dict:
        return counts(self.overloads)

    def merged(self, run: AtenMatrix) -> AtenMatrix:
        """A scoped run's nodes over this matrix's (every other node kept): meta stays this one's,
        with `this_run` describing the run (meta.direct stays the full run's)."""
        this_run = {**run.meta, "overloads": len(run.overloads), "verdicts": run.counts()["verdicts"]}
        this_run.pop("versions")
        meta = {**self.meta, "this_run": this_run}
        if "scope" in self.meta:  # the file itself held a scope: it now holds both
            meta["scope"] = list(dict.fromkeys([*self.meta["scope"], *run.meta.get("scope", ())]))
        return AtenMatrix(meta, {**self.overloads, **run.overloads})

    def to_yaml(self) -> dict:
        return {
            "schema": SCHEMA,
            "meta": {**self.meta, "counts": self.counts()},
            "overloads": dict(sorted(self.overloads.items())),
        }


def save(m: AtenMatrix, path: str) -> None:
    """Atomically, like matrix.save."""
    matrix.write_yaml(m.to_yaml(), path, prefix=".aten-")


def load(path: str) -> AtenMatrix:
    """An aten matrix from disk; any problem is one AuditError sentence."""
    doc = matrix.read_yaml(path, f"no aten matrix at {path}; run `jaxdev coverage --aten` first")
    if not isinstance(doc, dict) or doc.get("schema") != SCHEMA or not isinstance(doc.get("overloads"), dict):
        raise AuditError(f"{path} is not a jaxdev aten matrix (schema {SCHEMA} with an `overloads` mapping)")
    return AtenMatrix(doc.get("meta") or {}, doc["overloads"])


def default_path() -> str | None:
    """coverage/aten.yaml in the working directory, else the committed one beside the package."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    for folder in (os.getcwd(), root):
        path = os.path.join(folder, "coverage", ATEN_FILE)
        if os.path.exists(path):
            return path
    return None


# ---------------------------------------------------------------------------------------------
# Building it (needs torch: routes, namesakes, direct trials)


def build(
    matrix_path: str,
    out_path: str,
    *,
    patterns=(),
    jobs: int = 1,
    timeout: float | None = None,
    cache_dir: str | None = None,
    on_start: Callable[[int, int], None] | None = None,
    on_trial: Callable[[str, dict], None] | None = None,
) -> AtenMatrix:
    """Aggregate `matrix_path`'s cells per overload, try the rest directly, write `out_path`, and
    return the matrix. `patterns`: only these aten overloads (names.aten_overloads' forms); where
    `out_path` already holds an aten matrix, their nodes replace the same nodes in it and every
    other node stays (`meta.this_run` describes the scoped run; `meta.direct` stays the full run's).
    `on_start(aggregated, to_try)` before the trials, `on_trial(name, result)` after each."""
    from jaxdev.audit import dispatch

    m = matrix.load(matrix_path)
    kept = None
    if patterns and os.path.exists(out_path):
        kept = load(out_path)  # before any trial: a file that cannot take the nodes fails at once
        matrix.check_versions(kept.meta.get("versions") or {}, out_path, "a scoped --aten run")
    all_names = _chosen(patterns) if patterns else dispatch.all_op_names("aten")
    reach = reaching(m.ops)
    overloads, todo = _judge(all_names, m.ops, reach)
    if on_start:
        on_start(len(all_names) - len(todo), len(todo))
    direct = _try(todo, overloads, donors(todo, reach, m.ops), jobs, timeout, cache_dir, on_trial)
    run = AtenMatrix.of_run(overloads, matrix_path, direct, patterns)
    result = run if kept is None else kept.merged(run)
    save(result, out_path)
    return result


def _try(todo: list[str], overloads: dict, given: dict, jobs: int, timeout, cache_dir, on_trial) -> dict:
    """The direct trials of `todo`, each result taken into its node; returns meta.direct."""
    from jaxdev.audit import schema_samples

    start = time.monotonic()

    def got(name: str, result: dict) -> None:
        _take_trial(overloads[name], result)
        if on_trial:
            on_trial(name, result)

    timeout = timeout or schema_samples.DEFAULT_TIMEOUT_S
    schema_samples.run_trials(todo, donors=given, jobs=jobs, timeout=timeout, on_result=got, cache_dir=cache_dir)
    return {"tried": len(todo), "jobs": jobs, "timeout_s": timeout, "wall_s": round(time.monotonic() - start, 1)}


def _chosen(patterns) -> list[str]:
    """The aten overloads `patterns` name; a pattern that names none is an AuditError."""
    from jaxdev.audit import names

    chosen: set[str] = set()
    for p in patterns:
        hits = [n for n in names.aten_overloads(p) if n.startswith("aten::")]
        if not hits:
            raise AuditError(f"no aten overload named {p!r}")
        chosen.update(hits)
    return sorted(chosen)


def _judge(all_names: list[str], ops: dict, reach: dict[str, list[str]]) -> tuple[dict[str, dict], list[str]]:
    """(overload -> node from the OpInfo cells or a static verdict, the overloads to try directly)."""
    from jaxdev.audit import dispatch, names, samples, schema_samples

    db = samples.op_db()
    overloads: dict[str, dict] = {}
    todo: list[str] = []
    for name in all_names:
        st = dispatch.status(name)
        route = {"PrivateUse1": st.device, "AutogradPrivateUse1": st.autograd}
        reached_by = [op for op in reach.get(name, []) if op in ops]
        b = names.base(name)
        namesakes = [op for op in reached_by if op in db and names.namesake(op, getattr(db[op], "name", op), b)]
        node = from_opinfos(name, ops, reached_by, namesakes) if reached_by else None
        if node is not None and node["verdict"] == "fails" and not namesakes:
            todo.append(name)  # indirect evidence only: a direct trial decides (see the docstring)
        if node is None:
            static = schema_samples.static_untriable(name)
            if static:
                node = from_trial({"status": "untriable", "category": static[0], "reason": static[1]})
            else:
                todo.append(name)
                node = {}
        overloads[name] = {"route": route, "opinfos": reached_by, **node}
    return overloads, todo


def _take_trial(node: dict, result: dict) -> None:
    """A direct trial's result into the overload's node (the module docstring's rule)."""
    trial = from_trial(result)
    if node.get("evidence") == "opinfo":  # an indirect failure, tried to see whose it is
        if trial["verdict"] == "untriable":
            node["reason"] += f"; a direct trial was not possible ({trial['reason'][:120]})"
            return
        trial["reason"] += f"; its OpInfo cells: {node['reason']}"
        if trial["verdict"] != "fails":
            node.pop("repro", None)
            node.pop("category", None)
    opinfo_cells = node.get("cells", {})
    for dtype, dirs in trial.pop("cells").items():
        opinfo_cells.setdefault(dtype, {}).update(dirs)
    node.update(trial, cells=opinfo_cells)
