"""The auditor's one worker pool (runner.py), with a test server (pool_server.py): answers,
progress, a crash and a hang charged to their task only, a resumed task, and a worker that cannot
start being one clear error."""

import os

import pytest

from jaxdev.audit import AuditError, runner

HERE = os.path.dirname(__file__)


class Probe(runner.Task):
    def __init__(self, request, resumes=0):
        self.msg, self.resumes = request, resumes
        self.steps, self.result, self.losses = [], None, []

    def request(self):
        return self.msg

    def progress(self, msg):
        self.steps.append(msg[1])

    def done(self, payload):
        self.result = payload

    def lost(self, status, reason):
        self.losses.append((status, reason))
        if len(self.losses) <= self.resumes:
            self.msg = ("echo", "resumed")
            return True
        return False


def _pool(jobs=2, timeout=5.0, **env):
    full = runner.worker_env({**os.environ, "PYTHONPATH": HERE + os.pathsep + os.environ.get("PYTHONPATH", ""), **env})
    return runner.Pool("pool_server", jobs, timeout, full, "test worker", max_failed_starts=2)


def test_answers_progress_and_losses_each_charged_to_their_task():
    tasks = {
        "echo": Probe(("echo", 1)),
        "progress": Probe(("progress", 3, "p")),
        "crash": Probe(("crash",)),
        "hang": Probe(("hang",)),
        "resumed": Probe(("crash",), resumes=1),
    }
    runner.run(list(tasks.values()), _pool(timeout=3.0))
    assert tasks["echo"].result == 1 and not tasks["echo"].losses
    assert tasks["progress"].steps == [0, 1, 2] and tasks["progress"].result == "p"
    assert tasks["crash"].losses == [("crash", "worker killed by signal SIGKILL")] and tasks["crash"].result is None
    assert tasks["hang"].losses == [("timeout", "no answer within 3 s")]
    assert len(tasks["resumed"].losses) == 1 and tasks["resumed"].result == "resumed"  # in a fresh worker


def test_a_worker_that_cannot_start_is_one_error():
    with pytest.raises(
        AuditError, match=r"a test worker failed to start 2 times in a row \(worker exited with code 3\)"
    ):
        runner.run([Probe(("echo", 1))], _pool(jobs=1, POOL_SERVER_FAIL="1"))
