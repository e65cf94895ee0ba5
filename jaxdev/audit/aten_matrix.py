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

from jaxdev.audit import AuditError, matrix
from jaxdev.audit.facts import BACKWARD_DIRECTIONS, DIRECTIONS, FAILURES, SEVERITY, UNMEASURED, worst
from jaxdev.audit.model import CPU, AtenNode, Cell, OpNode, Peer, Platform, Verdict

SCHEMA = 1
ATEN_FILE = "aten.yaml"
VERDICTS = ("pass", "fails", "fallback", "untriable")
NOT_DENSE = ("sparse", "quantized", "nested")  # layouts jax tensors cannot hold by design


# ---------------------------------------------------------------------------------------------
# Aggregation (pure: no torch)


def reaching(ops: dict[str, OpNode]) -> dict[str, list[str]]:
    """overload -> the OpInfos whose `aten:` lists name it, from a matrix's `ops` mapping."""
    out: dict[str, list[str]] = {}
    for op in sorted(ops):
        for name in ops[op].aten:
            out.setdefault(name, []).append(op)
    return out


def _attributed(cell: Cell, overload: str) -> str:
    if cell.status == "fallback" and overload not in cell.fallback:
        return "pass"  # the fallback ran other ops; this one ran on jax kernels
    return cell.status


@dataclasses.dataclass(frozen=True)
class Deciding:
    """The worst measured cell of an overload's judging OpInfos: where it is, its status (as
    attributed to the overload) and the cell's reason (when the status is the cell's own) and repro."""

    opinfo: str
    dtype: str
    direction: str
    status: str
    reason: str
    repro: str


def aggregate(overload: str, ops: dict[str, OpNode], judges: list[str]) -> tuple[dict, Deciding | None]:
    """(cells, deciding) for one overload from the judging OpInfos' cells (the module's rule):
    cells {dtype: {direction: status}}; the Deciding cell (None when nothing was measured)."""
    backward_only = overload.split("::", 1)[-1].split(".")[0].endswith("_backward")
    cells: dict[str, dict[str, str]] = {}
    deciding = None
    for op in judges:
        for dtype, dirs in ops[op].results.items():
            for direction, cell in dirs.items():
                if backward_only and direction not in BACKWARD_DIRECTIONS:
                    continue
                status = _attributed(cell, overload)
                slot = cells.setdefault(dtype, {})
                slot[direction] = worst([slot[direction], status]) if direction in slot else status
                if status in UNMEASURED:
                    continue
                if deciding is None or _rank(status) < _rank(deciding.status):
                    reason = cell.reason if status == cell.status else ""
                    deciding = Deciding(op, dtype, direction, status, reason, cell.repro)
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


def from_opinfos(overload: str, ops: dict[str, OpNode], reached_by: list[str], namesakes: list[str]) -> AtenNode | None:
    """The overload's node from the OpInfo matrix; None when none of its cells is measured."""
    judges = namesakes or reached_by
    cells, deciding = aggregate(overload, ops, judges)
    if deciding is None:
        return None
    verdict, category = verdict_of(deciding.status)
    where = f"{deciding.opinfo} {deciding.dtype} {deciding.direction}"
    indirect = "" if namesakes else f"; indirect: reached by {len(reached_by)} OpInfo(s), none named after it"
    untraced = any("untraced" in d.values() for d in cells.values())
    if verdict == "pass":
        reason = f"every measured cell of {len(judges)} OpInfo(s) passes" + (
            " (compile: untraced in some)" if untraced else ""
        )
    else:
        detail = f": {deciding.reason}" if deciding.reason else ""
        reason = f"{deciding.status} in OpInfo {where}{detail}"
    node = AtenNode(verdict, "opinfo", reason + indirect, category or "", cells=cells, opinfos=list(reached_by))
    if judges != reached_by:
        node.judged_by = list(judges)
    if verdict != "pass":
        node.repro = deciding.repro
    return node


def from_trial(result: Verdict) -> AtenNode:
    """The overload's node from a direct trial (schema_samples.trial's verdict)."""
    status = result.status
    if status == "untriable":
        node = AtenNode("untriable", "none", category=result.category)
    else:
        verdict, category = verdict_of(status)
        node = AtenNode(
            verdict, "direct", category=category or "", cells={result.dtype or "float32": {"forward": status}}
        )
    reason = result.reason
    if status == "pass":
        reason = "direct trial: equal to CPU" + (f" ({reason})" if reason else "")
    elif status != "untriable":
        reason = f"direct trial: {status}: {reason}" if reason else f"direct trial: {status}"
    node.reason = reason
    node.repro = result.repro
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


