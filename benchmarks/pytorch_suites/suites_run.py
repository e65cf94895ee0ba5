"""One pass of one suite on one device: PyTorch's test file under pytest in a child process, with the
suites plugin choosing the tests and recording each result as it comes.

A process that dies inside a test (an abort, a segfault) is started again past the tests already
reached, so one crash costs one test, not the rest of the suite; the crashed test counts as a
failure. The time limit is checked between tests (the plugin stops starting new ones); a test still
running past it plus a grace period is killed and not counted.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass

from suites_results import UNREACHED, read_outcomes
from suites_source import SourceError, Suite

HERE = os.path.dirname(os.path.abspath(__file__))
GRACE_S = 120  # a test already running at the deadline gets this long to finish
MAX_RESTARTS = 30
_DROPPED_ENV = ("CI", "PYTEST_ADDOPTS", "PYTORCH_TESTING_DEVICE_ONLY_FOR", "PYTORCH_TESTING_DEVICE_EXCEPT_FOR")


@dataclass
class PassResult:
    device: str
    label: str  # "cpu", "jax cold", "jax warm"
    results: str  # the JSON-lines file
    wall_s: float = 0.0  # the child processes', start to end: imports and collection included
    tests_s: float = 0.0  # the tests' own time (pytest's setup + call + teardown durations)
    restarts: int = 0
    stopped_by_time: bool = False


def device_env(device: str, cache_dir: str | None) -> dict[str, str]:
    """The child's environment. CPU runs without jaxdev (TORCH_DEVICE_BACKEND_AUTOLOAD=0): the
    reference is PyTorch as it is. CI is unset: PyTorch's TestCase would otherwise fetch its lists of
    disabled tests over the network."""
    env = {k: v for k, v in os.environ.items() if k not in _DROPPED_ENV}
    env["PYTORCH_TESTING_DEVICE_ONLY_FOR"] = device
    env["PYTHONPATH"] = os.pathsep.join(p for p in (HERE, env.get("PYTHONPATH", "")) if p)
    if device == "cpu":
        env["TORCH_DEVICE_BACKEND_AUTOLOAD"] = "0"
    elif cache_dir is not None:
        env["JAXDEV_CACHE_DIR"] = cache_dir
    return env


def _pytest_command(suite: Suite, k_expr: str | None) -> list[str]:
    cmd = [sys.executable, "-m", "pytest", suite.file, "-q", "-p", "no:cacheprovider", "-p", "suites_plugin"]
    cmd += ["-o", "addopts=", "--no-header", "-rN", "--tb=no", "-W", "ignore::DeprecationWarning"]
    return cmd + (["-k", k_expr] if k_expr else [])


def _seen_keys(results: str) -> set[str]:
    if not os.path.exists(results):
        return set()
    with open(results) as f:
        return set(read_outcomes(f))


def _mark_unreached(results: str, key_nodeid: tuple[str, str]) -> None:
    with open(results, "a") as f:
        f.write(json.dumps({"key": key_nodeid[0], "nodeid": key_nodeid[1], "when": "teardown", "outcome": UNREACHED}))
        f.write("\n")


def _crashed(results: str) -> dict[str, str]:
    """The tests a dead process was running (started, never torn down): key -> node id."""
    if not os.path.exists(results):
        return {}
    with open(results) as f:
        return {o.key: o.nodeid for o in read_outcomes(f).values() if o.outcome == "crashed"}


def run_pass(suite: Suite, files_dir: str, run_dir: str, result: PassResult, opts) -> PassResult:
    """Runs the pass into result.results (appending), restarting past crashes, within opts.time_limit."""
    env = device_env(result.device, opts.cache_dir_for(result))
    env["SUITES_OUT"] = result.results
    env["SUITES_CLASSES"] = ",".join(suite.classes)
    env["SUITES_PREFIXES"] = ",".join(suite.prefixes)
    if opts.select_file:
        env["SUITES_SELECT"] = opts.select_file
    start = time.time()
    env["SUITES_DEADLINE"] = str(start + opts.time_limit)
    log_path = os.path.join(run_dir, f"{suite.name}-{result.label.replace(' ', '-')}.log")
    skip_path = result.results + ".skip"
    stopped_mark = result.results + ".stopped"  # the plugin's: tests were left at the time limit
    if os.path.exists(stopped_mark):
        os.remove(stopped_mark)
    known = set(_crashed(result.results))  # crashes of an earlier pass into the same file, if any
    while True:
        remaining = start + opts.time_limit + GRACE_S - time.time()
        with open(log_path, "a") as log:
            try:
                proc = subprocess.run(
                    _pytest_command(suite, opts.k), cwd=files_dir, env=env, stdout=log, stderr=subprocess.STDOUT,
                    timeout=max(remaining, 1),
                )  # fmt: skip
                code = proc.returncode
            except subprocess.TimeoutExpired:
                code = None
        new = {k: v for k, v in _crashed(result.results).items() if k not in known}
        if code is None:
            result.stopped_by_time = True
            for key, nodeid in new.items():
                _mark_unreached(result.results, (key, nodeid))
            break
        if not new or result.restarts >= MAX_RESTARTS:
            result.stopped_by_time = os.path.exists(stopped_mark)
            break
        result.restarts += 1  # the process died in a test: go on past everything reached
        known.update(new)
        with open(skip_path, "w") as f:
            f.writelines(key + "\n" for key in sorted(_seen_keys(result.results)))
        env["SUITES_SKIP"] = skip_path
    result.wall_s = time.time() - start
    return result


def collect(suite: Suite, files_dir: str, out_path: str, k_expr: str | None) -> list[str]:
    """The suite's tests on CPU, as neutral keys (no test runs)."""
    env = device_env("cpu", None)
    env.update(SUITES_COLLECT=out_path, SUITES_CLASSES=",".join(suite.classes))
    env["SUITES_PREFIXES"] = ",".join(suite.prefixes)
    command = [*_pytest_command(suite, k_expr), "--tb=short"]  # a collection error's cause, if any
    proc = subprocess.run(command, cwd=files_dir, env=env, capture_output=True, text=True)
    if not os.path.exists(out_path) or proc.returncode not in (0, 5):  # 5: pytest collected nothing
        raise SourceError(f"pytest could not collect {suite.file} on CPU (exit {proc.returncode}): {_error_line(proc)}")
    with open(out_path) as f:
        return [line.strip() for line in f if line.strip()]


def _error_line(proc) -> str:
    """The line of pytest's output that says why collection failed (an ImportError, ...)."""
    lines = (proc.stdout + proc.stderr).strip().splitlines()
    errors = [x[1:].strip() for x in lines if x.startswith("E ")]
    hint = " (test_nn.py needs hypothesis: see README.md)" if "hypothesis" in "".join(errors) else ""
    return (errors[0] + hint) if errors else (lines[-1] if lines else "no output")
