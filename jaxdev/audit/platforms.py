"""Which JAX platform the auditor's workers run on, and where each platform's files go.

The rule for files: CPU's stay where they always were (coverage/matrix.yaml, coverage/aten.yaml,
coverage/baseline.yaml); any other platform's go in a folder named after the platform beside them
(coverage/tpu/matrix.yaml, coverage/tpu/aten.yaml, coverage/tpu/baseline.yaml), so a run on one
platform never writes over another's cells (`folder`). Each matrix records the platform and device
kind it ran on (model.Platform); a file without one was measured on CPU. The JAXDEV_MATH setting is part
of the platform: a TPU's cells under its default (near) go in coverage/tpu/, under auto in
coverage/tpu-auto/ (`folder`), so verdicts of two settings never mix in one file.

The parent process never starts a JAX backend itself: on a TPU one process may hold the chip, and
the workers need it. `Probe` asks a short-lived child instead (started early, so its second or two
overlaps the parent's own start-up); the workers say theirs again when ready (runner checks that
they agree with what the run expects)."""

from __future__ import annotations

import functools
import os
import subprocess
import sys

import jaxdev.math_settings as math_settings  # `from jaxdev import` would run the light CLI's deferred device
from jaxdev.audit import AuditError, deviceless
from jaxdev.audit.model import CPU, Platform

PROBE_TIMEOUT_S = 180.0
_PROBE = "import jax; d = jax.devices()[0]; print(d.platform); print(d.device_kind)"
_DEVICELESS_PROBE = "from jaxdev.audit import deviceless; deviceless.probe()"


def current() -> Platform:
    """The platform of this process's first JAX device (starts the backend: workers only)."""
    import jax

    # the setting the kernels read (ops/kit/math_mode.mode), worked out without loading them: a peer
    # backend's workers must not
    math = math_settings.resolve(os.environ.get("JAXDEV_MATH"), jax.default_backend())
    if deviceless.installed():
        return Platform(deviceless.NAME, deviceless.KIND, math)
    device = jax.devices()[0]
    return Platform(str(device.platform), str(device.device_kind), math)


class Probe:
    """The platform a worker would run on, asked of a child process (`result()` waits for it)."""

    def __init__(self, env: dict | None = None):
        self.env = dict(os.environ if env is None else env)
        without_chip = bool(self.env.get(deviceless.ENV))  # --tpu-compile: libtpu's topology, not a device
        self.key = ("tpu-compile" if without_chip else self.env.get("JAX_PLATFORMS", ""), self.env.get("JAXDEV_MATH"))
        self.proc = None
        if self.key not in _known:
            self.proc = subprocess.Popen(
                [sys.executable, "-c", _DEVICELESS_PROBE if without_chip else _PROBE],
                env=self.env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )

    def result(self) -> Platform:
        if self.proc is None:
            return _known[self.key]
        try:
            out, err = self.proc.communicate(timeout=PROBE_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.communicate()
            raise AuditError(
                f"JAX did not list its devices within {PROBE_TIMEOUT_S:g} s; is the accelerator busy?"
            ) from None
        lines = out.split("\n")
        if self.proc.returncode != 0 or len(lines) < 2 or not lines[0]:
            last = (err.strip().splitlines() or ["no output"])[-1][:300]
            raise AuditError(f"cannot tell which JAX platform the workers would run on: {last}")
        name = lines[0].strip()
        try:  # the setting the workers will read from the same environment (ops/kit/math_mode.mode)
            math = math_settings.resolve(self.env.get("JAXDEV_MATH"), name)
        except ValueError as e:
            raise AuditError(str(e)) from None
        _known[self.key] = Platform(name, lines[1].strip(), math)
        return _known[self.key]


# (JAX_PLATFORMS, JAXDEV_MATH) -> the platform a probe found under them (one probe per process and setting)
_known: dict[tuple, Platform] = {}


def folder(out_dir: str, platform: Platform) -> str:
    """Where `platform`'s files go under `out_dir`: out_dir itself for CPU, out_dir/PLATFORM otherwise;
    under a JAXDEV_MATH other than the platform's default, out_dir/PLATFORM-SETTING (coverage/tpu-auto)."""
    if platform == CPU:
        return out_dir
    name = platform.name if platform.default_math else f"{platform.name}-{platform.math}"
    return os.path.join(out_dir, name)


def path(out_dir: str, name: str, platform: Platform) -> str:
    """`name` (matrix.yaml, aten.yaml, baseline.yaml) for `platform` under `out_dir` (see `folder`)."""
    return os.path.join(folder(out_dir, platform), name)


@functools.cache
def _recorded(file: str, mtime: float) -> Platform:
    from jaxdev.audit import lookup

    top = lookup.section(file, "platform") or lookup.section(file, "meta").get("platform")
    return Platform.from_yaml(top) or CPU


def recorded(file: str) -> Platform:
    """The platform a matrix (its `platform` section) or an aten matrix (its `meta.platform`) records;
    CPU when none (a quick read of that section only)."""
    return _recorded(file, os.path.getmtime(file))


def beside(main: str) -> list[tuple[Platform, str]]:
    """The platforms' files of main's name beside `main` (coverage/matrix.yaml: coverage/*/matrix.yaml):
    `main` first, then each folder's that records another platform, by folder name. [] without `main`."""
    if not main or not os.path.exists(main):
        return []
    root = os.path.dirname(os.path.abspath(main))
    found = [(recorded(main), main)]
    for entry in sorted(os.listdir(root)):
        other = os.path.join(os.path.dirname(main), entry, os.path.basename(main))
        if os.path.isfile(other) and entry != CPU.name:
            platform = recorded(other)
            if platform != found[0][0]:
                found.append((platform, other))
    return found
