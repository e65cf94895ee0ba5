"""Direct trials in the auditor's worker pool (runner.py), one overload per task with a time
limit: a crash or a hang costs that overload, not the run. The worker says which phase a trial is
in (cpu: searching a candidate; jax: running it), so a CPU kernel that crashed or hung (untriable)
is told from a jax one (crash, timeout)."""

from __future__ import annotations

import os
from collections.abc import Callable

from jaxdev.audit import runner
from jaxdev.audit.facts.aten import UNTRIABLE
from jaxdev.audit.messages import Done, Phase, TrialRequest
from jaxdev.audit.model import Platform, Verdict
from jaxdev.audit.schema_samples.trial import short, trial

DEFAULT_TIMEOUT_S = 30.0
MAX_FAILED_STARTS = 3  # in a row: a worker that cannot import jaxdev at all is an error, once is a hiccup


class TrialTask(runner.Task):
    """One overload's trial: its donors, the phase it is in, and where its verdict goes."""

    def __init__(self, name: str, donors, on_result: Callable[[str, Verdict], None]):
        self.name = name
        self.donors = donors
        self.on_result = on_result
        self.phase = "cpu"

    def request(self) -> TrialRequest:
        self.phase = "cpu"
        return TrialRequest(self.name, tuple(self.donors))

    def progress(self, msg: Phase) -> None:
        self.phase = msg.phase

    def done(self, verdict: Verdict) -> None:
        self.on_result(self.name, verdict)

    def lost(self, status: str, reason: str) -> bool:
        if status == "timeout":
            reason += f" ({self.phase})"
        if self.phase == "cpu":
            verdict = Verdict("untriable", f"{UNTRIABLE['cpu_crash']}: {reason}", category="cpu_crash")
        else:
            verdict = Verdict(status, reason)
        self.on_result(self.name, verdict)
        return False


def run_trials(
    names: list[str],
    *,
    jobs: int = 1,
    timeout: float = DEFAULT_TIMEOUT_S,
    on_result: Callable[[str, Verdict], None],
    env: dict | None = None,
    cache_dir: str | None = None,
    donors: dict | None = None,
    platform: Platform | None = None,
    peer=None,
) -> None:
    """Try each overload in worker processes; `on_result(name, verdict)` as each finishes.
    `donors`: overload -> [(sibling overload, OpInfo reaching it)] (see donor_candidates);
    `platform`: the one the workers must run on (None: any); `peer`: the peer backend they try
    the overloads on instead of jaxdev (a peers.Selected; None: jaxdev)."""
    tasks = [TrialTask(name, (donors or {}).get(name, ()), on_result) for name in names]
    env = runner.worker_env(env, cache_dir)
    name, argv = "trial worker", runner.JAXDEV_WORKER
    if peer is not None:
        env, name, argv = peer.worker_env(env), f"{peer.name} trial worker", peer.argv
    pool = runner.Pool(__name__, jobs, timeout, env, name, MAX_FAILED_STARTS, platform, argv)
    runner.run(tasks, pool)


# ---------------------------------------------------------------------------------------------
# The worker's side (runner.worker_main imports this module by name)


def prepare() -> None:
    from jaxdev.audit import samples  # the device under test is loaded: jaxdev's by `-m jaxdev.audit.runner`

    if os.environ.get(samples.PLUGINS_ENV):
        samples.op_db()  # plugins define their ops (once: op_db is cached)


def serve(msg: TrialRequest, send) -> None:
    try:
        verdict = trial(msg.name, lambda phase: send.send(Phase(phase)), msg.donors)
    except Exception as e:  # an auditor bug on an odd overload must not stop the run
        verdict = Verdict("exception", f"auditor: {short(e)}")
    send.send(Done(verdict))
