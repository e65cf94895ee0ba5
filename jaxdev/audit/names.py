"""Op names as people write them, wherever a command takes one: OpInfo names (`add`,
`nn.functional.relu`), aten overloads (`aten::add.Tensor`, `add.Tensor`), aten ops (`aten::add`:
every overload) and globs of either; and near-name suggestions for the names that match nothing.

An aten name selects OpInfos through the index: the `aten:` list a coverage matrix records per
OpInfo (the overloads its samples reached, traced on CPU). Of the OpInfos that reach an overload,
the ones named after it are chosen (`add` for aten::add.Tensor, `nn.functional.relu` for
aten::relu); every OpInfo that reaches it (85 reach aten::add.Tensor, many only in their
backward) when none is, or when asked (`all_reaching`).
"""

from __future__ import annotations

import dataclasses
import difflib
import fnmatch
import functools
import os
import re

from jaxdev.audit import AuditError

INDEX_ENV = "JAXDEV_AUDIT_INDEX"
INDEX_FILES = (os.path.join("coverage", "matrix.yaml"), os.path.join("coverage", "baseline.yaml"))
_GLOB = re.compile(r"[*?\[]")


def is_glob(pattern: str) -> bool:
    return bool(_GLOB.search(pattern))


def base(name: str) -> str:
    """`aten::add.Tensor` -> `add`; `nn.functional.relu` -> `nn.functional.relu` (OpInfo names keep their dots)."""
    return name.split("::", 1)[1].split(".")[0] if "::" in name else name


# ---------------------------------------------------------------------------------------------
# The dispatcher's names (needs torch) and the index (a matrix's aten lists; needs only the file)


def dispatcher_names() -> frozenset[str]:
    """Every operator the dispatcher knows now (not cached: loading plugins or op_db defines more)."""
    import torch

    return frozenset(torch._C._dispatch_get_all_op_names())


def aten_overloads(pattern: str, names=None) -> list[str]:
    """The dispatcher overloads `pattern` names: an overload (`add.Tensor`, `aten::abs.default`),
    an op (`aten::add`, `sin`: all its overloads), or a glob on the name without namespace or on the
    op without overload (aten), or on the full name when it has a namespace (`prims::*`)."""
    names = dispatcher_names() if names is None else names
    if is_glob(pattern):
        p = pattern.lower()
        hits = []
        for n in names:
            low = n.lower()
            if "::" in p:
                forms = (low, low.split(".")[0])
            elif low.startswith("aten::"):
                short = low.split("::", 1)[1]
                forms = (short, short.split(".")[0])
            else:
                continue
            if any(fnmatch.fnmatchcase(f, p) for f in forms):
                hits.append(n)
        return sorted(hits)
    q = pattern if "::" in pattern else f"aten::{pattern}"
    if q.endswith(".default"):
        q = q.removesuffix(".default")
        return [q] if q in names else []
    if "." in q.split("::", 1)[1]:
        return [q] if q in names else []
    return sorted(n for n in names if n.split(".")[0] == q)


def index_path() -> str | None:
    """Where the OpInfo -> aten index is read: $JAXDEV_AUDIT_INDEX, else coverage/matrix.yaml (then
    baseline.yaml) in the working directory, else the committed one beside the jaxdev package."""
    env = os.environ.get(INDEX_ENV)
    if env:
        return env
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    for folder in (os.getcwd(), root):
        for f in INDEX_FILES:
            path = os.path.join(folder, f)
            if os.path.exists(path):
                return path
    return None


@functools.cache
def _read_index(path: str, mtime: float) -> dict[str, frozenset[str]]:
    """OpInfo -> the aten overloads its samples reached, read from a matrix's `aten:` lists (a scan
    of the canonical layout matrix.save writes: ~100x faster than parsing the ~77k lines)."""
    from jaxdev.audit import lookup

    body = lookup.text(path)
    return {op: frozenset(lookup.items(body[s:e], "aten")) for op, (s, e) in lookup.entries(path, "ops").items()}


