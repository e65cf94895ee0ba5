"""A worker server for tests of the pool itself (runner.py): a request ("echo", x) answers x,
("crash",) kills the worker, ("hang",) never answers, ("progress", n) sends n progress messages
first. POOL_SERVER_FAIL=1 makes prepare() fail (the worker never says it is ready)."""

import os
import signal
import time


def prepare() -> None:
    if os.environ.get("POOL_SERVER_FAIL") == "1":
        raise SystemExit(3)


def serve(msg, send) -> None:
    if msg[0] == "crash":
        os.kill(os.getpid(), signal.SIGKILL)
    if msg[0] == "hang":
        time.sleep(3600)
    if msg[0] == "progress":
        for i in range(msg[1]):
            send.send(("step", i))
    send.send(("done", msg[-1]))
