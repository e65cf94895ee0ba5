"""A pytest plugin for the suites runner: picks a suite's tests and writes every test's result as it
goes, so a run cut short by the time limit, or a process that dies in a test, keeps what it found.

Loaded with `-p suites_plugin` (its folder on PYTHONPATH); configured by the environment so that
nothing in PyTorch's files or pytest's arguments changes:

    SUITES_OUT=FILE          results, one JSON line per test phase (and one when a test starts)
    SUITES_CLASSES=A,B       keep tests of these classes only (their names without the device suffix)
    SUITES_PREFIXES=p,q      keep test methods whose names start with one of these
    SUITES_SELECT=FILE       keep only these neutral keys (one a line), when given
    SUITES_SKIP=FILE         drop these neutral keys (tests an earlier, crashed process already reached)
    SUITES_DEADLINE=T        stop starting tests after this time.time() (and write SUITES_OUT.stopped
                             when tests were left; a last test that ends past T cuts nothing)
    SUITES_COLLECT=FILE      write the kept tests' keys there and run nothing
    SUITES_COMPAT=0          supply no missing torch.testing._internal names (suites_compat.py)
"""

from __future__ import annotations

import json
import os
import sys
import time

import pytest
import suites_compat
from suites_results import neutral_key


def _env_list(name: str) -> list[str]:
    return [v for v in os.environ.get(name, "").split(",") if v]


def _env_keys(name: str) -> set[str] | None:
    path = os.environ.get(name)
    if not path:
        return None
    with open(path) as f:
        return {line.strip() for line in f if line.strip()}


def _keep(item, classes, prefixes, select, skip) -> bool:
    key = neutral_key(item.nodeid)
    if getattr(item, "cls", None) is None or not hasattr(item.cls, "device_type"):
        return False  # not a device-generic test: it runs alike whatever the device
    if classes and key.split("::")[-2] not in classes:
        return False
    if prefixes and not item.name.startswith(tuple(prefixes)):
        return False
    if select is not None and key not in select:
        return False
    return skip is None or key not in skip


def pytest_configure(config):
    """Before the test files are imported: the names they need that the installed torch lacks."""
    if os.environ.get("SUITES_COMPAT") == "0":
        return
    source = ""
    for arg in config.args:
        path = arg.split("::")[0]
        if path.endswith(".py") and os.path.exists(path):
            with open(path, encoding="utf-8") as f:
                source += f.read()
    supplied = suites_compat.install(source)
    if supplied:
        print(f"suites_compat: supplied {', '.join(supplied)} (absent from the installed torch)", file=sys.stderr)


def pytest_collection_modifyitems(session, config, items):
    classes, prefixes = _env_list("SUITES_CLASSES"), _env_list("SUITES_PREFIXES")
    select, skip = _env_keys("SUITES_SELECT"), _env_keys("SUITES_SKIP")
    kept = [it for it in items if _keep(it, classes, prefixes, select, skip)]
    kept_ids = {id(it) for it in kept}
    config.hook.pytest_deselected(items=[it for it in items if id(it) not in kept_ids])
    items[:] = kept
    collect = os.environ.get("SUITES_COLLECT")
    if collect:
        with open(collect, "w") as f:
            f.writelines(neutral_key(it.nodeid) + "\n" for it in kept)
        items[:] = []


def _write(record: dict) -> None:
    """Appends one record and closes the file: a process killed at any point loses at most that line."""
    path = os.environ.get("SUITES_OUT")
    if path:
        with open(path, "a") as f:
            f.write(json.dumps(record) + "\n")


def pytest_runtest_logstart(nodeid, location):
    _write({"key": neutral_key(nodeid), "nodeid": nodeid, "when": "start", "t": time.time()})


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    record = {
        "key": neutral_key(item.nodeid),
        "nodeid": item.nodeid,
        "when": report.when,
        "outcome": report.outcome,
        "duration": report.duration,
    }
    if call.excinfo is not None and report.outcome == "failed":
        record["exc_type"] = call.excinfo.type.__name__
        record["message"] = str(call.excinfo.value)[:2000]
    elif report.outcome == "failed":  # an unexpected success, or a failure pytest made itself
        record["exc_type"] = "Failure"
        record["message"] = (report.longreprtext.strip().splitlines() or [""])[-1][:2000]
    elif report.outcome == "skipped" and isinstance(report.longrepr, tuple):
        record["message"] = str(report.longrepr[2])[:500]
    _write(record)


def pytest_runtest_logfinish(nodeid, location):
    deadline = float(os.environ.get("SUITES_DEADLINE", "inf"))
    items = getattr(_session, "items", None) or []
    if time.time() > deadline and not (items and items[-1].nodeid == nodeid):
        _session.shouldstop = "the suites runner's time limit"
        if os.environ.get("SUITES_OUT"):
            with open(os.environ["SUITES_OUT"] + ".stopped", "w"):
                pass


_session = None


def pytest_sessionstart(session):
    global _session
    _session = session