def load_index(path: str | None = None) -> dict[str, frozenset[str]]:
    """OpInfo -> reached aten overloads from `path` (default: index_path()); {} when there is none."""
    path = path or index_path()
    if not path or not os.path.exists(path):
        return {}
    return _read_index(path, os.path.getmtime(path))


# ---------------------------------------------------------------------------------------------
# Selecting OpInfos


@dataclasses.dataclass(frozen=True)
class Selection:
    """What one name given on the command line selected."""

    pattern: str
    opinfos: tuple[str, ...]
    overloads: tuple[str, ...] = ()  # the aten overloads an aten name named (empty for OpInfo names)
    reaching: tuple[str, ...] = ()  # every OpInfo whose samples reach them (per the index)
    by_name: bool = False  # no index to read: OpInfos chosen by their names alone

    @property
    def is_aten(self) -> bool:
        return bool(self.overloads)

    def describe(self) -> str:
        """'add.Tensor = aten::add.Tensor: OpInfo add (84 more reach it; --all-reaching runs them)'."""
        if not self.is_aten:
            return f"{self.pattern}: OpInfo{'s' if len(self.opinfos) > 1 else ''} {', '.join(self.opinfos)}"
        ops = {o.split(".")[0] for o in self.overloads}
        n = len(self.overloads)
        target = self.overloads[0] if n == 1 else f"{ops.pop()} ({n} overloads)" if len(ops) == 1 else f"{n} overloads"
        label = target if target.startswith(self.pattern) else f"{self.pattern} = {target}"
        chosen = ", ".join(self.opinfos)
        others = len(set(self.reaching) - set(self.opinfos))
        more = f" ({others} more reach it; --all-reaching runs them)" if others else ""
        if self.by_name:
            more = " (chosen by name: no coverage matrix to tell which OpInfos reach it)"
        return f"{label}: OpInfo{'s' if len(self.opinfos) > 1 else ''} {chosen}{more}"


def _norm(word: str) -> str:
    return word.strip("_")


def namesake(opinfo: str, op_name: str, aten_base: str) -> bool:
    """Is the OpInfo named after the aten op? Its op name (variant left off) with dots as underscores
    (`linalg.vector_norm` ~ linalg_vector_norm) or its last part (`nn.functional.relu` ~ relu);
    leading/trailing underscores ignored (`_softmax`, `index_put_`)."""
    want = _norm(aten_base)
    return want in (_norm(op_name.replace(".", "_")), _norm(op_name.split(".")[-1]))


def resolve(
    patterns,
    db: dict[str, object],
    *,
    all_reaching: bool = False,
    index: dict[str, frozenset[str]] | None = None,
) -> list[Selection]:
    """One Selection per pattern; a pattern that selects nothing is an AuditError with near names.
    `db`: OpInfo name -> OpInfo (samples.op_db()); `index`: OpInfo -> aten (default load_index())."""
    names = sorted(db)
    out = []
    for p in patterns:
        if p in db:
            out.append(Selection(p, (p,)))
            continue
        if is_glob(p) and "::" not in p:
            hit = [n for n in names if fnmatch.fnmatchcase(n, p)]
            if hit:
                out.append(Selection(p, tuple(hit)))
                continue
        overloads = aten_overloads(p)
        if not overloads:
            raise AuditError(f"no OpInfo or aten operator named {p!r}{hint(p, _candidates(names))}")
        idx = load_index() if index is None else index
        wanted = set(overloads)
        reaching = tuple(n for n in names if idx.get(n, frozenset()) & wanted)
        bases = {base(o) for o in overloads}
        named = tuple(n for n in reaching if any(namesake(n, getattr(db[n], "name", n), b) for b in bases))
        chosen = reaching if all_reaching or not named else named
        also = [n for n in names if any(namesake(n, getattr(db[n], "name", n), b) for b in bases)]
        if not idx and also:  # no coverage matrix to read: the OpInfos named after it, by name alone
            out.append(Selection(p, tuple(also), tuple(overloads), (), by_name=True))
            continue
        if not chosen:
            where = (
                (index_path() or f"no index: no coverage/matrix.yaml, no ${INDEX_ENV}")
                if index is None
                else "the index"
            )
            maybe = f"; OpInfos named like it: {', '.join(also[:5])}" if also else ""
            ops = {o.split(".")[0] for o in overloads}
            target = overloads[0] if len(overloads) == 1 else ops.pop() if len(ops) == 1 else p
            raise AuditError(f"no OpInfo sample reaches {target} (per {where}){maybe}")
        out.append(Selection(p, chosen, tuple(overloads), reaching))
    return out


