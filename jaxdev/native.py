"""jaxdev's native fast paths (jaxdev/csrc/native.cpp): built once, loaded at import, optional.

Three steps of every eager op cost microseconds in Python and nothing in C++: a view op's kernel (a
PrivateUse1 kernel that hands the op to CPU's metadata kernel: 3.2 us in Python, 0.7 us native, as on
CPU), making a result tensor, and finding the arrays behind plain arguments. `csrc/native.cpp` does
those with the CPython API, and each has a Python twin that jaxdev uses when the module is missing,
so behaviour never depends on it; only speed does.

The module is compiled against the installed torch by one call of the C++ compiler (about 10 s),
the first time jaxdev is imported without it, and kept in

    JAXDEV_NATIVE_DIR=/path     where built modules are kept (default ~/.cache/jaxdev/native)
    JAXDEV_NATIVE=off           do not build or load it: the pure-Python paths ("0", "false" too)

under a name that changes with the source, torch's version and the Python version. Where it cannot be
built (no compiler, no Python headers), jaxdev warns once, with the reason, and runs in Python.
scripts/setup.sh builds it.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.machinery
import importlib.util
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import warnings

import torch

ENV = "JAXDEV_NATIVE"
DIR_ENV = "JAXDEV_NATIVE_DIR"
DEFAULT_DIR = os.path.join(os.path.expanduser("~"), ".cache", "jaxdev", "native")
SOURCE = os.path.join(os.path.dirname(__file__), "csrc", "native.cpp")
NAME = "_jaxdev_native"
_OFF = ("0", "off", "false", "no", "none")

# Why the module is not in use (None while it is).
unavailable: str | None = None


def _key() -> str:
    """Changes whenever the module must be rebuilt: its source, torch, Python, the platform."""
    h = hashlib.sha256()
    for name in sorted(os.listdir(os.path.dirname(SOURCE))):  # native.cpp includes the other files
        if name.endswith((".cpp", ".h")):
            h.update(name.encode())
            with open(os.path.join(os.path.dirname(SOURCE), name), "rb") as f:
                h.update(f.read())
    for part in (torch.__version__, torch.version.git_version, sys.version, sysconfig.get_platform()):
        h.update(str(part).encode())
    return h.hexdigest()[:16]


def path() -> str:
    """Where the module for this source, torch and Python is (or would be) kept."""
    suffix = importlib.machinery.EXTENSION_SUFFIXES[0]
    return os.path.join(os.environ.get(DIR_ENV) or DEFAULT_DIR, _key(), NAME + suffix)


def _compiler() -> str | None:
    for name in (os.environ.get("CXX"), "c++", "g++", "clang++"):
        if name and shutil.which(name):
            return shutil.which(name)
    return None


def _compile_command(cxx: str, output: str) -> list[str]:
    from torch.utils import cpp_extension

    torch_lib = os.path.join(os.path.dirname(torch.__file__), "lib")
    abi = int(torch._C._GLIBCXX_USE_CXX11_ABI)
    return [
        cxx,
        "-O2",
        "-shared",
        "-fPIC",
        "-std=c++20",
        "-w",
        f"-D_GLIBCXX_USE_CXX11_ABI={abi}",
        *(f"-I{p}" for p in cpp_extension.include_paths()),
        f"-I{sysconfig.get_paths()['include']}",
        SOURCE,
        "-o",
        output,
        f"-L{torch_lib}",
        "-lc10",
        "-ltorch",
        "-ltorch_cpu",
        "-ltorch_python",
        f"-Wl,-rpath,{torch_lib}",
    ]


def build(target: str) -> None:
    """Compile the module to `target`. Written to a temporary name first and renamed into place,
    so processes building at the same time never load a half-written file."""
    cxx = _compiler()
    if cxx is None:
        raise RuntimeError("no C++ compiler found (set CXX, or install g++)")
    if not os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")):
        raise RuntimeError(f"Python's C headers are missing ({sysconfig.get_paths()['include']}/Python.h)")
    os.makedirs(os.path.dirname(target), exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(target), suffix=".so.tmp")
    os.close(fd)
    try:
        done = subprocess.run(_compile_command(cxx, tmp), capture_output=True, text=True)
        if done.returncode != 0:
            lines = done.stderr.strip().splitlines() or ["(no output)"]
            first_error = next((line for line in lines if "error" in line), lines[-1])
            raise RuntimeError(f"the C++ compiler failed: {first_error.strip()}")
        os.replace(tmp, target)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def _import(target: str):
    spec = importlib.util.spec_from_file_location(NAME, target)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def load(*, announce: bool = True):
    """The native module, built first if need be; None (and `unavailable` says why) when it is off or
    cannot be built."""
    global unavailable
    if os.environ.get(ENV, "").strip().lower() in _OFF and os.environ.get(ENV) is not None:
        unavailable = f"turned off by {ENV}={os.environ[ENV]}"
        return None
    target = path()
    failed = target + ".failed"  # a build that failed is not retried on every import (it costs seconds)
    try:
        if os.path.exists(failed):
            with open(failed) as f:
                raise RuntimeError(f.read().strip() + f" (when it was built; delete {failed} to retry)")
        if not os.path.exists(target):
            if announce:
                print("jaxdev: building its native fast paths for this torch (once, about 10 s)", file=sys.stderr)
            try:
                build(target)
            except Exception as e:
                with contextlib.suppress(OSError), open(failed, "w") as f:
                    f.write(str(e) or type(e).__name__)
                raise
        module = _import(target)
    except Exception as e:
        unavailable = str(e) or type(e).__name__
        warnings.warn(f"jaxdev runs without its native fast paths (eager ops are slower): {unavailable}", stacklevel=2)
        return None
    unavailable = None
    return module


module = load()

# Whether the module's PrivateUse1 hooks (and so the pinned allocator, jaxdev/capabilities/pinned.py)
# are the device's in this process: jaxdev/device.py installs them before PyTorch's Python ones.
hooks = False


def install_hooks() -> None:
    """The module's hooks, registered before PyTorch's Python ones (only the first registration
    counts); none when the module is unavailable."""
    global hooks
    if module is not None and hasattr(module, "install_hooks"):
        hooks = bool(module.install_hooks())
