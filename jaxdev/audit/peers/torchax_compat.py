"""Lets torchax 0.0.13 import under torch 2.13 (google/torchax#101, fixed on its main, unreleased).

torchax's amp and decomposition tables name named-tensor overloads that torch 2.13 removed
(`aten.prod.dim_Dimname`, `aten.norm.names_ScalarOpt_dim`, ...), and the attribute lookup raises at
import. From `install()` on, such a missing overload resolves to a placeholder instead: an amp
table then keys a rule no op will ever look up, and `torch._decomp.get_decompositions` skips what is
not an operator. Every other missing name still raises.

The one compatibility shim for torchax, loaded only where torchax runs: the auditor's torchax workers
(peers/torchax_backend.py, `jaxdev coverage --backend torchax`) and benchmarks/tpu_torchax.py, which
loads this file by its path (importing it as jaxdev.audit.peers.torchax_compat would run
jaxdev/__init__.py, jaxdev's device, in torchax's process). It imports only torch.

    from jaxdev.audit.peers import torchax_compat   # in a peer worker (jaxdev_cli/peer_worker.py)
    torchax = torchax_compat.import_torchax()
"""

from __future__ import annotations

import importlib

from torch._ops import OpOverloadPacket

_REMOVED = ("imname", "names")  # Dimname / dimname / names_*: the named-tensor overloads torch 2.13 dropped


class MissingOverload:
    """Stands for an overload this torch does not have; hashable and distinct per name."""

    def __init__(self, packet: str, name: str):
        self.qualified = f"{packet}.{name}"

    def __repr__(self) -> str:
        return f"<missing overload {self.qualified}>"


def install() -> None:
    """Resolve removed named-tensor overloads to placeholders for the rest of this process: torchax
    reads its tables at import and again when its environment loads its decompositions
    (`torchax.default_env()`), so the lookup must stay patched after the import. Idempotent."""
    original = OpOverloadPacket.__getattr__
    if getattr(original, "_torchax_compat", False):
        return
    made: dict[str, MissingOverload] = {}

    def lookup(self, key):
        try:
            return original(self, key)
        except AttributeError:
            if not any(part in key for part in _REMOVED):
                raise
            packet = str(self)
            return made.setdefault(f"{packet}.{key}", MissingOverload(packet, key))

    lookup._torchax_compat = True
    lookup._original = original
    OpOverloadPacket.__getattr__ = lookup


def uninstall() -> None:
    """Missing overloads raise again (for tests; torchax needs the placeholders for as long as it runs)."""
    current = OpOverloadPacket.__getattr__
    if getattr(current, "_torchax_compat", False):
        OpOverloadPacket.__getattr__ = current._original


def import_torchax():
    """`import torchax` with the placeholders installed first; returns the module."""
    install()
    return importlib.import_module("torchax")