def opinfos(selections: list[Selection]) -> list[str]:
    return sorted({n for s in selections for n in s.opinfos})


# ---------------------------------------------------------------------------------------------
# Near names


def _candidates(opinfo_names) -> list[str]:
    """OpInfo names and the aten names (op and overload, namespace left off)."""
    return sorted(set(opinfo_names) | short_names(dispatcher_names()))


def short_names(operators) -> set[str]:
    """Aten operator names as people write them: overloads and ops without the namespace."""
    aten = {n.split("::", 1)[1] for n in operators if n.startswith("aten::")}
    return aten | {a.split(".")[0] for a in aten}


def nearest(name: str, candidates, n: int = 5, cutoff: float = 0.6) -> list[str]:
    """Names of the same base when there are any (`add.Tensor`, `add` for `add.Tensr`: the op is
    right, the overload is not), else by difflib's similarity ratio (`add` for `ad`, at least
    `cutoff`); the most similar first, shorter names first among equals."""
    short = name.split("::", 1)[-1]
    low = short.lower()
    want = low.split(".")[0]
    scored = []
    matcher = difflib.SequenceMatcher(b=low, autojunk=False)
    for c in set(candidates):
        cl = c.lower()
        same = cl.split(".")[0] == want or cl.split(".")[-1] == want
        matcher.set_seq1(cl)
        if not same and (matcher.real_quick_ratio() < cutoff or matcher.quick_ratio() < cutoff):
            continue
        ratio = matcher.ratio()
        if same or ratio >= cutoff:
            scored.append((0 if same else 1, -ratio, len(c), c))
    best = sorted(scored)
    if best and best[0][0] == 0:
        best = [s for s in best if s[0] == 0]
    return [c for *_, c in best[:n]]


def hint(name: str, candidates) -> str:
    near = nearest(name, candidates)
    return f"; nearest: {', '.join(near)}" if near else ""


def overloads_named(patterns, db_loader, known=None) -> tuple[list[str], list[str]]:
    """(aten overloads, notes) for `jaxdev ops` PATTERNS: aten names and globs, and OpInfo names
    or globs (the overloads their samples reach, per the index). `db_loader()` gives the OpInfo
    names (op_db, or the index's), loaded only when a pattern is no aten name; `known`: the
    operator names to match (default: the dispatcher's now)."""
    found: set[str] = set()
    notes = []
    for p in patterns:
        hits = aten_overloads(p, known)
        if not hits:
            db = db_loader()
            ops = [n for n in sorted(db) if n == p or fnmatch.fnmatchcase(n, p)]
            if not ops:
                pool = _candidates(db) if known is None else short_names(known) | set(db)
                raise AuditError(f"no aten operator or OpInfo named {p!r}{hint(p, pool)}")
            idx = load_index()
            hits = sorted(set().union(*(idx.get(n, frozenset()) for n in ops)))
            if not hits:
                raise AuditError(f"the index ({index_path()}) records no aten overloads reached by OpInfo {p!r}")
            notes.append(f"{p} (OpInfo{'s' if len(ops) > 1 else ''} {', '.join(ops)}) reaches {len(hits)} overloads")
        found.update(hits)
    return sorted(found), notes
