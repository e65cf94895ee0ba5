"""Shared helpers for the jaxdev test suite.

Every test compares the `jax` device against CPU PyTorch. The helpers here:

* `assert_same(actual, expected)`: a jax tensor against its CPU twin (device, dtype, shape, values,
  bit-exact unless a tolerance is given).
* `on_both(fn)`: run a scenario once with device="cpu" and once with device="jax"; if CPU raises,
  the jax run must raise the same exception type, otherwise every returned tensor must match.
* `crashprone` marker: a test that may kill the interpreter (a segfault reading a fake storage
  pointer) is first run in a child process; if it crashes there it fails here with the child's
  report instead of taking the whole suite down.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

import jaxdev  # noqa: F401  (registers the device)

JAX = torch.device("jax", 0)
CPU = torch.device("cpu")

ALL_DTYPES = [
    torch.bool,
    torch.uint8,
    torch.int8,
    torch.int16,
    torch.int32,
    torch.int64,
    torch.float16,
    torch.bfloat16,
    torch.float32,
    torch.float64,
    torch.complex64,
    torch.complex128,
]


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "crashprone: run first in a child process, so a segfault fails only this test"
    )


# --- comparing against CPU ------------------------------------------------------------------------


def to_cpu(t: torch.Tensor) -> torch.Tensor:
    """The CPU copy of a tensor's values, without autograd history."""
    return t.detach().to("cpu")


def assert_same(actual, expected, *, rtol=0.0, atol=0.0, check_stride=False, msg=""):
    """`actual` (a jax tensor) holds what `expected` (a CPU tensor) holds."""
    assert isinstance(actual, torch.Tensor), f"{msg} expected a tensor, got {type(actual).__name__}"
    assert actual.device.type == "jax", f"{msg} result is on {actual.device}, not on jax"
    assert actual.dtype == expected.dtype, f"{msg} dtype {actual.dtype} != CPU's {expected.dtype}"
    assert actual.shape == expected.shape, f"{msg} shape {tuple(actual.shape)} != CPU's {tuple(expected.shape)}"
    if check_stride:
        assert actual.stride() == expected.stride(), f"{msg} stride {actual.stride()} != CPU's {expected.stride()}"
        assert actual.storage_offset() == expected.storage_offset(), (
            f"{msg} storage_offset {actual.storage_offset()} != CPU's {expected.storage_offset()}"
        )
    torch.testing.assert_close(
        to_cpu(actual), expected.detach(), rtol=rtol, atol=atol, equal_nan=True, msg=lambda m: f"{msg} {m}"
    )


def _compare(jax_out, cpu_out, path, rtol, atol, check_stride):
    if isinstance(cpu_out, torch.Tensor):
        assert_same(jax_out, cpu_out, rtol=rtol, atol=atol, check_stride=check_stride, msg=f"[{path}]")
    elif isinstance(cpu_out, (list, tuple)):
        assert isinstance(jax_out, (list, tuple)) and len(jax_out) == len(cpu_out), f"[{path}] {jax_out!r}"
        for i, (j, c) in enumerate(zip(jax_out, cpu_out)):
            _compare(j, c, f"{path}.{i}", rtol, atol, check_stride)
    elif isinstance(cpu_out, dict):
        assert isinstance(jax_out, dict) and jax_out.keys() == cpu_out.keys(), f"[{path}] {jax_out!r}"
        for k in cpu_out:
            _compare(jax_out[k], cpu_out[k], f"{path}.{k}", rtol, atol, check_stride)
    elif isinstance(cpu_out, torch.device):
        assert jax_out == (JAX if cpu_out.type == "cpu" else cpu_out), f"[{path}] {jax_out} vs {cpu_out}"
    else:
        assert jax_out == cpu_out, f"[{path}] jax gave {jax_out!r}, CPU gave {cpu_out!r}"


def on_both(fn, *, rtol=0.0, atol=0.0, check_stride=False, match=None):
    """Run `fn(device)` on CPU and on jax and compare. Returns the jax result.

    If CPU raises, jax must raise the same exception type (and `match`, when given, must be found in
    the jax message); a jax error where CPU succeeds fails the test with that error.
    """
    try:
        cpu_out = fn(CPU)
    except Exception as cpu_err:  # noqa: BLE001
        try:
            fn(JAX)
        except type(cpu_err) as jax_err:
            if match is not None:
                assert match in str(jax_err), f"jax error {jax_err!r} lacks {match!r} (CPU: {cpu_err!r})"
            return jax_err
        pytest.fail(f"CPU raised {cpu_err!r}, jax raised nothing", pytrace=False)
    jax_out = fn(JAX)
    _compare(jax_out, cpu_out, "result", rtol, atol, check_stride)
    return jax_out


@pytest.fixture
def fallback_mode(monkeypatch):
    """Set JAXDEV_FALLBACK for one test (and start with fresh counters)."""

    def set_mode(mode):
        monkeypatch.setenv("JAXDEV_FALLBACK", mode)
        jaxdev.reset_fallback_counts()

    yield set_mode
    jaxdev.reset_fallback_counts()


# --- child processes --------------------------------------------------------------------------------

ROOT = Path(__file__).resolve().parent.parent


def run_python(code: str, *, env: dict | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    """Run `code` in a fresh interpreter (with the repo's venv and tests/ on the path)."""
    full_env = dict(os.environ)
    full_env["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(ROOT / "tests"), full_env.get("PYTHONPATH", "")])
    full_env.update(env or {})
    return subprocess.run(
        [sys.executable, "-X", "faulthandler", "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=full_env,
        cwd=ROOT,
    )


def describe_exit(proc: subprocess.CompletedProcess) -> str:
    how = f"signal {-proc.returncode}" if proc.returncode < 0 else f"exit code {proc.returncode}"
    tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-25:])
    return f"child process died with {how}:\n{tail}"


_CHILD = """
import importlib.util, sys, warnings
warnings.simplefilter("ignore")
spec = importlib.util.spec_from_file_location("crash_probe_module", {path!r})
mod = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mod)
for name in {names!r}:
    print("START", name, flush=True)
    try:
        getattr(mod, name)()
    except BaseException:
        pass
    print("END", name, flush=True)
"""


@functools.lru_cache(maxsize=None)
def _crash_reports(path: str, names: tuple[str, ...]) -> dict[str, str]:
    """Run the named zero-argument tests of a module in child processes; name -> crash report."""
    crashed: dict[str, str] = {}
    remaining = list(names)
    while remaining:
        proc = run_python(_CHILD.format(path=path, names=remaining), timeout=300)
        lines = proc.stdout.splitlines()
        ended = {ln.split(" ", 1)[1] for ln in lines if ln.startswith("END ")}
        started = [ln.split(" ", 1)[1] for ln in lines if ln.startswith("START ")]
        if proc.returncode == 0 or not started or started[-1] in ended:
            break
        victim = started[-1]
        crashed[victim] = f"{victim} killed the interpreter in a child process; {describe_exit(proc)}"
        remaining = remaining[remaining.index(victim) + 1 :]
    return crashed


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem):
    """A `crashprone` test that killed a child interpreter fails here, without being run in-process."""
    if pyfuncitem.get_closest_marker("crashprone") is None:
        return None
    module = pyfuncitem.module
    names = tuple(
        item.name
        for item in pyfuncitem.session.items
        if getattr(item, "module", None) is module and item.get_closest_marker("crashprone") is not None
    )
    reports = _crash_reports(str(Path(module.__file__).resolve()), names)
    if pyfuncitem.name in reports:
        pytest.fail(reports[pyfuncitem.name], pytrace=False)
    return None
