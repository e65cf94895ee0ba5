"""pytest setup for the jaxdev device tests (helpers: tests/jaxdev_testing.py).

Layout: a test file per package module, named after it (tests/README.md): tests/ops/test_indexing.py
for jaxdev/ops/indexing.py, tests/ops/test_linalg.py for the sub-package jaxdev/ops/linalg/.

* `fallback_mode` fixture: set JAXDEV_FALLBACK for one test, with fresh fallback counters.
* `crashprone` marker: a test that may kill the interpreter (a segfault reading a fake storage
  pointer) is first run in a child process; if it crashes there it fails here with the child's
  report instead of taking the whole suite down.
* `cpu_fact(reason)` marker: a test that leans on a fact of XLA's CPU backend (its flushing of
  subnormals, its functions' bits, a dtype it has); on another platform (`PLATFORM`, where jaxdev's
  arrays live: a TPU) it is skipped, naming the fact. jaxdev_testing.cpu_fact does it inside a test.
* `tpu_fact(reason)` marker: a test of a fact of XLA's TPU backend (an abort, a raw error), run on CPU
  under the TPU's policy; `pytest -m tpu_fact tests` selects them for a TPU run.
* A test that fails because the platform refuses a dtype (jaxdev.PlatformDtypeError: complex128 on a
  TPU), or because its XLA lacks a kernel that the forbidden fallback would serve (fallback.PlatformGapError:
  a TPU's SVD, float64 LU, eig), is reported skipped, naming that fact; on CPU nothing is refused.
* The suite runs in per-op eager mode on every platform unless JAXDEV_EAGER says otherwise.
* JAXDEV_TPU_COMPILE=1 (with libtpu on the path: jaxdev/audit/deviceless.py) runs the suite in a stand-in
  for a TPU: the TPU's formulations, every program compiled by XLA's TPU compiler too.
"""

from __future__ import annotations

import contextlib
import functools
import os
from pathlib import Path

import pytest
import torch

if os.environ.get("JAXDEV_TPU_COMPILE"):  # a stand-in for a TPU (scripts/tpu_tests.sh --without-chip)
    from jaxdev.audit import deviceless

    deviceless.install()  # before jaxdev_testing asks the platform

from jaxdev_testing import PLATFORM, describe_exit, run_python

import jaxdev
from jaxdev import fallback

if not os.environ.get("JAXDEV_EAGER"):
    # The suite is per-op eager's wherever it runs (JAXDEV_EAGER=fused runs it fused, skipping per-op-only
    # tests): an accelerator's default, fused, is otherwise set at the first tensor, after collection
    # read "op", so per-op-only tests ran fused on the TPU stand-in (a chunked draw's test failed so).
    jaxdev.eager_mode("op")

if PLATFORM != "cpu":
    # One process may hold a TPU: the child processes tests start run on JAX's CPU backend (this
    # process's backend is up already, so its own choice stands).
    os.environ["JAX_PLATFORMS"] = "cpu"

# XLA executables are bounded by jaxdev itself (jaxdev/programs/executables.py): the full suite compiles over
# 10,000 kernels, past the memory-map limit that once crashed it.


def pytest_configure(config):
    config.addinivalue_line("markers", "crashprone: run first in a child process, so a segfault fails only this test")
    config.addinivalue_line(
        "markers",
        "per_op_mode(why): tests per-op eager's own mechanics or timing of errors (an error raised at the op,"
        " a program cache, buffer donation); under JAXDEV_EAGER=fused it is skipped, saying why",
    )
    config.addinivalue_line(
        "markers", "cpu_fact(reason): leans on a fact of XLA's CPU backend; skipped on other platforms, naming it"
    )
    config.addinivalue_line(
        "markers",
        "tpu_fact(reason): a regression test of a TPU fact (capabilities.PROGRAM_FACTS), run here under the"
        " TPU's policy and as it is on a TPU (`pytest -m tpu_fact tests` there first)",
    )


def pytest_collection_modifyitems(config, items):
    """Under JAXDEV_EAGER=fused (the CI's fused-mode run of a subset), per-op-only tests are skipped; off
    XLA's CPU backend, tests of its facts are."""
    fused = jaxdev.get_eager_mode() == "fused"
    for item in items:
        marker = item.get_closest_marker("per_op_mode")
        if fused and marker is not None:
            item.add_marker(pytest.mark.skip(reason="per-op mode only: " + marker.args[0]))
        fact = item.get_closest_marker("cpu_fact")
        if PLATFORM != "cpu" and fact is not None:
            item.add_marker(pytest.mark.skip(reason=f"a fact of XLA's CPU backend, not of {PLATFORM}: {fact.args[0]}"))


@pytest.fixture
def per_op_after():
    """For the fused-mode test files (`pytestmark = pytest.mark.usefixtures("per_op_after")`): each test
    ends back in per-op mode, which flushes what a failed test left pending, and synced."""
    yield
    jaxdev.eager_mode("op")
    torch.jax.synchronize()


@pytest.fixture(autouse=True)
def _settle_fused_mode():
    """In fused mode, a test's pending work (and a value error it deferred) ends with the test; and the
    next test starts in the mode this one started in (tests that switch modes leave "op" behind: the
    CI's JAXDEV_EAGER=fused run had gone on in per-op mode after tests/test_fused.py)."""
    mode = jaxdev.get_eager_mode()
    yield
    if jaxdev.get_eager_mode() == "fused":
        jaxdev.eager_modes.flush()
        # a deferred error of a test that ended already is that test's, not the next one's
        with contextlib.suppress(Exception):
            torch.jax.synchronize()
    if jaxdev.get_eager_mode() != mode:
        jaxdev.eager_mode(mode)


@pytest.fixture
def no_fallback(monkeypatch):
    """JAXDEV_FALLBACK=error for one test, and no op may have reached the CPU fallback by its end
    (modules use it for all their tests: `pytestmark = pytest.mark.usefixtures("no_fallback")`)."""
    monkeypatch.setenv("JAXDEV_FALLBACK", "error")
    jaxdev.reset_fallback_counts()
    yield
    assert jaxdev.fallback_counts() == {}


@pytest.fixture
def fallback_mode(monkeypatch):
    """Set JAXDEV_FALLBACK for one test (and start with fresh counters)."""

    def set_mode(mode):
        monkeypatch.setenv("JAXDEV_FALLBACK", mode)
        jaxdev.reset_fallback_counts()

    yield set_mode
    jaxdev.reset_fallback_counts()


# --- crash isolation ---------------------------------------------------------------------------------

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


@functools.cache
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


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """A failure whose cause is a dtype the platform refuses (a TPU fact: complex128 there) is a skip
    that names it: item 4 of issue 38, 'a skip names a TPU fact (a dtype the chip lacks)'."""
    outcome = yield
    report = outcome.get_result()
    refusal = _platform_refusal(call.excinfo.value) if call.excinfo is not None and report.failed else None
    if refusal is not None:
        report.outcome = "skipped"
        report.longrepr = (str(item.path), item.location[1] or 0, f"Skipped: what this platform lacks: {refusal}")


def _platform_refusal(error: BaseException | None) -> str | None:
    seen = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        if isinstance(error, (jaxdev.PlatformDtypeError, fallback.PlatformGapError)):
            return str(error)  # a dtype it refuses, or a kernel its XLA lacks that a forbidden fallback would serve
        error = error.__cause__ or error.__context__
    return None


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
