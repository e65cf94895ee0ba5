"""The coverage matrix: OpInfo x dtype x direction -> status, as canonical YAML.

Layout (keys sorted, so diffs stay small):

    schema: 1
    versions: {torch, jax, jaxdev, python}
    run: {complete, max_samples, timeout_s, wall_s, samples, shard, ...}
    summary: {forward: {status: count}, backward: {...}, compile: {...}}
    ops:
      sin:
        aten: [aten::sin, ...]            # overloads the OpInfo reached (CPU trace)
        results:
          float32:
            forward: {status, reason, samples, of, counts, fallback, repro, ...}

Written atomically: a temporary file in the same folder, then os.replace.
"""

from __future__ import annotations

import os
import platform
import tempfile

import yaml

from jaxdev.audit import AuditError
from jaxdev.audit.facts import DIRECTIONS, SEVERITY

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


def empty(run: dict | None = None) -> dict:
    return {"schema": SCHEMA, "versions": versions(), "run": dict(run or {}), "summary": {}, "ops": {}}


def put(matrix: dict, op: str, dtype: str, direction: str, entry: dict, aten=()) -> None:
    node = matrix["ops"].setdefault(op, {"aten": [], "results": {}})
    node["aten"] = sorted(set(node["aten"]) | set(aten))
    node["results"].setdefault(dtype, {})[direction] = entry


def get(matrix: dict, op: str, dtype: str, direction: str) -> dict | None:
    return matrix["ops"].get(op, {}).get("results", {}).get(dtype, {}).get(direction)


def cells(matrix: dict):
    """(op, dtype, direction, entry) for every cell, sorted."""
    for op in sorted(matrix["ops"]):
        results = matrix["ops"][op].get("results", {})
        for dtype in sorted(results):
            for direction in DIRECTIONS:
                if direction in results[dtype]:
                    yield op, dtype, direction, results[dtype][direction]


def keep_directions(m: dict, old: dict, replaced: set[str]) -> None:
    """Copy into `m` the cells of `old` whose direction is not in `replaced`."""
    for op, dtype, direction, entry in cells(old):
        if direction not in replaced:
            put(m, op, dtype, direction, entry, old["ops"][op].get("aten", ()))


def summarize(matrix: dict) -> dict:
    summary = {d: {} for d in DIRECTIONS}
    for _, _, direction, entry in cells(matrix):
        summary[direction][entry["status"]] = summary[direction].get(entry["status"], 0) + 1
    matrix["summary"] = summary
    return summary


def save(matrix: dict, path: str) -> None:
    summarize(matrix)
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".matrix-", suffix=".yaml.tmp", dir=folder)
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes 0600; a matrix is an ordinary, shareable file
    try:
        with os.fdopen(fd, "w") as f:
            yaml.dump(
                matrix, f, Dumper=_DUMPER, sort_keys=True, default_flow_style=False, width=120, allow_unicode=True
            )
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def load(path: str) -> dict:
    """A matrix from disk, validated; any problem is one AuditError sentence."""
    if not os.path.exists(path):
        raise AuditError(f"no coverage matrix at {path}; run `jaxdev coverage --out DIR` first")
    try:
        with open(path) as f:
            data = yaml.load(f, Loader=_LOADER)
    except (yaml.YAMLError, UnicodeDecodeError) as e:
        raise AuditError(f"{path} is not valid YAML ({type(e).__name__})") from e
    except OSError as e:
        raise AuditError(f"cannot read {path}: {e.strerror}") from e
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
    data.setdefault("run", {})
    data.setdefault("versions", {})
    return data


def merge(matrices: list[dict]) -> dict:
    """Shards -> one matrix; later matrices win where cells overlap."""
    out = empty({"complete": all(m["run"].get("complete", False) for m in matrices), "merged": len(matrices)})
    for m in matrices:
        for op, dtype, direction, entry in cells(m):
            put(out, op, dtype, direction, entry, m["ops"][op].get("aten", ()))
    for key in ("max_samples", "timeout_s"):
        values = {m["run"].get(key) for m in matrices}
        if len(values) == 1:
            out["run"][key] = values.pop()
    out["run"]["samples"] = sum(m["run"].get("samples", 0) for m in matrices)
    summarize(out)
    return out
