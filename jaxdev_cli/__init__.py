"""The `jaxdev` command's entry point (pyproject's console script), kept outside the jaxdev package.

Importing anything under `jaxdev` first runs jaxdev/__init__.py, which registers the device: it
imports jax and every kernel, seconds before the first line of output. Most commands need none of
that: --help, `explain` and `ops` answer from the committed YAML and torch's schemas. So `main` puts
the jaxdev package into sys.modules with its __init__ not yet run, and runs that __init__, once, the
moment anything more is needed: an import of a jaxdev module outside LIGHT, or an attribute of the
package itself (`jaxdev.__version__`). Commands never ask for the device: what they import decides,
so a module wrongly listed in LIGHT costs only speed, never correctness, and `import jaxdev`
outside this command is untouched.
"""

from __future__ import annotations

import importlib.util
import sys

# Modules that run without the device (they import neither jax nor the kernels at import time).
# Every jaxdev.cli module is light: the commands import what they need inside their functions.
LIGHT = frozenset(
    {
        "jaxdev.audit",
        "jaxdev.audit.aten_matrix",
        "jaxdev.audit.deviceless",
        "jaxdev.audit.explain",
        "jaxdev.audit.explain_peers",
        "jaxdev.audit.explain_platforms",
        "jaxdev.audit.facts",
        "jaxdev.audit.listing",
        "jaxdev.audit.lookup",
        "jaxdev.audit.matrix",
        "jaxdev.audit.model",
        "jaxdev.audit.names",
        "jaxdev.audit.peers",
        "jaxdev.audit.peers.side_by_side",
        "jaxdev.audit.platforms",
        "jaxdev.audit.report",
        "jaxdev.audit.report_files",
        "jaxdev.audit.report_html",
        "jaxdev.audit.report_peers",
        "jaxdev.audit.report_platforms",
        "jaxdev.audit.schemas",
        "jaxdev.math_settings",  # the platform records' JAXDEV_MATH rule: imports nothing
    }
)


class _DeviceOnDemand:
    """A meta-path finder that finds nothing: it runs jaxdev/__init__.py before any jaxdev module
    outside LIGHT is imported, then leaves sys.meta_path."""

    def find_spec(self, name, path=None, target=None):
        if (
            name.startswith("jaxdev.")
            and name != "jaxdev.cli"
            and not name.startswith("jaxdev.cli.")
            and name not in LIGHT
        ):
            load_device()
        return None


_FINDER = _DeviceOnDemand()


def main():
    _defer_device()
    from jaxdev.cli.main import main as command

    return command()


def _defer_device() -> None:
    if "jaxdev" in sys.modules:
        return
    spec = importlib.util.find_spec("jaxdev")
    if spec is None or spec.origin is None or not spec.submodule_search_locations:
        return  # not the package (a namespace folder?): the ordinary import says what is wrong
    module = importlib.util.module_from_spec(spec)
    module.__getattr__ = _package_attribute  # PEP 562: only for names the package does not have yet
    sys.modules["jaxdev"] = module
    sys.meta_path.insert(0, _FINDER)


def _package_attribute(name: str):
    load_device()
    return getattr(sys.modules["jaxdev"], name)


def load_device() -> None:
    """Run the deferred jaxdev/__init__.py (the device, its kernels); nothing when it has run."""
    if _FINDER not in sys.meta_path:
        return
    sys.meta_path.remove(_FINDER)
    module = sys.modules["jaxdev"]
    del module.__getattr__
    module.__spec__.loader.exec_module(module)