def counts(overloads: dict[str, AtenNode]) -> dict:
    """meta.counts for the overload nodes (see the module docstring)."""
    verdicts = {v: 0 for v in VERDICTS}
    evidence: dict[str, int] = {}
    fails: dict[str, int] = {}
    untriable: dict[str, int] = {}
    for node in overloads.values():
        verdicts[node.verdict] += 1
        evidence[node.evidence] = evidence.get(node.evidence, 0) + 1
        if node.verdict == "fails":
            fails[node.category] = fails.get(node.category, 0) + 1
        if node.verdict == "untriable":
            untriable[node.category] = untriable.get(node.category, 0) + 1
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
    overloads: dict[str, AtenNode]

    @classmethod
    def of_run(
        cls, overloads: dict, source: str, direct: dict, scope=(), platform: Platform | None = None, peer=None
    ) -> AtenMatrix:
        """The matrix one `build` made of `overloads`, on `platform` (its trials' workers'), of the
        peer backend `peer` (a model.Peer; None: jaxdev)."""
        meta = {"versions": matrix.versions(), "source": source, "direct": direct}
        if scope:
            meta["scope"] = list(scope)
        if platform is not None:
            meta["platform"] = platform.to_yaml()
        if peer is not None:
            meta["peer"] = peer.to_yaml()
        return cls(meta, overloads)

    @property
    def peer(self) -> Peer | None:
        """meta.peer: the peer backend its verdicts are of (None: jaxdev)."""
        return Peer.from_yaml(self.meta.get("peer"))

    @property
    def measured_on(self) -> Platform:
        """meta.platform: where its direct trials ran (CPU when not recorded)."""
        return Platform.from_yaml(self.meta.get("platform")) or CPU

    def counts(self) -> dict:
        return counts(self.overloads)

    def merged(self, run: AtenMatrix) -> AtenMatrix:
        """A scoped run's nodes over this matrix's (every other node kept): meta stays this one's,
        with `this_run` describing the run (meta.direct stays the full run's)."""
        this_run = {**run.meta, "overloads": len(run.overloads), "verdicts": run.counts()["verdicts"]}
        this_run.pop("versions")
        this_run.pop("platform", None)  # the file's own (a scoped run must run where the file was made)
        this_run.pop("peer", None)  # likewise
        meta = {**self.meta, "this_run": this_run}
        if "scope" in self.meta:  # the file itself held a scope: it now holds both
            meta["scope"] = list(dict.fromkeys([*self.meta["scope"], *run.meta.get("scope", ())]))
        return AtenMatrix(meta, {**self.overloads, **run.overloads})

    def to_yaml(self) -> dict:
        return {
            "schema": SCHEMA,
            "meta": {**self.meta, "counts": self.counts()},
            "overloads": {name: node.to_yaml() for name, node in sorted(self.overloads.items())},
        }


def save(m: AtenMatrix, path: str) -> None:
    """Atomically, like matrix.save."""
    matrix.write_yaml(m.to_yaml(), path, prefix=".aten-")


def load(path: str) -> AtenMatrix:
    """An aten matrix from disk; any problem is one AuditError sentence."""
    doc = matrix.read_yaml(path, f"no aten matrix at {path}; run `jaxdev coverage --aten` first")
    if not isinstance(doc, dict) or doc.get("schema") != SCHEMA or not isinstance(doc.get("overloads"), dict):
        raise AuditError(f"{path} is not a jaxdev aten matrix (schema {SCHEMA} with an `overloads` mapping)")
    nodes = doc["overloads"]
    if not all(isinstance(node, dict) for node in nodes.values()):
        raise AuditError(f"{path} is malformed: every overload must map to a node")
    return AtenMatrix(doc.get("meta") or {}, {name: AtenNode.from_yaml(node) for name, node in nodes.items()})


def default_path() -> str | None:
    """coverage/aten.yaml in the working directory, else the committed one beside the package."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    for folder in (os.getcwd(), root):
        path = os.path.join(folder, "coverage", ATEN_FILE)
        if os.path.exists(path):
            return path
    return None
