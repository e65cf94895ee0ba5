"""Run all of tests/ in chunks, one pytest process each (no xdist: one process may hold a TPU), and
merge what they found; scripts/tpu_tests.sh sets the machine up and calls this.

    python scripts/tpu_tests.py [K/N ...] [--chunks N] [--resume] [--limit S] [--budget S] [--marker EXPR]

K/N runs chunk K of N (several may be given; none: every chunk of --chunks, default 40). The tests are
collected once (kept in the state folder), split into N runs of consecutive tests of about equal count
(consecutive: a module's fixtures are set up once per chunk), and each chunk runs with a time limit
(--limit, default 540 s) under this module as a pytest plugin, which writes each test's start and
outcome to the chunk's progress file as it happens: a chunk that crashes (XLA's TPU compiler aborting)
or runs past the limit still says what it ran and names the test it was running. --resume runs again
only what a chunk has not finished: the tests after its crash (the crashing test is not run again).
--budget (default 530 s, counted from $TPU_TESTS_STARTED, which tpu_tests.sh sets before the machine's
setup) bounds the whole call: a chunk gets what is left of it, and none starts with less than a minute
left (one call of the device tool may run 10 minutes); --resume continues where a call stopped.
--marker EXPR runs only the tests pytest's `-m EXPR` selects (`--marker tpu_fact --chunks 2`: the TPU
facts' 180 tests, which ran past one call on 2026-12-07), with a state of its own beside the suite's.

State (collected ids, each chunk's progress, log and --junitxml): $TPU_TESTS_STATE (default
/tmp/jaxdev-tpu-tests), kept between calls on a warm machine. Results, merged over every chunk in the
state: $OUT/tpu-tests-summary.txt (per file passed / failed / skipped / errors / crashed, the crashes
and time-outs with their test), $OUT/tpu-tests-failures.txt (each failure's place and what its assertion said),
$OUT/tpu-tests.json (every test's outcome).
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
STATE = Path(os.environ.get("TPU_TESTS_STATE", "/tmp/jaxdev-tpu-tests"))

# --- the plugin side: loaded into each chunk's pytest as `-p tpu_tests` -----------------------------------


def _progress_file():
    path = os.environ.get("TPU_TESTS_PROGRESS")
    return open(path, "a", buffering=1) if path else None  # line-buffered: a crash loses nothing written


_progress = None


def _note(line: str) -> None:
    global _progress
    if _progress is None:
        _progress = _progress_file()
    if _progress is not None:
        _progress.write(line + "\n")
        _progress.flush()
        os.fsync(_progress.fileno())


def pytest_runtest_logstart(nodeid, location):
    _note("START " + nodeid)


def pytest_runtest_logreport(report):
    failed = report.outcome == "failed"
    if report.when == "call" or failed or (report.when == "setup" and report.outcome == "skipped"):
        outcome = "error" if failed and report.when != "call" else report.outcome
        text = report.longreprtext.strip().splitlines() if (failed or report.skipped) else []
        detail = text[-1][:400] if text else ""
        if failed:  # what the assertion or exception said (pytest's "E" lines), not only where
            said = [ln[1:].strip() for ln in text if ln.startswith("E ")][-12:]
            detail = (" | ".join(said)[:1500] + " @ " + detail) if said else detail
        _note("END " + json.dumps([report.nodeid, outcome, round(report.duration, 3), detail]))


# --- the driver side ------------------------------------------------------------------------------------


def _python() -> str:
    return os.environ.get("TPU_TESTS_PYTHON", sys.executable)


def collect(marker: str | None = None) -> list[str]:
    """Every test id (those `-m marker` selects, if given), in pytest's order (collected once; kept in
    the state folder)."""
    ids_file = STATE / "collected.txt"
    if ids_file.exists():
        return ids_file.read_text().split("\n")
    selected = ["-m", marker] if marker else []
    proc = subprocess.run(
        [_python(), "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *selected, "tests"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    ids = [line for line in proc.stdout.splitlines() if "::" in line and not line.startswith(" ")]
    if not ids:
        raise SystemExit(f"collecting the tests failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    STATE.mkdir(parents=True, exist_ok=True)
    ids_file.write_text("\n".join(ids))
    return ids


def chunk_ids(ids: list[str], k: int, n: int) -> list[str]:
    """The k-th (1-based) of n runs of consecutive ids of about equal count."""
    return ids[(k - 1) * len(ids) // n : k * len(ids) // n]


def read_progress(path: Path) -> tuple[dict, str | None]:
    """({test id: [outcome, seconds, detail]}, the test started last and not ended, if any)."""
    ended, started = {}, None
    if path.exists():
        for line in path.read_text().splitlines():
            if line.startswith("START "):
                started = line[6:]
            elif line.startswith("END "):
                nodeid, outcome, seconds, detail = json.loads(line[4:])
                # a failed teardown after a passed call is the test's error
                if nodeid not in ended or outcome in ("failed", "error"):
                    ended[nodeid] = [outcome, seconds, detail]
                if nodeid == started:
                    started = None
    return ended, started


def run_chunk(k: int, n: int, ids: list[str], limit: float, resume: bool, budget_cut: bool = False) -> None:
    """Chunk k of n (what is left of it, with `resume`). `budget_cut`: `limit` is what the call's budget
    left, not the chunk's own limit: a test it stops is not counted as timed out (--resume reruns it)."""
    name = f"chunk-{k:03d}-of-{n:03d}"
    progress, marks = STATE / f"{name}.progress", STATE / f"{name}.json"
    done = json.loads(marks.read_text()) if marks.exists() else {"crashed": [], "finished": False}
    if resume and done["finished"]:
        return
    if not resume:
        progress.unlink(missing_ok=True)
        done = {"crashed": [], "finished": False}
    ended, _ = read_progress(progress)
    todo = [i for i in chunk_ids(ids, k, n) if i not in ended and i not in done["crashed"]]
    if todo:
        (STATE / f"{name}.ids").write_text("\n".join(todo))
        env = dict(os.environ, TPU_TESTS_PROGRESS=str(progress))
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT / "scripts"), env.get("PYTHONPATH", "")]))
        cmd = [_python(), "-u", "-X", "faulthandler", "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "tpu_tests"]
        cmd += ["-n", "0"] if _has_xdist() else []
        cmd += [f"--junitxml={STATE / name}.xml", f"@{STATE / name}.ids"]
        began = time.monotonic()
        with open(STATE / f"{name}.log", "a") as log:
            # a session of its own: on a time-out the processes its tests started go with it (one left
            # behind would hold the TPU from the next chunk)
            proc = subprocess.Popen(
                cmd, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
            try:
                code = proc.wait(timeout=limit)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                code = "timeout"
        _, running = read_progress(progress)
        if running is not None and not (code == "timeout" and budget_cut):
            why = "timed out" if code == "timeout" else f"exit {code}"
            done["crashed"].append(running)
            done.setdefault("how", {})[running] = why
        done["finished"] = running is None
        if running is not None and running not in done["crashed"]:
            print(f"{name}: the budget ended it in {running}; --resume goes on from there", flush=True)
        print(f"{name}: {len(todo)} tests, {time.monotonic() - began:.0f} s, exit {code}", flush=True)
    else:
        done["finished"] = True
    marks.write_text(json.dumps(done))


def _has_xdist() -> bool:
    proc = subprocess.run([_python(), "-c", "import xdist"], capture_output=True)
    return proc.returncode == 0


def merge(ids: list[str], n: int, out: Path) -> None:
    """Every chunk's outcomes in the state folder, per file, into $OUT's three files."""
    outcomes, crashes = {}, {}
    for marks in sorted(STATE.glob("chunk-*.json")):
        ended, _ = read_progress(marks.with_suffix(".progress"))
        outcomes.update(ended)
        done = json.loads(marks.read_text())
        for test in done["crashed"]:
            crashes[test] = done.get("how", {}).get(test, "crashed")
            outcomes[test] = ["crashed", 0.0, crashes[test]]
    per_file: dict = collections.defaultdict(collections.Counter)
    for test, (outcome, _, _) in outcomes.items():
        per_file[test.split("::")[0]][outcome] += 1
    columns = ("passed", "failed", "skipped", "error", "crashed")
    total = collections.Counter()
    lines = [f"{'file':<58}" + "".join(f"{c:>9}" for c in columns)]
    for path in sorted(per_file):
        total.update(per_file[path])
        lines.append(f"{path:<58}" + "".join(f"{per_file[path][c]:>9}" for c in columns))
    lines.append(f"{'total (' + str(len(outcomes)) + ' of ' + str(len(ids)) + ' collected)':<58}")
    lines[-1] += "".join(f"{total[c]:>9}" for c in columns)
    for test, how in crashes.items():
        lines.append(f"crash: {test} ({how}: the chunk's process ended while it ran)")
    out.mkdir(parents=True, exist_ok=True)
    (out / "tpu-tests-summary.txt").write_text("\n".join(lines) + "\n")
    failures = [f"{t}: {o[0]}: {o[2]}" for t, o in outcomes.items() if o[0] in ("failed", "error", "crashed")]
    (out / "tpu-tests-failures.txt").write_text("\n".join(failures) + "\n")
    (out / "tpu-tests.json").write_text(json.dumps({"chunks": n, "collected": len(ids), "outcomes": outcomes}))
    print("\n".join(lines[-1 - len(crashes) :]))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("chunks", nargs="*", help="K/N: chunk K of N (default: every chunk of --chunks)")
    parser.add_argument("--chunks", dest="n", type=int, default=40, help="how many chunks when none is named")
    parser.add_argument("--resume", action="store_true", help="run only what the named chunks have not finished")
    parser.add_argument("--limit", type=float, default=540, help="seconds a chunk may run (default 540)")
    parser.add_argument("--budget", type=float, default=530, help="seconds for the whole call (default 530)")
    parser.add_argument("--marker", help="only the tests pytest's -m EXPR selects (a state folder of their own)")
    args = parser.parse_args()
    if args.marker:
        global STATE
        STATE = STATE / ("marker-" + "".join(c if c.isalnum() else "_" for c in args.marker))
    wanted = []
    for spec in args.chunks:
        k, _, n = spec.partition("/")
        if not (k.isdigit() and n.isdigit() and 1 <= int(k) <= int(n)):
            parser.error(f"a chunk is K/N with 1 <= K <= N, not {spec!r}")
        wanted.append((int(k), int(n)))
    wanted = wanted or [(k, args.n) for k in range(1, args.n + 1)]
    began = float(os.environ.get("TPU_TESTS_STARTED") or time.time())
    ids = collect(args.marker)
    for k, n in wanted:
        left = args.budget - (time.time() - began)
        if left < 60:
            print(f"chunk {k}/{n} and after: not started, {left:.0f} s of the budget left (--resume goes on)")
            break
        run_chunk(k, n, ids, min(args.limit, left), args.resume, budget_cut=left < args.limit)
    merge(ids, wanted[0][1], Path(os.environ.get("OUT") or "tpu-tests-out"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
