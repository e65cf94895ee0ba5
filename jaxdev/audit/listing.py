"""`ops`: aten overloads with their routes to the jax device, from the committed coverage/aten.yaml
(`route` and `verdict` of every overload) and torch's schema table (tags), without the device.

coverage/aten.yaml records the routes of the checkout that built it; `live=True` reads this
checkout's dispatcher instead (jaxdev.audit.dispatch: loads the device, seconds), as do overloads
the file does not hold (another namespace, a newer torch) and a checkout without the file.
"""

from __future__ import annotations

import dataclasses

from jaxdev.audit import lookup, names, schemas
from jaxdev.audit.facts import AUTOGRAD_STATUSES, DEVICE_STATUSES


@dataclasses.dataclass(frozen=True)
class Row:
    name: str
    device: str
    autograd: str
    tags: tuple[str, ...]
    verdict: str = ""  # coverage/aten.yaml's verdict; "" when read live or not recorded

    def as_dict(self) -> dict:
        return {
            "name": self.name,
            "device": self.device,
            "autograd": self.autograd,
            "tags": list(self.tags),
            **({"verdict": self.verdict} if self.verdict else {}),
        }


def needs_live(patterns, aten_path: str | None) -> bool:
    """Only the dispatcher can answer: no aten.yaml, or a pattern in another namespace (`prims::*`)."""
    return aten_path is None or any("::" in p and not p.startswith("aten::") for p in patterns)


def chosen(patterns, aten_path: str) -> tuple[list[str] | None, list[str]]:
    """(the overloads PATTERNS name, None for every overload of aten.yaml; notes). Aten names and
    globs, or OpInfo names and globs: the overloads their samples reach (per the index)."""
    if not patterns:
        return None, []
    known = set(schemas.table()) | set(lookup.entries(aten_path, "overloads"))
    index = names.load_index()
    return names.overloads_named(patterns, lambda: index, known=frozenset(known))


def rows(aten_path: str, overloads: list[str] | None, tags=(), statuses=()) -> list[Row]:
    """One Row per overload (every one aten.yaml holds when None), filtered as dispatch.query filters:
    at least one of `tags`, and the device or the autograd status among `statuses`."""
    routes = lookup.aten_routes(aten_path)
    table = schemas.table()
    out = []
    for name in sorted(routes) if overloads is None else sorted(set(overloads)):
        if name in routes:
            device, autograd, verdict = routes[name]
            row = Row(name, device, autograd, tuple(table.get(name, {}).get("tags", ())), verdict)
        else:
            from jaxdev.audit import dispatch  # not recorded: the live dispatcher answers for it

            s = dispatch.status(name)
            row = Row(name, s.device, s.autograd, s.tags)
        if tags and not any(_tag_matches(t, row.tags) for t in tags):
            continue
        if statuses and row.device not in statuses and row.autograd not in statuses:
            continue
        out.append(row)
    return out


def _tag_matches(wanted: str, have: tuple[str, ...]) -> bool:
    # "view" matches view_copy, inplace_view, ...
    return any(wanted == t or wanted in t.split("_") for t in have)


def counts(found) -> dict[str, dict[str, int]]:
    dev = {s: 0 for s in DEVICE_STATUSES}
    ag = {s: 0 for s in AUTOGRAD_STATUSES}
    for r in found:
        dev[r.device] = dev.get(r.device, 0) + 1
        ag[r.autograd] = ag.get(r.autograd, 0) + 1
    return {"device": dev, "autograd": ag}
