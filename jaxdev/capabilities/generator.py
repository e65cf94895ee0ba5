"""`torch.Generator(device="jax")`: per-generator seeded randomness on the jax device.

PyTorch builds a device generator through its C++ hooks (`getNewGenerator`), which the Python
PrivateUse1 hooks cannot provide: without help `torch.Generator(device="jax")` raises
NotImplementedError. jaxdev puts a subclass of PyTorch's Generator in `torch.Generator` that takes
`device="jax"`: such a generator keeps its state in a CPU generator underneath (so `manual_seed`,
`seed`, `initial_seed`, `get_state`/`set_state` and pickling are PyTorch's own) and reports
`device == jax:0`. A jax random op given it draws its key from that state, advancing it, so
`torch.randn(..., generator=g, device="jax")` replays from `g.manual_seed(...)` like on CUDA.

Differences from CUDA, documented: the dispatcher hands a kernel a fresh wrapper of the C++
generator, so a jax kernel cannot tell a jax generator from a CPU one; it draws from whichever it
is given (CUDA refuses a CPU generator), and a CPU op given a jax generator uses it as the CPU
generator it is underneath (CUDA raises); its state is a CPU generator's. Every Generator,
PyTorch's own included, still passes `isinstance(g, torch.Generator)`.
"""

from __future__ import annotations

import torch

_Base = torch._C.Generator


class _GeneratorType(type(_Base)):
    def __instancecheck__(cls, obj):
        return isinstance(obj, _Base)

    def __subclasscheck__(cls, sub):
        return issubclass(sub, _Base)


class Generator(_Base, metaclass=_GeneratorType):
    __doc__ = _Base.__doc__

    def __new__(cls, device=None):
        on_jax = device is not None and torch.device(device).type == "jax"
        if on_jax and torch.device(device).index not in (None, 0):
            raise RuntimeError(f"jax:{torch.device(device).index}: jaxdev places tensors on jax:0 only")
        g = super().__new__(cls, "cpu") if on_jax else _Base(device) if device is not None else _Base()
        if on_jax:
            g._jax = True
        return g

    def __init__(self, device=None):  # the state is made by __new__
        pass

    @property
    def device(self) -> torch.device:
        return torch.device("jax", 0) if getattr(self, "_jax", False) else super().device

    def __reduce__(self):
        return (_restore, (self.get_state(), getattr(self, "_jax", False)))


def _restore(state, on_jax):
    g = Generator("jax" if on_jax else "cpu")
    g.set_state(state)
    return g


def install() -> None:
    if torch.Generator is not Generator:
        torch.Generator = Generator
