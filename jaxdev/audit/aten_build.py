"""Building coverage/aten.yaml (aten_matrix.py has the file and the rule): the OpInfo matrix's cells
aggregated per overload, routes read from this checkout's dispatcher, and direct trials for the rest
(needs torch: routes, namesakes, direct trials)."""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Callable

from jaxdev.audit import AuditError, matrix
from jaxdev.audit.aten_matrix import AtenMatrix, donors, from_opinfos, from_trial, load, reaching, save
from jaxdev.audit.model import AtenNode, OpNode, Platform, Route, Verdict


def build(
    matrix_path: str,
    out_path: str,
    *,
    patterns=(),
    jobs: int = 1,
    timeout: float | None = None,
    cache_dir: str | None = None,
    on_start: Callable[[int, int], None] | None = None,
    on_trial: Callable[[str, Verdict], None] | None = None,
    platform: Platform | None = None,
    peer=None,
) -> AtenMatrix:
    """Aggregate `matrix_path`'s cells per overload, try the rest directly, write `out_path`, and
    return the matrix. `patterns`: only these aten overloads (names.aten_overloads' forms); where
    `out_path` already holds an aten matrix, their nodes replace the same nodes in it and every
    other node stays (`meta.this_run` describes the scoped run; `meta.direct` stays the full run's).
    `platform`: the one the trials run on (None: any, unchecked), which the OpInfo matrix and the
    file kept must record too. `peer`: the peer backend (a peers.Selected, probed) whose matrix it
    aggregates and which the trials run through (None: jaxdev); its nodes have no route (a route is
    jaxdev's dispatcher's). `on_start(aggregated, to_try)` before the trials, `on_trial(name,
    result)` after each."""
    from jaxdev.audit import dispatch

    m = matrix.load(matrix_path)
    record = peer.record if peer is not None else None
    if platform is not None:
        matrix.check_platform(m.measured_on, platform, matrix_path, "aggregating its cells with direct trials here")
    matrix.check_peer(m.peer, record, matrix_path, "aggregating its cells with these direct trials")
    kept = None
    if patterns and os.path.exists(out_path):
        kept = load(out_path)  # before any trial: a file that cannot take the nodes fails at once
        matrix.check_versions(kept.meta.get("versions") or {}, out_path, "a scoped --aten run")
        if platform is not None:
            matrix.check_platform(kept.measured_on, platform, out_path, "a scoped --aten run")
        matrix.check_peer(kept.peer, record, out_path, "a scoped --aten run")
    all_names = _chosen(patterns) if patterns else dispatch.all_op_names("aten")
    reach = reaching(m.ops)
    overloads, todo = _judge(all_names, m.ops, reach, routes=peer is None)
    if on_start:
        on_start(len(all_names) - len(todo), len(todo))
    trials = _Trials(overloads, jobs, timeout, cache_dir, platform, peer)
    direct = trials.run(todo, donors(todo, reach, m.ops), on_trial)
    run = AtenMatrix.of_run(overloads, matrix_path, direct, patterns, platform, record)
    result = run if kept is None else kept.merged(run)
    save(result, out_path)
    return result


@dataclasses.dataclass
class _Trials:
    """How `build` runs its direct trials: into these nodes, with these workers, on this platform."""

    overloads: dict[str, AtenNode]
    jobs: int
    timeout: float | None
    cache_dir: str | None
    platform: Platform | None
    peer: object = None  # a peers.Selected: the trials run through that peer backend

    def run(self, todo: list[str], given: dict, on_trial) -> dict:
        """The direct trials of `todo`, each result taken into its node; returns meta.direct."""
        from jaxdev.audit import schema_samples

        start = time.monotonic()

        def got(name: str, result: Verdict) -> None:
            _take_trial(self.overloads[name], result)
            if on_trial:
                on_trial(name, result)

        timeout = self.timeout or schema_samples.DEFAULT_TIMEOUT_S
        schema_samples.run_trials(
            todo, donors=given, jobs=self.jobs, timeout=timeout, on_result=got, cache_dir=self.cache_dir,
            platform=self.platform, peer=self.peer,
        )  # fmt: skip
        wall = round(time.monotonic() - start, 1)
        return {"tried": len(todo), "jobs": self.jobs, "timeout_s": timeout, "wall_s": wall}


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


def _judge(
    all_names: list[str], ops: dict[str, OpNode], reach: dict[str, list[str]], routes: bool = True
) -> tuple[dict, list[str]]:
    """(overload -> AtenNode from the OpInfo cells or a static verdict, the overloads to try
    directly: their nodes hold the route (jaxdev's, when `routes`) and OpInfos until the trial's
    verdict comes)."""
    from jaxdev.audit import dispatch, names, samples, schema_samples

    db = samples.op_db()
    overloads: dict[str, AtenNode] = {}
    todo: list[str] = []
    for name in all_names:
        reached_by = [op for op in reach.get(name, []) if op in ops]
        b = names.base(name)
        namesakes = [op for op in reached_by if op in db and names.namesake(op, getattr(db[op], "name", op), b)]
        node = from_opinfos(name, ops, reached_by, namesakes) if reached_by else None
        if node is not None and node.verdict == "fails" and not namesakes:
            todo.append(name)  # indirect evidence only: a direct trial decides (see the docstring)
        if node is None:
            static = schema_samples.static_untriable(name)
            if static:
                node = from_trial(Verdict("untriable", static[1], category=static[0]))
            else:
                todo.append(name)
                node = AtenNode("", "")
        if routes:
            st = dispatch.status(name)
            node.route = Route(st.device, st.autograd)
        node.opinfos = reached_by
        overloads[name] = node
    return overloads, todo


def _take_trial(node: AtenNode, result: Verdict) -> None:
    """A direct trial's result into the overload's node (the module docstring's rule)."""
    trial = from_trial(result)
    if node.evidence == "opinfo":  # an indirect failure, tried to see whose it is
        if trial.verdict == "untriable":
            node.reason += f"; a direct trial was not possible ({trial.reason[:120]})"
            return
        trial.reason += f"; its OpInfo cells: {node.reason}"
        if trial.verdict != "fails":
            node.repro = node.category = ""
    for dtype, dirs in trial.cells.items():
        node.cells.setdefault(dtype, {}).update(dirs)
    node.verdict, node.evidence, node.reason = trial.verdict, trial.evidence, trial.reason
    node.category = trial.category or node.category
    node.repro = trial.repro or node.repro
