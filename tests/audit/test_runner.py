"""The auditor's one worker pool (runner.py), with a test server (pool_server.py): answers,
progress, a crash and a hang charged to their task only, a resumed task, and a worker that cannot
start being one clear error."""

import os

import pytest
from pool_server import Crash, Echo, Hang, Progress

from jaxdev.audit import AuditError, runner
from jaxdev.audit.model import CPU, Platform

HERE = os.path.dirname(__file__)


class Probe(runner.Task):
    def __init__(self, request, resumes=0):
        self.msg, self.resumes = request, resumes
        self.steps, self.result, self.losses = [], None, []

    def request(self):
        return self.msg

    def progress(self, msg):
        self.steps.append(msg.index)

    def done(self, payload):
        self.result = payload

    def lost(self, status, reason):
        self.losses.append((status, reason))
        if len(self.losses) <= self.resumes:
            self.msg = Echo("resumed")
            return True
        return False


def _pool(jobs=2, timeout=5.0, platform=None, **env):
    full = runner.worker_env({**os.environ, "PYTHONPATH": HERE + os.pathsep + os.environ.get("PYTHONPATH", ""), **env})
    return runner.Pool("pool_server", jobs, timeout, full, "test worker", max_failed_starts=2, platform=platform)


def test_answers_progress_and_losses_each_charged_to_their_task():
    tasks = {
        "echo": Probe(Echo(1)),
        "progress": Probe(Progress(3, "p")),
        "crash": Probe(Crash()),
        "hang": Probe(Hang()),
        "resumed": Probe(Crash(), resumes=1),
    }
    runner.run(list(tasks.values()), _pool(timeout=3.0, platform=CPU))
    assert tasks["echo"].result == 1 and not tasks["echo"].losses
    assert tasks["progress"].steps == [0, 1, 2] and tasks["progress"].result == "p"
    assert tasks["crash"].losses == [("crash", "worker killed by signal SIGKILL")] and tasks["crash"].result is None
    assert tasks["hang"].losses == [("timeout", "no answer within 3 s")]
    assert len(tasks["resumed"].losses) == 1 and tasks["resumed"].result == "resumed"  # in a fresh worker


def test_a_worker_that_cannot_start_is_one_error():
    with pytest.raises(
        AuditError, match=r"a test worker failed to start 2 times in a row \(worker exited with code 3\)"
    ):
        runner.run([Probe(Echo(1))], _pool(jobs=1, POOL_SERVER_FAIL="1"))


def test_workers_on_another_platform_than_expected_are_one_error():
    tpu = Platform("tpu", "TPU v5 lite")
    with pytest.raises(AuditError, match=r"the test workers run on cpu \(cpu\), not on TPU v5 lite \(tpu\)"):
        runner.run([Probe(Echo(1))], _pool(jobs=1, platform=tpu))
