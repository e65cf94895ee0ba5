"""PyTorch's `torch.backends` entry point for jaxdev: `import torch` loads the jax device through it.

A module of its own, beside the `jaxdev` package, because the entry point used to be `jaxdev:_autoload`,
and `jaxdev` is easy to shadow: a folder named `jaxdev` in the current directory (the parent of a
clone) becomes a namespace package before an editable install's finder is asked, and its missing
`_autoload` made PyTorch raise "Failed to load the backend extension: jax" out of every `import torch`.
Here a folder without `__init__.py`, or a module file named `jaxdev.py`, never stands in for jaxdev:
the installed package beside this module loads instead, under its own name, so a later
`import jaxdev` gets it too. A real package named `jaxdev` that Python finds first (the source tree,
when the current directory is a checkout) loads as `import jaxdev` would load it. Whatever goes
wrong ends in one warning and a torch without the jax device, never an exception out of `import torch`.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import warnings
from pathlib import Path

_INSTALLED = Path(__file__).resolve().parent / "jaxdev"


def load() -> None:
    try:
        _load()
    except Exception as error:
        reason = (str(error).strip().splitlines() or [""])[0]
        warnings.warn(
            f"jaxdev did not load with `import torch` ({type(error).__name__}: {reason}), so torch runs "
            "without the jax device; TORCH_DEVICE_BACKEND_AUTOLOAD=0 turns this loading off.",
            stacklevel=2,
        )


def _load() -> None:
    module = sys.modules.get("jaxdev")
    if module is not None:
        # `import jaxdev` came first and imported torch: it is registering the device itself.
        if getattr(module, "__file__", None) is None:
            raise ImportError(f"`jaxdev` was imported from {_where(module)}, a folder that is not the jaxdev package")
        return
    spec = importlib.util.find_spec("jaxdev")
    if spec is not None and spec.origin is not None and Path(spec.origin).name == "__init__.py":
        module = importlib.import_module("jaxdev")
    else:
        module = _load_installed()
    import torch

    if torch._C._get_privateuse1_backend_name() != "jax":
        raise ImportError(f"the `jaxdev` imported from {_where(module)} did not register the jax device")


def _load_installed():
    """The package beside this module, under the name `jaxdev`, whatever `jaxdev` would resolve to."""
    init = _INSTALLED / "__init__.py"
    if not init.is_file():
        raise ImportError(f"the installed jaxdev package is missing ({init} does not exist)")
    spec = importlib.util.spec_from_file_location("jaxdev", init, submodule_search_locations=[str(_INSTALLED)])
    module = importlib.util.module_from_spec(spec)
    sys.modules["jaxdev"] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop("jaxdev", None)  # as a failed `import` leaves no half-made module behind
        raise
    return module


def _where(module) -> str:
    return str(getattr(module, "__file__", None) or next(iter(getattr(module, "__path__", None) or ["?"])))
