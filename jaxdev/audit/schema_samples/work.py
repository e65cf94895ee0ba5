"""Direct trials in the auditor's worker pool (runner.py), one overload per task with a time
limit: a crash or a hang costs that overload, not the run. The worker says which phase a trial is
in (cpu: searching a candidate; jax: running it), so a CPU kernel that crashed or hung (untriable)
is told from a jax one (crash, timeout)."""

from __future__ import annotations

import os
from collections.abc import Callable

from jaxdev.audit import runner
from jaxdev.audit.facts.aten import UNTRIABLE
from jaxdev.audit.schema_samples.trial import short, trial

DEFAULT_TIMEOUT_S = 30.0
MAX_FAILED_STARTS = 3  # in a row: a worker that cannot import jaxdev at all is an error, once is a hiccup


class TrialTask(runner.Task):
    """One overload's trial: its donors, the phase it is in, and where its verdict goes."""

    def __init__(self, name: str, donors, on_result: Callable[[str, dict], None]):
        self.name = name
        self.donors = donors
        self.on_result = on_result
        self.phase = "cpu"

    def request(self) -> tuple:
        self.phase = "cpu"
        return ("trial", self.name, self.donors)

    def progress(self, msg: tuple) -> None:
        self.phase = msg[1]  # ("phase", cpu | jax)

    def done(self, verdict: dict) -> None:
        self.on_result(self.name, verdict)

    def lost(self, status: str, reason: str) -> bool:
        if status == "timeout":
            reason += f" ({self.phase})"
        if self.phase == "cpu":
            verdict = {"status": "untriable", "category": "cpu_crash", "reason": f"{UNTRIABLE['cpu_crash']}: {reason}"}
        else:
            verdict = {"status": status, "reason": reason}
        self.on_result(self.name, verdict)
        return False


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
    tasks = [TrialTask(name, (donors or {}).get(name, ()), on_result) for name in names]
    env = runner.worker_env(env, cache_dir)
    runner.run(tasks, runner.Pool(__name__, jobs, timeout, env, "trial worker", MAX_FAILED_STARTS))


# ---------------------------------------------------------------------------------------------
# The worker's side (runner._worker_main imports this module by name)


def prepare() -> None:
    import jaxdev  # noqa: F401
    from jaxdev.audit import samples

    if os.environ.get(samples.PLUGINS_ENV):
        samples.op_db()  # plugins define their ops (once: op_db is cached)


def serve(msg: tuple, send) -> None:
    _, name, donors = msg
    try:
        verdict = trial(name, lambda phase: send.send(("phase", phase)), donors)
    except Exception as e:  # an auditor bug on an odd overload must not stop the run
        verdict = {"status": "exception", "reason": f"auditor: {short(e)}"}
    send.send(("done", verdict))
