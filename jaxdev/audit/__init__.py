"""The auditor as a library: what reaches the `jax` device, how well it works, and what changed.

One module per concern: `dispatch` (dispatcher introspection), `samples` (OpInfo samples),
`check` (running a sample on CPU and jax, and its public judging API), `runner` (the one worker
pool: `unit_work` runs OpInfo units in it, `schema_samples` the direct trials of aten overloads),
`facts` (statuses and op facts as data), `matrix` and `aten_matrix` (the YAML coverage matrices),
`explain`, `gate`, `report`.
`lookup` (entries of the committed YAML), `schemas` (torch's operator schemas, cached) and
`listing` let `explain` and `ops` answer without the device. The CLI in `jaxdev.cli` only parses
arguments and renders what these return.
"""


class AuditError(Exception):
    """A mistake the user can fix (bad name, bad file, bad option): shown as one sentence, no traceback."""


def load_module(spec: str, prefix: str):
    """The module `spec` names: a module name, or a .py path (loaded as `prefix` + its file name, once a
    process, as an import is: a plugin that registers a TORCH_LIBRARY cannot run twice, and a cleared
    cache of what loaded it, deviceless.forget_platform's, must not make it)."""
    import importlib
    import importlib.util
    import os
    import sys

    if not spec.endswith(".py"):
        return importlib.import_module(spec)
    name, path = prefix + os.path.basename(spec)[:-3], os.path.abspath(spec)
    loaded = sys.modules.get(name)
    if loaded is not None and getattr(loaded, "__file__", None) == path:
        return loaded
    module_spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    sys.modules[name] = module  # only once it ran whole: a failed plugin is tried again, and fails again
    return module
