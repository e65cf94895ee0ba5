"""Names that PyTorch's test files import from `torch.testing._internal` but the installed torch's
copy lacks, supplied before the files are imported, so that test files from a commit near (not at)
the installed torch's can be collected unedited.

Only two kinds of name are supplied, and only where the installed module has none of that name:
- a helper that moved between `torch.testing._internal` modules: the installed torch's own object
  under its old address (older files import `xfail`, `skip`, `skipOps` from
  common_methods_invocations; torch 2.13 keeps them in common_device_type);
- a class attribute's tag that newer files set and the installed TestCase never reads:
  `HardwareClassification` (newer files write `hw_classification = HardwareClassification.ACCELERATOR`
  on their test classes; torch 2.13's TestCase has no such attribute, so the tag changes nothing).

Anything else a file lacks stays an import error: the runner says which file and name.
"""

from __future__ import annotations

import enum
import importlib

# (module under torch.testing._internal, name) -> (module under torch.testing._internal, name)
MOVED = {
    ("common_methods_invocations", "xfail"): ("common_device_type", "xfail"),
    ("common_methods_invocations", "skip"): ("common_device_type", "skip"),
    ("common_methods_invocations", "skipOps"): ("common_device_type", "skipOps"),
}


class HardwareClassification(enum.Enum):
    """A stand-in for newer torch's tag of a test class's hardware reach: inert under torch 2.13."""

    GENERIC = "generic"
    ACCELERATOR = "accelerator"
    CPU = "cpu"


TAGS = {("common_utils", "HardwareClassification"): HardwareClassification}


def _module(name: str):
    return importlib.import_module(f"torch.testing._internal.{name}")


def install(source: str = "") -> list[str]:
    """Supplies every missing name above that `source` (the test files' text) mentions; returns those
    supplied as "module.name". Modules the files never name are not imported (op_db costs seconds)."""
    supplied = []
    for (mod, name), (src_mod, src_name) in MOVED.items():
        if mod not in source or name not in source:
            continue
        target = _module(mod)
        if not hasattr(target, name) and hasattr(_module(src_mod), src_name):
            setattr(target, name, getattr(_module(src_mod), src_name))
            supplied.append(f"{mod}.{name}")
    for (mod, name), value in TAGS.items():
        if name not in source:
            continue
        target = _module(mod)
        if not hasattr(target, name):
            setattr(target, name, value)
            supplied.append(f"{mod}.{name}")
    return supplied
