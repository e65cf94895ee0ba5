"""`explain`: everything the dispatcher and the coverage matrix know about one op, in plain words."""

from __future__ import annotations

import os
import re

import torch

from jaxdev.audit import AuditError, dispatch
from jaxdev.audit.facts import UNSUPPORTED_MEANING

CIA_RULE = (
    "{name} is CompositeImplicitAutograd: it decomposes into other ops before reaching the device, "
    "and gets its gradients from that decomposition for free. Registering a PrivateUse1 (jax) kernel for it "
    "takes the decomposition away from AutogradPrivateUse1 too (dispatcher rule 2.3), so its gradients are "
    "silently lost unless an AutogradPrivateUse1 kernel is registered with it."
)

FIX = {
    "fallback": "write a jax kernel: `@register_functional(aten.{op})` in the matching jaxdev/ops/<family>.py "
    "(in-place and out= variants are derived)",
    "missing": "write a jax kernel for {name} (or for the op its composite kernel needs): nothing can run it on jax",
    "lost": "drop the PrivateUse1 kernel and let the op decompose (its CompositeImplicitAutograd kernel "
    "carries the gradients)",
    "composite": "nothing required; a direct jax kernel would be faster than the generic composite",
}

MAX_GLOB_OVERLOADS = 12

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


def resolve(name: str) -> tuple[list[str], str | None]:
    """(dispatcher overloads, OpInfo name) that `name` refers to: an overload (`aten::add.Tensor`,
    `add.Tensor`), an op (`aten::add`: all its overloads), a glob on aten names, or an OpInfo name
    (whose namesake overloads come with it); an unknown name is an AuditError with near names."""
    from jaxdev.audit import names, samples

    db = samples.op_db()
    overloads = names.aten_overloads(name)
    opinfo = name if name in db else None
    if opinfo is None and overloads and not names.is_glob(name):
        # the OpInfo named after the op (`add` for aten::add.Tensor), for its decomposition
        b = names.base(overloads[0])
        same = [n for n in db if names.namesake(n, getattr(db[n], "name", n), b)]
        opinfo = min(same, key=lambda n: (n.replace(".", "_") != b.strip("_"), len(n), n), default=None)
    if not overloads and opinfo:
        op_name = getattr(db[opinfo], "name", opinfo)
        overloads = names.aten_overloads(op_name.replace(".", "_")) or names.aten_overloads(op_name.split(".")[-1])
    if names.is_glob(name) and len(overloads) > MAX_GLOB_OVERLOADS:
        raise AuditError(
            f"{name!r} matches {len(overloads)} overloads; explain takes at most {MAX_GLOB_OVERLOADS} "
            f"(`jaxdev ops {name}` lists them all)"
        )
    if not overloads and not opinfo:
        raise AuditError(
            f"{name!r} is neither an aten operator nor an OpInfo name{names.hint(name, names._candidates(db))}"
        )
    return overloads, opinfo


def describe(name: str) -> dict:
    """Schema, kernels with provenance, statuses, the CIA rule and the fix for one overload."""
    from jaxdev.ops import registry

    s = dispatch.status(name)
    op = dispatch.overload(name)
    info = {
        "name": name,
        "schema": str(op._schema) if op is not None else None,
        "device": s.device,
        "device_meaning": dispatch.DEVICE_MEANING[s.device],
        "autograd": s.autograd,
        "autograd_meaning": dispatch.AUTOGRAD_MEANING[s.autograd],
        "kernels": {
            "PrivateUse1": {
                "direct": torch._C._dispatch_has_kernel_for_dispatch_key(name, "PrivateUse1"),
                "computed": str(s.device_entry) if s.device_entry else None,
            },
            "AutogradPrivateUse1": {
                "direct": torch._C._dispatch_has_kernel_for_dispatch_key(name, "AutogradPrivateUse1"),
                "computed": str(s.autograd_entry) if s.autograd_entry else None,
            },
        },
        "jaxdev": {
            k: v
            for k, v in {
                "kernel": _kernel_where(name, s.device_entry),
                "derived_from": registry.DERIVED.get(name),
                "vjp_of": registry.BACKWARD.get(name),
            }.items()
            if v
        },
        "tags": list(s.tags),
    }
    cia = torch._C._dispatch_has_kernel_for_dispatch_key(name, "CompositeImplicitAutograd")
    if cia:
        info["rule"] = CIA_RULE.format(name=name)
    short = name.split("::", 1)[-1]
    if s.autograd == "lost" and cia:
        info["fix"] = "BUG (the origin bug of this project): " + FIX["lost"]
    elif s.autograd == "lost":
        info["fix"] = "gradients are lost: " + FIX["lost"]
    elif s.device in FIX:
        info["fix"] = FIX[s.device].format(op=short, name=name)
    return info


