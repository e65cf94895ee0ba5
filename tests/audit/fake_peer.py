"""A fake peer backend (jaxdev/audit/peers' adapter interface), named through $JAXDEV_AUDIT_PEERS
(`fake=tests/audit/fake_peer.py`), so the peer plumbing is tested without torchax.

Its "device" is CPU under a TorchFunctionMode that breaks two ops as a peer might: `sin` gives
sin(x) + 1 (wrong values) and `neg` a result without grad_fn (lost autograd); every other op runs
as CPU runs it. Like torchax's dispatch, it takes an aten overload's positional arguments only
positionally: one given by keyword raises (a direct trial must call the op as a user does). `load()` first imports the peer's package, $JAXDEV_TEST_PEER_IMPORT (default: json,
which is there; a test names a missing one), and refuses to run where jaxdev's device is loaded:
a peer's worker must never load it.
"""

from __future__ import annotations

import importlib
import os
import sys

from jaxdev.audit.devices import Device

NAME = "fake"
INSTALL = "pip install --no-deps fake-peer==1.0"
DIRECTIONS = ("forward", "backward")
HOW = ("forward, backward: on CPU under a mode that adds 1 to sin and detaches neg's result",)
VERSION = "1.0"
IMPORT_ENV = "JAXDEV_TEST_PEER_IMPORT"


def load():
    importlib.import_module(os.environ.get(IMPORT_ENV, "json"))
    loaded = [m for m in ("jaxdev.device", "jaxdev.ops", "jaxdev.fallback") if m in sys.modules]
    if loaded:
        raise RuntimeError(f"jaxdev's device is loaded in a peer's worker: {loaded}")
    return VERSION, Fake()


def _base(func) -> str:
    schema = getattr(func, "_schema", None)
    if schema is not None:
        return str(schema.name).split("::")[-1]
    return getattr(func, "__name__", "").strip("_")


def _broken():
    import torch

    class Broken(torch.overrides.TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            schema = getattr(func, "_schema", None)
            by_keyword = {a.name for a in schema.arguments if not a.kwarg_only} & set(kwargs or ()) if schema else ()
            if by_keyword:
                raise TypeError(f"{func} got positional argument(s) {sorted(by_keyword)} by keyword")
            out = func(*args, **(kwargs or {}))
            if _base(func) == "sin":
                return out + 1
            if _base(func) == "neg":
                return out.detach()
            return out

    return Broken()


class Fake(Device):
    name = "cpu"
    directions = DIRECTIONS

    def context(self):
        return _broken()

    def run(self, unit, op, sample, seeds):
        from torch.utils._pytree import tree_map

        from jaxdev.audit import calls
        from jaxdev.audit import samples as sample_db

        with _broken():
            moved = sample_db.to_device(sample, self.name, unit.op)
            out, _ = calls.call(op, moved, unit.direction == "backward", seeds)
        return tree_map(calls.to_cpu, out), calls.layouts(out)
