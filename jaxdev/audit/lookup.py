"""Fast reads of the committed YAML (coverage/matrix.yaml, coverage/aten.yaml) for the commands that
answer from it (`explain`, `ops`): one entry at a time, without parsing the whole file.

Parsing a whole file takes seconds (matrix.yaml is ~77k lines, 2.6 s with libyaml here; aten.yaml
~52k lines, 1.9 s), while a question is about one op. matrix.save and aten_matrix.save write a
canonical layout (keys sorted, block style, two spaces an indent level), so a section's entries
are the lines `  KEY:` under their top-level key; an entry is found by a scan of the text and only
its own lines are parsed. A file in another layout (edited by hand) falls back to a whole parse.
Imports neither torch nor jax.
"""

from __future__ import annotations

import functools
import os
import re

import yaml

from jaxdev.audit import AuditError
from jaxdev.audit.model import AtenNode, OpNode

_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_KEY = re.compile(r"^  (?! )(?P<key>[^\n]+):$", re.M)


@functools.cache
def _text(path: str, mtime: float) -> str:
    try:
        with open(path) as f:
            return f.read()
    except (OSError, UnicodeDecodeError) as e:
        raise AuditError(f"cannot read {path}: {getattr(e, 'strerror', None) or e}") from e


def text(path: str) -> str:
    return _text(path, os.path.getmtime(path))


def _key(raw: str) -> str:
    # The dumper quotes only keys YAML would read as something else; plain ones are the string itself.
    return str(yaml.load(raw, Loader=_LOADER)) if raw[:1] in "'\"" else raw


@functools.cache
def _entries(path: str, mtime: float, section: str) -> dict[str, tuple[int, int]]:
    body = text(path)
    if body.startswith(f"{section}:\n"):
        head = 0
    else:
        head = body.find(f"\n{section}:\n") + 1
        if head == 0:
            return {}
    start = head + len(section) + 2
    end = re.compile(r"^\S", re.M).search(body, start)
    stop = end.start() if end else len(body)
    keys = [(m.start(), _key(m["key"])) for m in _KEY.finditer(body, start, stop)]
    return {k: (s, keys[i + 1][0] if i + 1 < len(keys) else stop) for i, (s, k) in enumerate(keys)}


def entries(path: str, section: str) -> dict[str, tuple[int, int]]:
    """KEY -> (start, end) offsets of its lines, for every entry of the top-level `section`."""
    return _entries(path, os.path.getmtime(path), section)


def entry(path: str, section: str, key: str):
    """The parsed value of `section[key]`, or None when the section has no such key."""
    span = entries(path, section).get(key)
    if span is None:
        return None
    try:
        parsed = yaml.load(text(path)[span[0] : span[1]], Loader=_LOADER)
        return parsed[key]
    except (yaml.YAMLError, KeyError, TypeError):
        return _whole(path).get(section, {}).get(key)  # not the canonical layout: parse it all


def op_node(path: str, opinfo: str) -> OpNode | None:
    """An OpInfo's node in a coverage matrix (its `aten:` list and cells), or None."""
    node = entry(path, "ops", opinfo)
    return OpNode.from_yaml(node) if isinstance(node, dict) else None


def aten_node(path: str, overload: str) -> AtenNode | None:
    """An overload's node in an aten matrix, or None."""
    node = entry(path, "overloads", overload)
    return AtenNode.from_yaml(node) if isinstance(node, dict) else None


@functools.cache
def _whole_at(path: str, mtime: float) -> dict:
    doc = yaml.load(text(path), Loader=_LOADER)
    return doc if isinstance(doc, dict) else {}


def _whole(path: str) -> dict:
    return _whole_at(path, os.path.getmtime(path))


def field(block: str, name: str, indent: int = 4) -> str | None:
    """A plain scalar field of an entry's lines (`    verdict: pass` -> 'pass'), or None."""
    at = block.find(f"\n{' ' * indent}{name}: ")
    if at < 0:
        return None
    line = block[at + indent + len(name) + 3 : block.find("\n", at + 1)]
    return line.strip().strip("'\"")


def items(block: str, name: str, indent: int = 4) -> list[str]:
    """A list field of an entry's lines (`    aten:` then `    - aten::sin`), [] when absent."""
    at = block.find(f"\n{' ' * indent}{name}:\n")
    if at < 0:
        return []
    out = []
    prefix = " " * indent + "- "
    for line in block[at + indent + len(name) + 3 :].split("\n"):
        if not line.startswith(prefix):
            break
        out.append(_key(line[len(prefix) :]))
    return out


def aten_routes(path: str) -> dict[str, tuple[str, str, str]]:
    """overload -> (PrivateUse1 status, AutogradPrivateUse1 status, verdict) for every overload of an
    aten matrix, read from each entry's `route:` and `verdict:` lines."""
    body = text(path)
    out = {}
    for name, (start, end) in entries(path, "overloads").items():
        block = body[start:end]
        device, autograd = field(block, "PrivateUse1", 6), field(block, "AutogradPrivateUse1", 6)
        if device is None or autograd is None:
            node = entry(path, "overloads", name) or {}
            route = node.get("route") or {}
            device, autograd = route.get("PrivateUse1", "missing"), route.get("AutogradPrivateUse1", "missing")
        out[name] = (device, autograd, field(block, "verdict") or "")
    return out


def section(path: str, name: str) -> dict:
    """A small top-level mapping of a file (`meta`, `platform`), parsed whole; {} when absent."""
    body = text(path)
    head = 0 if body.startswith(f"{name}:\n") else body.find(f"\n{name}:\n") + 1
    if head == 0 and not body.startswith(f"{name}:\n"):
        return {}
    end = re.compile(r"^\S", re.M).search(body, head + len(name) + 2)
    try:
        parsed = yaml.load(body[head : end.start() if end else len(body)], Loader=_LOADER)
        return parsed.get(name) or {}
    except (yaml.YAMLError, AttributeError):
        return _whole(path).get(name) or {}


def meta(path: str) -> dict:
    """An aten matrix's `meta` mapping (small: parsed whole)."""
    return section(path, "meta")
