"""The coverage matrix: OpInfo x dtype x direction -> status, as canonical YAML.

Layout (keys sorted, so diffs stay small):

    schema: 1
    versions: {torch, jax, jaxdev, python}
    platform: {name, device_kind}       # where the jax cells ran (model.Platform; absent: cpu)
    peer: {name, version, how}          # a peer backend's matrix (model.Peer; absent: jaxdev's)
    run: {complete, max_samples, timeout_s, wall_s, samples, shard, ...}
    summary: {forward: {status: count}, backward: {...}, compile: {...}}
    shares: {forward: {measured, pass, fallback}, ...}   # fractions of measured cells (facts.shares)
    ops:
      sin:
        aten: [aten::sin, ...]            # overloads the OpInfo reached (CPU trace)
        results:
          float32:
            forward: {status, reason, samples, counts, fallback, repro, ...}   # a model.Cell

Written atomically: a temporary file in the same folder, then os.replace.
"""

from __future__ import annotations

import dataclasses
import os
import platform
import tempfile
from collections.abc import Iterator
from typing import NamedTuple

import yaml

from jaxdev.audit import AuditError
from jaxdev.audit.facts import DIRECTIONS, SEVERITY, shares
from jaxdev.audit.model import CPU, Cell, OpNode, Peer, Platform, RunFacts, ThisRun

# libyaml when PyYAML has it: the same text, ~3x faster (a full matrix is ~100k lines, saved often).
_DUMPER = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

SCHEMA = 1


def versions() -> dict[str, str]:
    import jax
    import torch

    import jaxdev

    return {
        "torch": str(torch.__version__),
        "jax": str(jax.__version__),
        "jaxdev": str(jaxdev.__version__),
        "python": platform.python_version(),
    }


class Placed(NamedTuple):
    """A cell with where it sits in the matrix."""

    op: str
    dtype: str
    direction: str
    cell: Cell


@dataclasses.dataclass
class Matrix:
    """OpInfo x dtype x direction -> Cell, with the run's facts, the versions that made it, the
    platform it ran on (None: not recorded, i.e. CPU; see `measured_on`) and the peer backend its
    cells measured (None: jaxdev)."""

    versions: dict = dataclasses.field(default_factory=versions)
    run: RunFacts = dataclasses.field(default_factory=RunFacts)
    ops: dict[str, OpNode] = dataclasses.field(default_factory=dict)
    platform: Platform | None = None
    peer: Peer | None = None

    def put(self, op: str, dtype: str, direction: str, cell: Cell, aten=()) -> None:
        node = self.ops.setdefault(op, OpNode())
        node.aten = sorted(set(node.aten) | set(aten))
        node.results.setdefault(dtype, {})[direction] = cell

    def get(self, op: str, dtype: str, direction: str) -> Cell | None:
        node = self.ops.get(op)
        return node.results.get(dtype, {}).get(direction) if node else None

    def aten(self, op: str) -> list[str]:
        """The aten overloads the OpInfo's samples reached."""
        node = self.ops.get(op)
        return node.aten if node else []

    @property
    def measured_on(self) -> Platform:
        return self.platform or CPU

    def cells(self) -> Iterator[Placed]:
        """Every cell, sorted by op, dtype, then direction."""
        for op in sorted(self.ops):
            results = self.ops[op].results
            for dtype in sorted(results):
                for direction in DIRECTIONS:
                    if direction in results[dtype]:
                        yield Placed(op, dtype, direction, results[dtype][direction])

    @property
    def summary(self) -> dict[str, dict[str, int]]:
        """direction -> status -> cells."""
        summary: dict[str, dict[str, int]] = {d: {} for d in DIRECTIONS}
        for placed in self.cells():
            counts = summary[placed.direction]
            counts[placed.cell.status] = counts.get(placed.cell.status, 0) + 1
        return summary

    @property
    def shares(self) -> dict[str, dict]:
        """direction -> {measured, pass, fallback}: unsupported and skipped cells are not measured."""
        return {d: shares(counts) for d, counts in self.summary.items() if counts}

    def keep_others(self, old: Matrix, replaced: set[tuple[str, str]]) -> None:
        """Copy in the cells of `old` whose (direction, dtype) is not in `replaced`: what a full run
        replaces is every slice it runs (all of forward; compile in float32 only, unless it ran more),
        so the compiled directions' other dtypes, measured by scoped runs, stay."""
        for placed in old.cells():
            if (placed.direction, placed.dtype) not in replaced:
                self.put(*placed, old.aten(placed.op))

    def to_yaml(self) -> dict:
        doc = {
            "schema": SCHEMA,
            "versions": self.versions,
            "run": self.run.to_yaml(),
            "summary": self.summary,
            "shares": self.shares,
            "ops": {op: node.to_yaml() for op, node in self.ops.items()},
        }
        if self.platform is not None:
            doc["platform"] = self.platform.to_yaml()
        if self.peer is not None:
            doc["peer"] = self.peer.to_yaml()
        return doc


