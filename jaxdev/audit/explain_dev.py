"""`explain --dev`: one op as a kernel author needs it, read live from this checkout.

The routes through the dispatcher now (PrivateUse1 and AutogradPrivateUse1: which kernel runs and
where it was registered), jaxdev's kernel for it as a file and line of this checkout, what
registering a kernel would take away, and the ops its OpInfo's samples reach with the first one the
device lacks. Loading the registry loads the device (jax, every kernel): seconds, unlike the user's
answer in jaxdev.audit.explain.
"""

from __future__ import annotations

import inspect
import os

from jaxdev.audit import lookup
from jaxdev.audit.facts import AUTOGRAD_MEANING, DEVICE_MEANING

CHECKOUT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

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


def where(path_and_line: str) -> str:
    """A registration site as a reader can find it: a path inside this checkout relative to it; a
    file of PyTorch's own build (`/__w/pytorch/pytorch/build/aten/src/ATen/Register...cpp:6696`, a
    path on PyTorch's CI machine) by its name, marked as PyTorch's."""
    path, _, line = path_and_line.rpartition(":")
    if not line.isdigit():
        path, line = path_and_line, ""
    suffix = f":{line}" if line else ""
    real = os.path.realpath(path) if os.path.isabs(path) else path
    if real.startswith(CHECKOUT + os.sep):
        return os.path.relpath(real, CHECKOUT) + suffix
    for marker in ("/aten/src/", "/torch/csrc/", "/torch/"):
        if marker in path:
            return "PyTorch's build: " + marker.strip("/") + "/" + path.split(marker, 1)[1] + suffix
    return path + suffix


def _source(fn) -> str | None:
    """file:line of a Python kernel in this checkout (the dispatcher only knows registry.py)."""
    if fn is None:
        return None
    fn = inspect.unwrap(fn)
    code = getattr(fn, "__code__", None)
    try:
        path = inspect.getsourcefile(fn)
    except TypeError:
        path = None
    if not path or code is None:
        return f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', repr(fn))}"
    return f"{where(f'{path}:{code.co_firstlineno}')} ({fn.__qualname__})"


def _kernel_where(name: str, entry) -> str | None:
    """jaxdev's kernel for `name`: its Python function, or the native C++ redispatch the dispatcher
    runs in its place (jaxdev/native.py), with the Python twin used without the module."""
    from jaxdev.ops import registry

    found = _source(registry.KERNELS.get(name))
    if found and entry is not None and "csrc/native.cpp" in entry.where:
        return f"native C++ (jaxdev/csrc/native.cpp; Python twin {found})"
    return found


def describe(name: str) -> dict:
    """Schema, routes with their registration sites, jaxdev's kernel, the CIA rule and the fix."""
    import torch

    from jaxdev.audit import dispatch
    from jaxdev.ops import registry

    s = dispatch.status(name)
    op = dispatch.overload(name)
    info = {
        "name": name,
        "schema": str(op._schema) if op is not None else None,
        "device": s.device,
        "device_meaning": DEVICE_MEANING[s.device],
        "autograd": s.autograd,
        "autograd_meaning": AUTOGRAD_MEANING[s.autograd],
        "kernels": {
            key: {
                "direct": torch._C._dispatch_has_kernel_for_dispatch_key(name, key),
                "runs": f"{entry.kind} ({where(entry.where)})" if entry else None,
            }
            for key, entry in (("PrivateUse1", s.device_entry), ("AutogradPrivateUse1", s.autograd_entry))
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


def reaches(opinfo: str, matrix_path: str) -> list[dict]:
    """The aten overloads the OpInfo's samples reached on CPU (its `aten:` list in the matrix, over
    every cell), with their device status now; the first the device lacks is flagged."""
    from jaxdev.audit import dispatch

    node = lookup.op_node(matrix_path, opinfo)
    rows, flagged = [], False
    for name in node.aten if node else ():
        st = dispatch.status(name).device
        lacks = st in ("fallback", "missing") and not flagged
        flagged = flagged or lacks
        rows.append({"op": name, "device": st, "first_missing": lacks})
    return rows


def section(overloads: list[str], opinfo: str | None, matrix_path: str | None, aten_path: str | None) -> dict:
    """The kernel author's section: each overload described live, with a note where its routes
    differ from what coverage/aten.yaml recorded; and what the OpInfo's samples reach."""
    described = []
    for name in overloads:
        info = describe(name)
        node = lookup.aten_node(aten_path, name) if aten_path else None
        recorded = tuple(node.route) if node and node.route else (None, None)
        if node is not None and recorded != (info["device"], info["autograd"]):
            info["changed"] = (
                f"{aten_path} recorded {recorded[0]}/{recorded[1]}; this checkout now routes it "
                f"{info['device']}/{info['autograd']} (`jaxdev coverage --aten {name}` updates the verdict)"
            )
        described.append(info)
    out: dict = {"overloads": described}
    if opinfo and matrix_path:
        out["reaches"] = {"opinfo": opinfo, "ops": reaches(opinfo, matrix_path)}
    return out