def _kernel_where(name: str, entry) -> str | None:
    """Where jaxdev's kernel for `name` is: its Python function, or the native C++ redispatch the
    dispatcher runs in its place (jaxdev/native.py), with the Python twin used without the module."""
    from jaxdev.ops import registry

    where = _where(registry.KERNELS.get(name))
    if where and entry is not None and "csrc/native.cpp" in entry.where:
        return f"native C++ (jaxdev/csrc/native.cpp; Python twin {where})"
    return where


def _where(fn) -> str | None:
    """module.qualname:line of a Python kernel (the dispatcher only knows registry.py)."""
    if fn is None:
        return None
    code = getattr(fn, "__code__", None)
    line = f":{code.co_firstlineno}" if code else ""
    return f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', repr(fn))}{line}"


def decomposition(opinfo: str) -> list[dict]:
    """The aten overloads one CPU sample of the OpInfo reaches after decomposition, with their
    device status; the first that the device lacks is flagged."""
    from jaxdev.audit import check, samples

    unit = samples.Unit(opinfo, "float32", "forward")
    op = samples.op_db()[opinfo]
    if torch.float32 not in op.supported_dtypes("cpu"):
        unit = samples.Unit(opinfo, samples.dtype_name(sorted(op.supported_dtypes("cpu"), key=str)[0]), "forward")
    try:
        sample = samples.samples(unit)[0]
        trace = check.Trace()
        with trace:
            op(sample.input, *sample.args, **sample.kwargs)
    except Exception:  # an OpInfo without usable samples: nothing to trace
        return []
    rows, flagged = [], False
    for name in sorted(trace.ops):
        st = dispatch.status(name).device
        lacks = st in ("fallback", "missing") and not flagged
        flagged = flagged or lacks
        rows.append({"op": name, "device": st, "first_missing": lacks})
    return rows


def coverage(opinfo: str | None, overloads: list[str], matrix_path: str | None) -> list[dict]:
    """Latest matrix cells for the OpInfo, or for OpInfos that reached one of the overloads."""
    from jaxdev.audit import matrix

    paths = [matrix_path] if matrix_path else [os.path.join("coverage", f) for f in ("matrix.yaml", "baseline.yaml")]
    for path in paths:
        if os.path.exists(path):
            m = matrix.load(path)
            break
    else:
        return []
    wanted = set(overloads)
    rows = []
    for op, dtype, direction, entry in m.cells():
        if op == opinfo or wanted & set(m.aten(op)):
            rows.append(
                {
                    "opinfo": op,
                    "dtype": dtype,
                    "direction": direction,
                    **{
                        k: entry.get(k)
                        for k in ("status", "reason", "repro", "max_abs", "max_rel", "arbitrated")
                        if entry.get(k) not in (None, "")
                    },
                }
            )
    rows.sort(key=lambda row: row["opinfo"] != opinfo)  # the explained OpInfo's cells first (stable)
    for row in rows:
        if row.get("status") == "unsupported":
            row["meaning"] = UNSUPPORTED_MEANING
    return rows[:40]


def aten_verdicts(overloads: list[str], path: str | None = None) -> dict[str, dict]:
    """The aten matrix's verdicts (coverage/aten.yaml, when there is one) for these overloads:
    {name: {verdict, category, reason, evidence, cells, repro}} (keys present when known)."""
    from jaxdev.audit import aten_matrix

    path = path or aten_matrix.default_path()
    if not path or not os.path.exists(path):
        return {}
    nodes = aten_matrix.load(path)["overloads"]
    keys = ("verdict", "category", "reason", "evidence", "cells", "repro")
    return {n: {k: nodes[n][k] for k in keys if k in nodes[n]} for n in overloads if n in nodes}


def explain(name: str, matrix_path: str | None = None) -> dict:
    overloads, opinfo = resolve(name)
    verdicts = aten_verdicts(overloads)
    described = [describe(n) for n in overloads]
    for info in described:
        if info["name"] in verdicts:
            info["aten_matrix"] = verdicts[info["name"]]
    return {
        "query": name,
        "opinfo": opinfo,
        "overloads": described,
        "decomposition": decomposition(opinfo) if opinfo else [],
        "coverage": coverage(opinfo, overloads, matrix_path),
    }