def empty(run: dict | RunFacts | None = None) -> Matrix:
    """A matrix with no cells; `run`: its facts (a RunFacts, or their YAML mapping)."""
    return Matrix(run=run if isinstance(run, RunFacts) else RunFacts.from_yaml(run))


def save(matrix: Matrix, path: str) -> None:
    write_yaml(matrix.to_yaml(), path, prefix=".matrix-")


def write_yaml(doc: dict, path: str, *, prefix: str) -> None:
    """`doc` to `path` atomically (a temporary file in the same folder, synced, then renamed)."""
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=prefix, suffix=".yaml.tmp", dir=folder)
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes 0600; a matrix is an ordinary, shareable file
    try:
        with os.fdopen(fd, "w") as f:
            yaml.dump(
                doc,
                f,
                Dumper=_DUMPER,
                sort_keys=True,
                default_flow_style=False,
                width=120,
                allow_unicode=True,
            )
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def read_yaml(path: str, missing: str):
    """The YAML document at `path`; a missing, unreadable or invalid file is one AuditError sentence
    (`missing` is the one for a file that is not there)."""
    if not os.path.exists(path):
        raise AuditError(missing)
    try:
        with open(path) as f:
            return yaml.load(f, Loader=_LOADER)
    except (yaml.YAMLError, UnicodeDecodeError) as e:
        raise AuditError(f"{path} is not valid YAML ({type(e).__name__})") from e
    except OSError as e:
        raise AuditError(f"cannot read {path}: {e.strerror}") from e


def load(path: str) -> Matrix:
    """A matrix from disk, validated; any problem is one AuditError sentence."""
    data = read_yaml(path, f"no coverage matrix at {path}; run `jaxdev coverage --out DIR` first")
    if not isinstance(data, dict) or "schema" not in data:
        raise AuditError(f"{path} is not a jaxdev coverage matrix (no schema field)")
    if data["schema"] != SCHEMA:
        raise AuditError(f"{path} has schema version {data['schema']!r}, this jaxdev reads version {SCHEMA}")
    if not isinstance(data.get("ops"), dict):
        raise AuditError(f"{path} is malformed: `ops` must be a mapping")
    for op, node in data["ops"].items():
        results = node.get("results") if isinstance(node, dict) else None
        if not isinstance(results, dict):
            raise AuditError(f"{path} is malformed: op {op!r} has no results mapping")
        for dtype, dirs in results.items():
            for direction, entry in (dirs or {}).items():
                if direction not in DIRECTIONS or not isinstance(entry, dict) or entry.get("status") not in SEVERITY:
                    raise AuditError(f"{path} is malformed: bad entry at {op} / {dtype} / {direction}")
    ops = {op: OpNode.from_yaml(node) for op, node in data["ops"].items()}
    platform = Platform.from_yaml(data.get("platform"))
    run = RunFacts.from_yaml(data.get("run") if isinstance(data.get("run"), dict) else None)
    peer = Peer.from_yaml(data.get("peer"))
    return Matrix(versions=data.get("versions") or {}, run=run, ops=ops, platform=platform, peer=peer)


def check_versions(recorded: dict, path: str, how: str = "a scoped run", now: dict | None = None) -> None:
    """New cells may join a matrix only when measured with its torch and jax (`now`, default this
    process's): the file states one version for all its cells."""
    now = now or versions()
    for key in ("torch", "jax"):
        if recorded.get(key) and now.get(key) and recorded[key] != now[key]:
            raise AuditError(
                f"{path} was measured with {key} {recorded[key]} and this is {key} {now[key]}; {how} would mix "
                "the two in one file: run the full sweep, or write elsewhere with --out DIR"
            )


def check_platform(recorded: Platform, now: Platform, path: str, how: str = "a scoped run") -> None:
    """Cells measured on one platform never join a file of another (platforms.folder gives each its
    own): one sentence when `recorded` (the file's) is not `now`."""
    if recorded != now:
        raise AuditError(
            f"{path} was measured on {recorded.label} ({recorded.name}) and this is {now.label} ({now.name}); "
            f"{how} would mix the two in one file: write elsewhere with --out DIR"
        )


def check_peer(recorded: Peer | None, now: Peer | None, path: str, how: str = "a scoped run") -> None:
    """A peer backend's cells never join jaxdev's file, another peer's, or another version's
    (peers.folder gives each its own): one sentence when `recorded` (the file's) is not `now`."""
    if (recorded is None and now is None) or (now is not None and now.same(recorded)):
        return
    was, this = (p.label if p else "jaxdev" for p in (recorded, now))
    raise AuditError(
        f"{path} holds cells of {was} and this run measures {this}; {how} would mix the two in one file: "
        "write elsewhere with --out DIR"
    )


def inputs(m: Matrix) -> str:
    """Which of the OpInfos' inputs the matrix's cells ran (facts.INPUTS): `run.inputs`, sample when absent."""
    return m.run.inputs or "sample"


