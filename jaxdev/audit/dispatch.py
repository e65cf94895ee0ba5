"""How each operator reaches the `jax` device, read from PyTorch's dispatcher tables.

The dispatcher's computed table (`_dispatch_dump_table`) says which kernel runs for a dispatch key
and why: `[kernel]` (registered for that key), `[math kernel]` (CompositeImplicitAutograd),
`[default backend kernel]` (CompositeExplicitAutograd[NonFunctional]), `[autograd kernel]`,
`[backend fallback]`. We map these to statuses a kernel author can act on.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import re

import torch

import jaxdev  # noqa: F401  (registers the device, its kernels and its fallback)
from jaxdev.audit.facts import AUTOGRAD_STATUSES, DEVICE_STATUSES
from jaxdev.audit.schemas import overload
from jaxdev.ops import registry

_LINE = re.compile(
    r"^(?P<key>\w+): (?P<fallthrough>fallthrough )?registered at (?P<where>.*?) \[(?P<kind>[^\]]+)\]\s*$", re.M
)


@dataclasses.dataclass(frozen=True)
class Entry:
    """One dispatch table slot: the kind of kernel and where it was registered."""

    kind: str  # "kernel", "math kernel", "default backend kernel", "autograd kernel", "backend fallback"
    where: str  # file:line

    def __str__(self) -> str:
        return f"{self.kind} ({self.where})"


@dataclasses.dataclass(frozen=True)
class OpStatus:
    name: str  # "aten::add.Tensor"
    device: str  # one of DEVICE_STATUSES
    autograd: str  # one of AUTOGRAD_STATUSES
    device_entry: Entry | None
    autograd_entry: Entry | None
    tags: tuple[str, ...]

    def as_dict(self) -> dict:
        return {
            "name": self.name,
            "device": self.device,
            "autograd": self.autograd,
            "device_kernel": str(self.device_entry) if self.device_entry else None,
            "autograd_kernel": str(self.autograd_entry) if self.autograd_entry else None,
            "tags": list(self.tags),
        }


def all_op_names(namespace: str | None = "aten") -> list[str]:
    names = torch._C._dispatch_get_all_op_names()
    if namespace:
        names = [n for n in names if n.startswith(namespace + "::")]
    return sorted(names)


def table(name: str) -> dict[str, Entry]:
    """The computed dispatch table of `name`: dispatch key -> Entry."""
    return {m["key"]: Entry(m["kind"], m["where"]) for m in _LINE.finditer(torch._C._dispatch_dump_table(name))}


def tags(name: str) -> tuple[str, ...]:
    op = overload(name)
    if op is None:
        return ()
    return tuple(sorted(str(t).split(".")[-1] for t in op.tags))


def returns_view(name: str) -> bool:
    op = overload(name)
    return op is not None and any(r.alias_info is not None and not r.alias_info.is_write for r in op._schema.returns)


def status(name: str) -> OpStatus:
    t = table(name)
    dev, ag = t.get("PrivateUse1"), t.get("AutogradPrivateUse1")
    return OpStatus(name, _device_status(name, dev), _autograd_status(ag), dev, ag, tags(name))


def _device_status(name: str, entry: Entry | None) -> str:
    if entry is None:
        return "missing"
    if entry.kind == "kernel":
        # jaxdev's own kernels are "native"; a kernel some other library registered for every
        # backend is generic code, like a composite.
        return "native" if name in registry.KERNELS or "/jaxdev/" in entry.where else "composite"
    if entry.kind == "math kernel":
        return "decomposed"
    if entry.kind == "default backend kernel":
        return "composite"
    if entry.kind == "backend fallback":
        # jaxdev's fallback refuses ops that return views: emulating them on CPU breaks the alias.
        return "missing" if returns_view(name) else "fallback"
    return "missing"


def _autograd_status(entry: Entry | None) -> str:
    if entry is None:
        return "missing"
    return {"autograd kernel": "autograd", "math kernel": "math", "kernel": "autograd", "backend fallback": "lost"}.get(
        entry.kind, "missing"
    )


def matches(name: str, patterns: list[str]) -> bool:
    """Glob match on the full name, on the name without namespace, and on the op without overload."""
    if not patterns:
        return True
    short = name.split("::", 1)[-1]
    base = short.split(".")[0]
    for p in patterns:
        p = p.lower()
        for candidate in (name.lower(), short.lower(), base.lower()):
            if fnmatch.fnmatchcase(candidate, p):
                return True
    return False


def query(patterns=(), tags_any=(), statuses=(), namespace="aten", names=None) -> list[OpStatus]:
    """Every overload matching the patterns (or among `names`, exact overload names), with at
    least one of `tags_any` and a status in `statuses` (matched against both the device and the
    autograd status)."""
    out = []
    if names is not None:
        candidates = sorted(set(names))
    else:
        candidates = all_op_names(namespace if not any("::" in p for p in patterns) else None)
    for name in candidates:
        if names is None and not matches(name, list(patterns)):
            continue
        s = status(name)
        if tags_any and not any(_tag_matches(t, s.tags) for t in tags_any):
            continue
        if statuses and s.device not in statuses and s.autograd not in statuses:
            continue
        out.append(s)
    return out


def _tag_matches(wanted: str, have: tuple[str, ...]) -> bool:
    # "view" matches view_copy, inplace_view, ...
    return any(wanted == t or wanted in t.split("_") for t in have)


def counts(rows: list[OpStatus]) -> dict[str, dict[str, int]]:
    dev = {s: 0 for s in DEVICE_STATUSES}
    ag = {s: 0 for s in AUTOGRAD_STATUSES}
    for r in rows:
        dev[r.device] += 1
        ag[r.autograd] += 1
    return {"device": dev, "autograd": ag}
