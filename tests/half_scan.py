"""pytest plugin: every program XLA compiles during a test run, checked with tests/half_programs.py's
structural check; a test fails when a program it compiled has a half-precision rounding that can
differ between CPUs in an instruction jaxdev's own code wrote (issue 41). The proof that stands in
for a CPU with native float16 (AVX512-FP16), which no --xla_cpu_max_isa level can give a host that
lacks it, and which the ISA caps of scripts/isa_matrix.sh cannot take away from a host that has it.

    PYTHONPATH=tests JAXDEV_CACHE_DIR=off .venv/bin/python -m pytest -p half_scan tests/ops/test_special.py

JAXDEV_CACHE_DIR=off: a program loaded from a compilation cache is not compiled, so not seen. An
instruction is jaxdev's when the innermost Python frame that wrote it is a module of the jaxdev
package imported (jaxdev/audit/ excepted: the auditor's comparisons are no kernel); a test's own jnp code is not
judged. A program compiled outside a test (collection, a module fixture's teardown) is reported at the
end of the run, which then fails.
"""

from __future__ import annotations

import contextlib
import os
import re

import half_programs
import pytest
from jax._src import compiler

import jaxdev

_FOUND: list[str] = []
_SECTION = re.compile(r"^(FileNames|FunctionNames|FileLocations|StackFrames)$")
_ENTRY = re.compile(r"^(\d+) (.*)$")
_FRAME = re.compile(r"stack_frame_id=(\d+)")


def _frame_files(hlo: str) -> dict[str, str]:
    """stack_frame_id -> the file of that (innermost) frame, from the tables that head an HLO module's text."""
    tables: dict[str, dict[str, str]] = {}
    section = None
    for line in hlo.splitlines():
        if line.startswith("%") or line.startswith("ENTRY"):
            break
        if _SECTION.match(line):
            section = tables.setdefault(line, {})
        elif section is not None and (entry := _ENTRY.match(line)):
            section[entry.group(1)] = entry.group(2)

    def field(text: str, name: str) -> str:
        found = re.search(rf"{name}=(\d+)", text)
        return found.group(1) if found else ""

    names = {k: v.strip('"') for k, v in tables.get("FileNames", {}).items()}
    locations = {k: field(v, "file_name_id") for k, v in tables.get("FileLocations", {}).items()}
    frames = tables.get("StackFrames", {})
    return {k: names.get(locations.get(field(v, "file_location_id"), ""), "") for k, v in frames.items()}


_PACKAGE = os.path.dirname(os.path.abspath(jaxdev.__file__)) + os.sep
_AUDIT = os.path.join(_PACKAGE, "audit") + os.sep


def _jaxdevs(path: str) -> bool:
    """Whether `path` is a module of the jaxdev package in use, not of its auditor."""
    path = os.path.abspath(path) if path else ""
    return path.startswith(_PACKAGE) and not path.startswith(_AUDIT)


def jaxdev_hazards(hlo: str) -> list[str]:
    """half_programs.hazards(hlo) of the instructions jaxdev's code wrote, each with that code's file."""
    files = _frame_files(hlo)
    found = []
    for hazard in half_programs.hazards(hlo):
        frame = _FRAME.search(hazard)
        source = files.get(frame.group(1), "") if frame else ""
        if _jaxdevs(source):
            found.append(f"{os.path.relpath(source, _PACKAGE)}: {re.sub(r', metadata=.*', '', hazard)}")
    return found


_UNJUDGED: list[None] = []


@contextlib.contextmanager
def unjudged():
    """Programs compiled inside are not judged: a test of this check that compiles a hazard on purpose."""
    _UNJUDGED.append(None)
    try:
        yield
    finally:
        _UNJUDGED.pop()


def _scanning(compile_and_load):
    def scanned(*args, **kwargs):
        executable = compile_and_load(*args, **kwargs)
        for module in [] if _UNJUDGED else executable.hlo_modules():
            text = module.to_string()
            if " f16[" in text or " bf16[" in text:
                _FOUND.extend(f"{module.name}: {h}" for h in jaxdev_hazards(text))
        return executable

    return scanned


def pytest_configure(config):
    compiler.backend_compile_and_load = _scanning(compiler.backend_compile_and_load)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    result = yield
    if _FOUND:
        found = sorted(set(_FOUND))
        _FOUND.clear()
        pytest.fail(
            f"{len(found)} host-dependent half rounding(s) in jaxdev's programs:\n" + "\n".join(found[:20]),
            pytrace=False,
        )
    return result


def pytest_sessionfinish(session, exitstatus):
    if _FOUND:
        print("\nhalf_scan: host-dependent half roundings compiled outside a test:\n" + "\n".join(sorted(set(_FOUND))))
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