def check_inputs(m: Matrix, wanted: str, path: str) -> None:
    """Sample-input and reference-input cells never share a file (each has its own, facts.MATRIX_FILE
    and facts.REFERENCE_MATRIX_FILE): one sentence when `m` holds the other kind."""
    if inputs(m) != wanted:
        raise AuditError(
            f"{path} holds cells run on {inputs(m)} inputs, not {wanted} inputs; the two never share a file"
            " (--reference-inputs writes reference_matrix.yaml)"
        )


def cell_count(m: Matrix) -> int:
    return sum(len(dirs) for node in m.ops.values() for dirs in node.results.values())


def recount_samples(m: Matrix) -> None:
    """run.samples from the cells, for a file whose cells come from more than one run."""
    m.run.samples = sum(placed.cell.samples for placed in m.cells())


def full_sweep(matrices: list[Matrix]) -> bool:
    """Do these matrices make one full sweep: complete, run without a scope, and either unsharded
    or together every shard K/N of one N?"""
    if not matrices or any(not m.run.complete or m.run.scope for m in matrices):
        return False
    shards = [m.run.shard for m in matrices]
    if not any(shards):
        return True
    if not all(shards):
        return False
    parts = {tuple(int(x) for x in s.split("/")) for s in shards}
    n = {total for _, total in parts}
    return len(n) == 1 and {k for k, _ in parts} == set(range(1, n.pop() + 1))


def combine(matrices: list[Matrix], existing: Matrix | None, path: str) -> Matrix:
    """`coverage --merge`: `matrices` into the matrix at `path` (`existing`; None when there is none).
    A full sweep's matrices (full_sweep) replace the (direction, dtype) slices they hold, as a full run does;
    anything less is merged over `existing`, whose other cells stay."""
    merged = merge(matrices)
    if existing is None:
        return merged
    check_inputs(existing, inputs(merged), path)
    check_platform(existing.measured_on, merged.measured_on, path, "merging these matrices")
    check_peer(existing.peer, merged.peer, path, "merging these matrices")
    if full_sweep(matrices):
        merged.keep_others(existing, {(c.direction, c.dtype) for c in merged.cells()})
        return merged
    for m in matrices:
        check_versions(existing.versions, path, "merging these matrices", now=m.versions)
    for placed in merged.cells():
        existing.put(*placed, merged.aten(placed.op))
    existing.platform = existing.platform or merged.platform
    recount_samples(existing)
    existing.run.this_run = ThisRun(merged=len(matrices), cells=cell_count(merged))
    return existing


def merge(matrices: list[Matrix]) -> Matrix:
    """Shards -> one matrix; later matrices win where cells overlap."""
    kinds = {inputs(m) for m in matrices}
    if len(kinds) > 1:
        raise AuditError("these matrices mix sample-input and reference-input cells; merge each kind on its own")
    places = sorted({m.measured_on for m in matrices})
    if len(places) > 1:
        labels = ", ".join(p.label for p in places)
        raise AuditError(
            f"these matrices were measured on different platforms ({labels}); merge each platform's on its own"
        )
    backends = {(m.peer.name, m.peer.version) if m.peer else ("jaxdev", "") for m in matrices}
    if len(backends) > 1:
        labels = ", ".join(" ".join(b).strip() for b in sorted(backends))
        raise AuditError(f"these matrices measured different backends ({labels}); merge each backend's on its own")
    out = empty(RunFacts(complete=all(bool(m.run.complete) for m in matrices), merged=len(matrices)))
    out.platform = next((m.platform for m in matrices if m.platform is not None), None)
    out.peer = next((m.peer for m in matrices if m.peer is not None), None)
    if kinds != {"sample"}:
        out.run.inputs = kinds.pop()
    for m in matrices:
        for placed in m.cells():
            out.put(*placed, m.aten(placed.op))
    for key in ("max_samples", "timeout_s"):
        values = {getattr(m.run, key) for m in matrices}
        if len(values) == 1:
            setattr(out.run, key, values.pop())
    out.run.samples = sum(m.run.samples or 0 for m in matrices)
    return out


def headline(m: Matrix, source: str) -> str:
    v, run = m.versions, m.run
    wall = f", {run.wall_s} s" if run.wall_s is not None else ""  # merged shards have no one wall time
    kind = "samples" if inputs(m) == "sample" else f"{inputs(m)} inputs"
    where = f", on {m.platform.label}" if m.platform is not None else ""  # files before platforms: no word
    of = f", cells of {m.peer.label} (not jaxdev's)" if m.peer is not None else ""
    return (
        f"Matrix `{source}`: torch {v.get('torch')}, jax {v.get('jax')}, jaxdev {v.get('jaxdev')}{where}{of}; "
        f"{len(m.ops)} OpInfos, {_or_unknown(run.samples)} {kind} (at most {_or_unknown(run.max_samples)} per cell), "
        f"{'complete' if run.complete else 'PARTIAL'} run{wall}."
    )


def _or_unknown(value) -> str:
    return "?" if value is None else str(value)
