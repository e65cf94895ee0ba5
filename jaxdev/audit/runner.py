"""The auditor's one worker pool: worker processes that run tasks, so a crash or a hang costs one
task (or one sample of it), never the run. Both the OpInfo sweep (unit_work.py: a unit's samples)
and the direct trials (schema_samples/work.py: one aten overload) run in it.

Each worker is `python -m jaxdev.audit.runner IN_FD OUT_FD SERVER` (a peer backend's: `python -m
jaxdev_cli.peer_worker ...`, which never loads jaxdev's device): SERVER names the module that
serves its tasks (`prepare()` once, then `serve(request, send)` per task). The worker says
Ready(platform), then per task any progress messages and finally Done(payload) (messages.py). A task (`Task`)
keeps its own state: the pool hands its `request()` to an idle worker, passes it the worker's
messages, and tells it when the worker died or went silent past the timeout (`lost`): the task
then says whether to run again (resume) in a fresh worker.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from collections import deque
from multiprocessing.connection import Connection, wait

from jaxdev.audit import AuditError
from jaxdev.audit.messages import Done, Ready, Stop
from jaxdev.audit.model import Platform

CACHE_DIR = os.path.join(os.path.expanduser("~"), ".cache", "jaxdev", "jax")
CACHE_ENV = "JAXDEV_AUDIT_CACHE"
# Compilation is most of a sweep: every sample brings new shapes, hence new XLA executables, each
# tiny. (1) JAX's persistent cache with its size and compile-time floors at 0 (by default
# executables compiled in under a second are not cached, i.e. none of ours). (2) XLA:CPU without
# LLVM's expensive passes, which leaves every result's bits as XLA's default compile gives them
# (checked: the first float32 sample of every OpInfo, forward and backward, 1,208 results, all
# bit-equal). The workers used to compile at --xla_backend_optimization_level=0 too, faster, but
# that changes floating-point results (104 of those 1,208 differed, in 82 OpInfos: tanh, gelu,
# softmax, layer_norm, addmm, convolutions, ...): the matrix measured programs users do not run,
# and a verdict close to a tolerance flipped with it (conv_transpose3d's float32 backward). A
# user's own XLA_FLAGS setting of these wins.
FAST_COMPILE_FLAGS = ("--xla_llvm_disable_expensive_passes=true",)
JAXDEV_WORKER = ("-m", "jaxdev.audit.runner")  # a worker's command after the interpreter (Pool.argv)
MLIR_CONTEXT_USES = 1000  # lowerings per shared MLIR context (bounds what a context accumulates)
STARTUP_TIMEOUT_S = 180.0


class Task:
    """One task of a pool. `request()`: the message that starts (or resumes) it in a worker;
    `progress(msg)`: a worker's message before Done(payload), whose payload goes to `done`;
    `lost(status, reason)`: the worker crashed or hung on it (status crash or timeout): True to
    run it again in a fresh worker, False when the task is over."""

    def request(self) -> tuple:
        raise NotImplementedError

    def progress(self, msg) -> None:
        raise NotImplementedError

    def done(self, payload) -> None:
        raise NotImplementedError

    def lost(self, status: str, reason: str) -> bool:
        raise NotImplementedError


@dataclasses.dataclass(frozen=True)
class Pool:
    """How tasks run: `server` (the module serving them in the workers), `jobs` workers, a
    `timeout` in seconds of silence per task, the workers' `env` (worker_env), what the workers
    are called in an error (`name`), how many failed starts in a row are an error, the platform
    the workers must run on (None: any), and the worker's command after the interpreter (`argv`:
    jaxdev's worker, or a peer backend's, peers.Selected.argv)."""

    server: str
    jobs: int
    timeout: float
    env: dict
    name: str
    max_failed_starts: int = 1
    platform: Platform | None = None
    argv: tuple[str, ...] = JAXDEV_WORKER


class WorkerProcess:
    """A child `python -m jaxdev.audit.runner fd_in fd_out SERVER` in its own session, talking over
    two pipes; killed with its whole process group (a crash or hang costs only the child)."""

    def __init__(self, env: dict, server: str, argv: tuple[str, ...] = JAXDEV_WORKER):
        parent_in, child_out = os.pipe()
        child_in, parent_out = os.pipe()
        self.errors = tempfile.TemporaryFile()  # noqa: SIM115 (closed in kill) its stderr: an abort's last words
        self.proc = subprocess.Popen(
            [sys.executable, *argv, str(child_in), str(child_out), server],
            pass_fds=(child_in, child_out),
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=self.errors,
            start_new_session=True,
        )
        os.close(child_in)
        os.close(child_out)
        self.recv = Connection(parent_in, writable=False)
        self.send = Connection(parent_out, readable=False)
        self.ready = False
        self.deadline = time.monotonic() + STARTUP_TIMEOUT_S
        self.task: Task | None = None

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()
        self.recv.close()
        self.send.close()
        self.errors.close()

    def died_how(self) -> str:
        rc = self.proc.wait()
        how = f"worker killed by signal {signal.Signals(-rc).name}" if rc < 0 else f"worker exited with code {rc}"
        last = fatal_line(self.errors)
        return f"{how} ({last})" if last else how


def fatal_line(errors) -> str:
    """The last fatal log line in a dead worker's stderr (XLA's `F1206 12:00:00.0 1 file.cc:12] why`:
    what aborted it), as `file.cc:12] why`; '' when there is none."""
    errors.seek(0, os.SEEK_END)
    errors.seek(max(0, errors.tell() - 65536))
    lines = errors.read().decode("utf-8", "replace").splitlines()
    found = [m.group(1) for m in map(_FATAL.match, lines) if m]
    return found[-1][:300] if found else ""


_FATAL = re.compile(r"^F\d{4} [\d:.]+\s+\d+ (\S+\] .*)$")


def run(tasks: list[Task], pool: Pool) -> None:
    """Run every task across `pool.jobs` workers until each is done or lost for good."""
    _Run(tasks, pool).loop()


class _Run:
    """The pool's loop: start workers as tasks need them, hand out tasks, read answers, and charge
    crashes and silences past the timeout to the task in hand."""

    def __init__(self, tasks: list[Task], pool: Pool):
        self.pool = pool
        self.queue: deque[Task] = deque(tasks)
        self.workers: list[WorkerProcess] = []
        self.failed_starts = 0  # in a row: a worker that cannot start at all is an error

    def loop(self) -> None:
        try:
            while self.queue or any(w.task for w in self.workers):
                busy = sum(1 for w in self.workers if w.task)
                while len(self.workers) < self.pool.jobs and len(self.workers) < len(self.queue) + busy:
                    self.workers.append(WorkerProcess(self.pool.env, self.pool.server, self.pool.argv))
                if not self.workers:
                    break  # jobs < 1: nothing can run (callers check their options first)
                ready = wait(
                    [w.recv for w in self.workers],
                    timeout=max(0.05, min(w.deadline for w in self.workers) - time.monotonic()),
                )
                now = time.monotonic()
                for w in list(self.workers):
                    if w.recv in ready:
                        self._answer(w, now)
                    elif now > w.deadline:
                        self._silent(w)
        finally:
            for w in self.workers:
                w.kill()

    def _answer(self, w: WorkerProcess, now: float) -> None:
        try:
            msg = w.recv.recv()
        except (EOFError, OSError):
            self._lose(w, "crash", w.died_how())
            return
        w.deadline = now + self.pool.timeout
        if isinstance(msg, Ready):
            w.ready, self.failed_starts = True, 0
            expected = self.pool.platform
            if expected is not None and msg.platform != expected:
                raise AuditError(
                    f"the {self.pool.name}s run on {msg.platform.label} ({msg.platform.name}), not on "
                    f"{expected.label} ({expected.name}) as this run expects"
                )
        elif isinstance(msg, Done):
            task, w.task = w.task, None
            task.done(msg.payload)
        else:
            w.task.progress(msg)
            return
        self._next(w, now)

    def _next(self, w: WorkerProcess, now: float) -> None:
        """Hand an idle worker the next task, or stop it when none is left."""
        if self.queue:
            w.task = self.queue.popleft()
            w.send.send(w.task.request())
            w.deadline = now + self.pool.timeout
        else:
            w.send.send(Stop())
            self._drop(w)

    def _silent(self, w: WorkerProcess) -> None:
        if not w.ready:
            self._lose(w, "timeout", f"no answer within {STARTUP_TIMEOUT_S:g} s")
        else:
            self._lose(w, "timeout", f"no answer within {self.pool.timeout:g} s")

    def _lose(self, w: WorkerProcess, status: str, reason: str) -> None:
        """The worker died or hung: a failed start, or the task in hand is charged (and maybe resumed)."""
        task = w.task
        self._drop(w)
        if not w.ready:
            self.failed_starts += 1
            if self.failed_starts >= self.pool.max_failed_starts:
                times = f" {self.failed_starts} times in a row" if self.failed_starts > 1 else ""
                raise AuditError(
                    f"a {self.pool.name} failed to start{times} ({reason}); "
                    "check JAXDEV_AUDIT_PLUGINS and the environment"
                )
            return
        if task is not None and task.lost(status, reason):
            self.queue.appendleft(task)

    def _drop(self, w: WorkerProcess) -> None:
        w.kill()
        self.workers.remove(w)


def worker_connections(fd_in: int, fd_out: int) -> tuple[Connection, Connection]:
    """The child's side of a WorkerProcess: its pipes, and JAX set up as every audit worker runs it
    (the shared persistent cache, every executable cached, one MLIR context)."""
    import jax

    jax.config.update("jax_compilation_cache_dir", os.environ.get(CACHE_ENV, CACHE_DIR))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
    _share_mlir_context()
    return Connection(fd_in, writable=False), Connection(fd_out, readable=False)


def worker_env(env: dict | None = None, cache_dir: str | None = None) -> dict:
    """The workers' environment: the CPU fallback silent, JAX's persistent cache, fast compiles."""
    env = dict(os.environ if env is None else env)
    env.setdefault("JAXDEV_FALLBACK", "silent")
    env.setdefault("JAXDEV_EAGER", "op")  # a forward cell is per-op eager's, on an accelerator too
    if cache_dir:
        env[CACHE_ENV] = cache_dir
    env.setdefault(CACHE_ENV, CACHE_DIR)
    flags = env.get("XLA_FLAGS", "").split()
    ours = [f for f in FAST_COMPILE_FLAGS if not any(x.startswith(f.split("=")[0] + "=") for x in flags)]
    env["XLA_FLAGS"] = " ".join(flags + ours)
    return env


def _share_mlir_context() -> None:
    """Lower into one MLIR context instead of a fresh one per lowering.

    JAX builds a new context (loading every dialect) for each jit lowering, and lowering happens
    on every new shape even when the persistent cache then has the executable: in a sweep that
    is half the worker's time. Sharing one context (renewed every MLIR_CONTEXT_USES lowerings)
    makes warm and cold sweeps ~2x faster. Private JAX API: if it moved, nothing is patched."""
    try:
        from jax._src.interpreters import mlir
    except ImportError:
        return
    make = getattr(mlir, "make_ir_context", None)
    if make is None:
        return
    state = {"context": None, "uses": 0}

    def shared_context():
        if state["uses"] % MLIR_CONTEXT_USES == 0:
            state["context"] = make()
        state["uses"] += 1
        return state["context"]

    mlir.make_ir_context = shared_context


def worker_main(fd_in: int, fd_out: int, server: str) -> None:
    """A worker's life: say Ready(platform), then serve each request with `server` until Stop."""
    from jaxdev.audit import deviceless, platforms

    recv, send = worker_connections(fd_in, fd_out)
    if os.environ.get(deviceless.ENV):  # a stand-in for a TPU (--tpu-compile): before jaxdev loads
        deviceless.install()
    serving = importlib.import_module(server)
    serving.prepare()
    send.send(Ready(platforms.current()))
    while True:
        try:
            msg = recv.recv()
        except EOFError:
            return
        if isinstance(msg, Stop):
            return
        serving.serve(msg, send)


if __name__ == "__main__":
    worker_main(int(sys.argv[1]), int(sys.argv[2]), sys.argv[3])
