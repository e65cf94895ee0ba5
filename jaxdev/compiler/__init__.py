"""The compiled path: `torch.compile(fn, backend="jax")` runs captured graphs as jitted JAX programs.

The name "jax" reaches dynamo two ways: the `torch_dynamo_backends` entry point of an installed
jaxdev, and `register()`, which `import jaxdev` calls. Importing dynamo costs about a second, so
`register()` does not import it: it acts the moment dynamo is first imported (by `torch.compile`
itself), or at once if it already is.

It also puts jax, jaxlib and jaxdev's device modules on dynamo's skip list. Where dynamo runs code eagerly inside a
compiled function (a graph break), every Python frame started there passes dynamo's frame hook,
kernels the dispatcher calls included; without the skip, dynamo would try to compile jaxdev's
kernels and JAX itself. A skip there covers the frame alone, so the frames these call (Python's
logging, from JAX) are skipped with them (`frames.py`).

And it gives jax parameters what dynamo gives CUDA ones when it compiles `opt.step()`: an optimizer
whose state is not yet initialised becomes `capturable`, so its step counts live on the device
instead of in CPU tensors that every compiled step would copy in and out.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys

from jaxdev.compiler import frames
from jaxdev.compiler.backend import NAME, jax_backend

_DYNAMO = "torch._dynamo"


def _register_now() -> None:
    from torch._dynamo import trace_rules
    from torch._dynamo.backends import registry

    if NAME not in registry._BACKENDS:
        registry.register_backend(jax_backend, name=NAME)
        skipped = ("jax", "jaxlib", *_device_modules())
        for module in skipped:
            trace_rules.add(module)
        frames.skip_recursively(skipped)  # and the frames they call (logging, from JAX)
        _capturable_like_cuda()


def _device_modules() -> list[str]:
    """jaxdev's modules that the dispatcher calls into; not the auditor and the CLI, whose code
    compiles samples with torch.compile and must be traced like any user code."""
    import os
    import pkgutil

    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # jaxdev/, without importing it
    return [f"jaxdev.{m.name}" for m in pkgutil.iter_modules([package]) if m.name not in ("audit", "cli")]


def _capturable_like_cuda() -> None:
    from torch._dynamo.variables import optimizer

    cls = optimizer.OptimizerVariable
    original = getattr(cls, "_set_capturable", None)
    if original is None or getattr(original, "_jaxdev", False):
        return

    def _set_capturable(self, tx):
        # Dynamo's own rule, with jax among the devices it names (cuda, xpu): only groups that
        # declare the option, whose parameters are all on jax and have no state yet.
        for group in self.value.param_groups:
            params = group.get("params", [])
            if (
                "capturable" in group
                and params
                and all(getattr(p, "device", None) is not None and p.device.type == NAME for p in params)
                and all(p not in self.value.state for p in params)
            ):
                group["capturable"] = True
        return original(self, tx)

    _set_capturable._jaxdev = True
    cls._set_capturable = _set_capturable


class _RegisterOnImport(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds dynamo with the normal finders, then registers "jax" once dynamo's import finished."""

    def find_spec(self, name, path, target=None):
        if name != _DYNAMO:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None:
            return None
        self._inner = spec.loader
        spec.loader = self
        return spec

    def create_module(self, spec):
        return self._inner.create_module(spec)

    def exec_module(self, module):
        self._inner.exec_module(module)
        sys.meta_path[:] = [f for f in sys.meta_path if f is not self]
        _register_now()


def register() -> None:
    if _DYNAMO in sys.modules:
        _register_now()
    elif not any(isinstance(f, _RegisterOnImport) for f in sys.meta_path):
        sys.meta_path.insert(0, _RegisterOnImport())


__all__ = ["NAME", "jax_backend", "register"]
