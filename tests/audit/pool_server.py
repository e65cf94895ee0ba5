"""A worker server for tests of the pool itself (runner.py): a request Echo(x) answers x, Crash()
kills the worker, Hang() never answers, Progress(n, x) sends n Step progress messages first, then
answers x. POOL_SERVER_FAIL=1 makes prepare() fail (the worker never says it is ready)."""

import dataclasses
import os
import signal
import time

from jaxdev.audit.messages import Done


@dataclasses.dataclass(frozen=True)
class Echo:
    value: object


@dataclasses.dataclass(frozen=True)
class Crash:
    pass


@dataclasses.dataclass(frozen=True)
class Hang:
    pass


@dataclasses.dataclass(frozen=True)
class Progress:
    steps: int
    value: object


@dataclasses.dataclass(frozen=True)
class Step:
    index: int


def prepare() -> None:
    if os.environ.get("POOL_SERVER_FAIL") == "1":
        raise SystemExit(3)


def serve(msg, send) -> None:
    if isinstance(msg, Crash):
        os.kill(os.getpid(), signal.SIGKILL)
    if isinstance(msg, Hang):
        time.sleep(3600)
    if isinstance(msg, Progress):
        for i in range(msg.steps):
            send.send(Step(i))
    send.send(Done(msg.value))
