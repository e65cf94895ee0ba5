"""Direct trials in worker processes (`python -m jaxdev.audit.schema_samples.work IN_FD OUT_FD`),
one overload at a time with a time limit: a crash or a hang costs that overload, not the run."""

from __future__ import annotations

import os
import sys
import time
from collections import deque
from collections.abc import Callable
from multiprocessing.connection import wait

from jaxdev.audit import runner
from jaxdev.audit.facts.aten import UNTRIABLE
from jaxdev.audit.schema_samples.trial import short, trial

DEFAULT_TIMEOUT_S = 30.0
MAX_FAILED_STARTS = 3


class _Worker(runner.WorkerProcess):
    module = "jaxdev.audit.schema_samples.work"

    def __init__(self, env: dict):
        super().__init__(env)
        self.name: str | None = None
        self.phase = "cpu"


def _lost(phase: str, status: str, reason: str) -> dict:
    if phase == "cpu":
        return {"status": "untriable", "category": "cpu_crash", "reason": f"{UNTRIABLE['cpu_crash']}: {reason}"}
    return {"status": status, "reason": reason}


def run_trials(
    names: list[str],
    *,
    jobs: int = 1,
    timeout: float = DEFAULT_TIMEOUT_S,
    on_result: Callable[[str, dict], None],
    env: dict | None = None,
    cache_dir: str | None = None,
    donors: dict | None = None,
) -> None:
    """Try each overload in worker processes; `on_result(name, verdict)` as each finishes.
    `donors`: overload -> [(sibling overload, OpInfo reaching it)] (see donor_candidates)."""
    from jaxdev.audit import AuditError

    env = runner.worker_env(env, cache_dir)
    queue = deque(names)
    workers: list[_Worker] = []
    failed_starts = 0  # in a row: a worker that cannot import jaxdev at all is an error, once is a hiccup

    def start_failed(w: _Worker, why: str) -> None:
        nonlocal failed_starts
        w.kill()
        workers.remove(w)
        failed_starts += 1
        if failed_starts >= MAX_FAILED_STARTS:
            raise AuditError(f"a trial worker failed to start {failed_starts} times in a row ({why})")

    try:
        while queue or any(w.name for w in workers):
            while len(workers) < jobs and len(workers) < len(queue) + sum(1 for w in workers if w.name):
                workers.append(_Worker(env))
            if not workers:
                break
            ready = wait(
                [w.recv for w in workers], timeout=max(0.05, min(w.deadline for w in workers) - time.monotonic())
            )
            now = time.monotonic()
            for w in list(workers):
                if w.recv in ready:
                    try:
                        msg = w.recv.recv()
                    except (EOFError, OSError):
                        if not w.ready:
                            start_failed(w, w.died_how())
                            continue
                        if w.name:
                            on_result(w.name, _lost(w.phase, "crash", w.died_how()))
                        w.kill()
                        workers.remove(w)
                        continue
                    w.deadline = now + timeout
                    if msg[0] == "ready":
                        w.ready, failed_starts = True, 0
                    elif msg[0] == "phase":
                        w.phase = msg[1]
                        continue
                    elif msg[0] == "result":
                        on_result(w.name, msg[1])
                    w.name = None
                    if queue:
                        w.name, w.phase = queue.popleft(), "cpu"
                        w.send.send(("trial", w.name, (donors or {}).get(w.name, ())))
                        w.deadline = now + timeout
                    else:
                        w.send.send(("stop",))
                        w.kill()
                        workers.remove(w)
                elif now > w.deadline:
                    if not w.ready:
                        start_failed(w, f"no answer within {runner.STARTUP_TIMEOUT_S:g} s")
                        continue
                    on_result(w.name, _lost(w.phase, "timeout", f"no answer within {timeout:g} s ({w.phase})"))
                    w.kill()
                    workers.remove(w)
    finally:
        for w in workers:
            w.kill()


def _worker_main(fd_in: int, fd_out: int) -> None:
    recv, send = runner.worker_connections(fd_in, fd_out)
    import jaxdev  # noqa: F401
    from jaxdev.audit import samples

    if os.environ.get(samples.PLUGINS_ENV):
        samples.op_db()  # plugins define their ops (once: op_db is cached)
    send.send(("ready",))
    while True:
        try:
            msg = recv.recv()
        except EOFError:
            return
        if msg[0] == "stop":
            return
        name, donors = msg[1], msg[2]
        try:
            verdict = trial(name, lambda phase: send.send(("phase", phase)), donors)
        except Exception as e:  # an auditor bug on an odd overload must not stop the run
            verdict = {"status": "exception", "reason": f"auditor: {short(e)}"}
        send.send(("result", verdict))


if __name__ == "__main__":
    _worker_main(int(sys.argv[1]), int(sys.argv[2]))
