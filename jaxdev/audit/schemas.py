"""The installed PyTorch's aten operators, for the commands that answer without the device (`explain`,
`ops`): every overload's schema, tags and whether it is CompositeImplicitAutograd.

These come from torch's dispatcher with no jax device registered, and are cached as JSON in
~/.cache/jaxdev/schemas (one small file per torch install, keyed by torch's location, version and
install time, found without importing torch): `import torch` alone takes 1.3 s here, reading the
cache 0.02 s. A cache that cannot be written or read costs only the time: the table is computed
again.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import importlib.util
import json
import os
import re
import sys
import tempfile

CACHE_DIR = os.path.join(os.path.expanduser("~"), ".cache", "jaxdev", "schemas")
FORMAT = 1  # bumped when the table's layout changes, so an older cache is not read


def torch_dir() -> str | None:
    spec = importlib.util.find_spec("torch")
    return os.path.dirname(spec.origin) if spec and spec.origin else None


def torch_version() -> str | None:
    """The installed torch's version, read from torch/version.py without importing torch."""
    folder = torch_dir()
    try:
        with open(os.path.join(folder or "", "version.py")) as f:
            m = re.search(r"^__version__\s*=\s*['\"]([^'\"]+)['\"]", f.read(), re.M)
    except OSError:
        return None
    return m[1] if m else None


def _cache_path() -> str | None:
    folder = torch_dir()
    if folder is None:
        return None
    try:
        stamp = os.stat(os.path.join(folder, "version.py")).st_mtime_ns  # rewritten by every install
    except OSError:
        return None
    key = hashlib.sha256(f"{FORMAT}|{folder}|{torch_version()}|{stamp}".encode()).hexdigest()[:16]
    return os.path.join(CACHE_DIR, f"aten-{key}.json")


@functools.cache
def table() -> dict[str, dict]:
    """aten overload -> {schema, tags, cia} for every aten operator the installed torch defines."""
    path = _cache_path()
    if path and os.path.exists(path):
        with contextlib.suppress(OSError, ValueError), open(path) as f:
            cached = json.load(f)
            if isinstance(cached, dict) and cached:
                return cached
    computed = _from_torch()
    if path:
        with contextlib.suppress(OSError):
            _write(computed, path)
    return computed


def _from_torch() -> dict[str, dict]:
    if "torch" not in sys.modules:
        # Without the device: PyTorch would import jaxdev through its backend entry point (jax, the
        # kernels: seconds), and the schemas are torch's own.
        previous = os.environ.get("TORCH_DEVICE_BACKEND_AUTOLOAD")
        os.environ["TORCH_DEVICE_BACKEND_AUTOLOAD"] = "0"
        try:
            import torch
        finally:
            if previous is None:
                os.environ.pop("TORCH_DEVICE_BACKEND_AUTOLOAD", None)
            else:
                os.environ["TORCH_DEVICE_BACKEND_AUTOLOAD"] = previous
    import torch

    out = {}
    for name in sorted(torch._C._dispatch_get_all_op_names()):
        if not name.startswith("aten::"):
            continue
        op, _, overload = name.partition(".")
        try:
            schema = torch._C._get_schema(op, overload)
            tags = torch._C._get_operation_overload(op, overload)[2]
        except RuntimeError:  # a name the dispatcher lists without a schema Python can reach
            continue
        out[name] = {
            "schema": str(schema),
            "tags": sorted(str(t).split(".")[-1] for t in tags),
            "cia": torch._C._dispatch_has_kernel_for_dispatch_key(name, "CompositeImplicitAutograd"),
        }
    return out


def _write(data: dict, path: str) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".aten-", suffix=".json.tmp", dir=os.path.dirname(path))
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(data, f, sort_keys=True)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def overload(name: str):
    """The OpOverload for "ns::op.overload", or None where Python cannot reach it (imports torch,
    not jaxdev's device: a peer's worker resolves names with it too)."""
    import torch

    ns, _, rest = name.partition("::")
    op, _, ov = rest.partition(".")
    try:
        return getattr(getattr(getattr(torch.ops, ns), op), ov or "default")
    except (AttributeError, RuntimeError):
        return None
