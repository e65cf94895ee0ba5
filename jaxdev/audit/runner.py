"""Worker processes that run OpInfo samples, so a crash or a hang costs one sample, not the sweep.

Each worker is `python -m jaxdev.audit.runner IN_FD OUT_FD`: it imports torch, jax, jaxdev and op_db
once, then serves units until the sweep ends. For each sample it first
says ("start", i, repro), then ("sample", i, verdict). If the worker dies or goes silent past the timeout
during sample i, the parent records sample i as crash/timeout, starts a fresh worker, and resumes the
unit at sample i + 1.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import signal
import subprocess
import sys
import time
from collections import deque
from collections.abc import Callable
from multiprocessing.connection import Connection, wait

from jaxdev.audit import AuditError
from jaxdev.audit.facts import FAILURES, SweepOptions, worst
from jaxdev.audit.samples import Unit

CACHE_DIR = os.path.join(os.path.expanduser("~"), ".cache", "jaxdev", "jax")
CACHE_ENV = "JAXDEV_AUDIT_CACHE"
# Compilation is most of a sweep: every sample brings new shapes, hence new XLA executables, each
# tiny. Two measures halve it. (1) JAX's persistent cache with its size and compile-time floors at
# 0 (by default executables compiled in under a second are not cached, i.e. none of ours).
# (2) XLA:CPU without LLVM's optimisation passes: compiles ~2x faster; the arithmetic is the same
# IEEE operations (no fast-math at any level). A user's own XLA_FLAGS setting of these wins.
FAST_COMPILE_FLAGS = ("--xla_backend_optimization_level=0", "--xla_llvm_disable_expensive_passes=true")
MLIR_CONTEXT_USES = 1000  # lowerings per shared MLIR context (bounds what a context accumulates)
STARTUP_TIMEOUT_S = 180.0
MAX_LOST_SAMPLES = 2  # crashes/timeouts after which a unit's remaining samples are not run


@dataclasses.dataclass
class UnitResult:
    unit: Unit
    entry: dict
    aten: list[str]
    samples: int


class _Work:
    """A unit in progress: the verdicts so far and where to resume."""

    def __init__(self, unit: Unit, max_samples: int):
        self.unit = unit
        self.max_samples = max_samples
        self.verdicts: dict[int, dict] = {}
        self.total: int | None = None
        self.next = 0
        self.lost = 0

    def entry(self) -> dict:
        verdicts = [self.verdicts[i] for i in sorted(self.verdicts)]
        status = worst(v["status"] for v in verdicts) if verdicts else "skip"
        # the first sample of the cell's status that says something (a pass by float64 arbitration
        # or up to gauge explains itself even when an earlier sample passed plainly)
        of_status = [v for v in verdicts if v["status"] == status]
        first_bad = next((v for v in of_status if v.get("reason")), of_status[0] if of_status else {})
        counts: dict[str, int] = {}
        for v in verdicts:
            counts[v["status"]] = counts.get(v["status"], 0) + 1
        entry = {
            "status": status,
            "reason": first_bad.get("reason", "no samples"),
            "samples": len(verdicts),
            "counts": counts,
        }
        fallback = sorted({op for v in verdicts for op in v.get("fallback", ())})
        if fallback:
            entry["fallback"] = fallback
        if (status in FAILURES or status == "stride_mismatch") and first_bad.get("repro"):
            entry["repro"] = first_bad["repro"]
        for key in ("max_abs", "max_rel"):
            values = [v[key] for v in verdicts if key in v]
            if values:
                entry[key] = float(f"{max(values):.4g}")
        if any(v.get("random") for v in verdicts):
            entry["random"] = True
        arbitrated = sum(1 for v in verdicts if v.get("arbitrated"))
        if arbitrated:
            entry["arbitrated"] = arbitrated  # samples that passed by float64 arbitration (check.arbitrate)
        if self.total is not None and self.total > self.max_samples:
            entry["limited"] = True
        return entry

    def aten(self) -> list[str]:
        return sorted({op for v in self.verdicts.values() for op in v.get("aten", ())})


class WorkerProcess:
    """A child `python -m MODULE fd_in fd_out` in its own session, talking over two pipes; killed
    with its whole process group (a crash or hang costs only the child). Subclasses add the state
    of the work they hand it."""

    module = "jaxdev.audit.runner"

    def __init__(self, env: dict):
        parent_in, child_out = os.pipe()
        child_in, parent_out = os.pipe()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", self.module, str(child_in), str(child_out)],
            pass_fds=(child_in, child_out),
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        os.close(child_in)
        os.close(child_out)
        self.recv = Connection(parent_in, writable=False)
        self.send = Connection(parent_out, readable=False)
        self.ready = False
        self.deadline = time.monotonic() + STARTUP_TIMEOUT_S

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()
        self.recv.close()
        self.send.close()

    def died_how(self) -> str:
        rc = self.proc.wait()
        if rc < 0:
            return f"worker killed by signal {signal.Signals(-rc).name}"
        return f"worker exited with code {rc}"


class _Worker(WorkerProcess):
    def __init__(self, env: dict):
        super().__init__(env)
        self.work: _Work | None = None
        self.current: int | None = None
        self.current_repro = ""  # the sample's shapes, dtypes and kwargs, for a crash or hang


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
    env = dict(os.environ if env is None else env)
    env.setdefault("JAXDEV_FALLBACK", "silent")
    if cache_dir:
        env[CACHE_ENV] = cache_dir
    env.setdefault(CACHE_ENV, CACHE_DIR)
    flags = env.get("XLA_FLAGS", "").split()
    ours = [f for f in FAST_COMPILE_FLAGS if not any(x.startswith(f.split("=")[0] + "=") for x in flags)]
    env["XLA_FLAGS"] = " ".join(flags + ours)
    return env


def run(
    units: list[Unit],
    options: SweepOptions,
    *,
    on_result: Callable[[UnitResult], None],
    on_sample: Callable[[], None] | None = None,
    env: dict | None = None,
) -> int:
    """Run every unit across `options.jobs` workers; `on_result` gets each finished unit. Returns
    samples run. `options.cache_dir`: JAX's persistent cache (default $JAXDEV_AUDIT_CACHE, else CACHE_DIR)."""
    jobs, timeout, max_samples = options.jobs, options.timeout, options.max_samples
    env = worker_env(env, options.cache_dir)
    queue: deque[_Work] = deque(_Work(u, max_samples) for u in units)
    workers: list[_Worker] = []
    samples_run = 0

    def finish(work: _Work):
        on_result(UnitResult(work.unit, work.entry(), work.aten(), len(work.verdicts)))

    def assign(w: _Worker):
        if not queue:
            return
        w.work = queue.popleft()
        w.current = None
        w.send.send(("unit", w.work.unit, w.work.next, w.work.max_samples))
        w.deadline = time.monotonic() + timeout

    def lose(w: _Worker, status: str, reason: str):
        """The worker crashed or hung: charge the current sample (or the whole unit) and move on."""
        nonlocal samples_run
        work = w.work
        w.kill()
        workers.remove(w)
        if work is None:
            if not w.ready:
                raise AuditError(
                    f"a coverage worker failed to start ({reason}); check JAXDEV_AUDIT_PLUGINS and the environment"
                )
            return
        i = w.current if w.current is not None else work.next
        repro = w.current_repro if w.current is not None else ""
        work.verdicts[i] = {
            "status": status,
            "reason": reason,
            "repro": repro or f"{work.unit.op} {work.unit.dtype} {work.unit.direction}: sample {i}",
        }
        samples_run += 1
        work.lost += 1
        work.next = i + 1
        limit = min(work.total if work.total is not None else i + 1, work.max_samples)
        if work.lost < MAX_LOST_SAMPLES and work.next < limit:
            queue.appendleft(work)
        else:
            finish(work)

    try:
        while queue or any(w.work for w in workers):
            while len(workers) < jobs and (queue or not workers):
                workers.append(_Worker(env))
            ready = wait(
                [w.recv for w in workers], timeout=max(0.05, min(w.deadline for w in workers) - time.monotonic())
            )
            now = time.monotonic()
            for w in list(workers):
                if w.recv in ready:
                    try:
                        msg = w.recv.recv()
                    except (EOFError, OSError):
                        lose(w, "crash", w.died_how() + (f" on sample {w.current}" if w.current is not None else ""))
                        continue
                    w.deadline = now + timeout
                    kind = msg[0]
                    if kind == "ready":
                        w.ready = True
                        assign(w)
                    elif kind == "count":
                        w.work.total = msg[1]
                    elif kind == "start":
                        w.current, w.current_repro = msg[1], msg[2]
                    elif kind == "sample":
                        w.work.verdicts[msg[1]] = msg[2]
                        w.work.next = msg[1] + 1
                        w.current = None
                        samples_run += 1
                        if on_sample:
                            on_sample()
                    elif kind == "done":
                        if "error" in msg[1]:
                            w.work.verdicts.setdefault(w.work.next, {"status": "skip", "reason": msg[1]["error"]})
                        finish(w.work)
                        w.work = None
                        assign(w)
                elif now > w.deadline:
                    what = (
                        "start"
                        if not w.ready
                        else (f"sample {w.current}" if w.current is not None else "sample generation")
                    )
                    lose(w, "timeout", f"no answer within {timeout:g} s on {what}")
            # idle workers with nothing left to do
            for w in list(workers):
                if w.ready and w.work is None and not queue:
                    w.send.send(("stop",))
                    w.kill()
                    workers.remove(w)
    finally:
        for w in workers:
            w.kill()
    return samples_run


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


def _worker_main(fd_in: int, fd_out: int) -> None:
    recv, send = worker_connections(fd_in, fd_out)
    from jaxdev.audit import check, samples

    samples.op_db()
    send.send(("ready",))
    while True:
        try:
            msg = recv.recv()
        except EOFError:
            return
        if msg[0] == "stop":
            return
        _, unit, start, limit = msg
        try:
            todo = samples.samples(unit, limit + 1)  # one more than run: enough to tell "limited"
        except Exception as e:  # the OpInfo's sample generator itself failed
            send.send(("done", {"error": f"sample generation raised {type(e).__name__}: {str(e)[:200]}"}))
            continue
        send.send(("count", len(todo)))
        for i in range(start, min(len(todo), limit)):
            repro = check.describe(unit, todo[i])
            send.send(("start", i, repro))
            try:
                verdict = check.run_sample(unit, todo[i], repro)
            except Exception as e:  # an auditor bug on an odd sample must not stop the sweep
                verdict = {"status": "exception", "reason": f"auditor: {type(e).__name__}: {str(e)[:200]}"}
            send.send(("sample", i, verdict))
        send.send(("done", {}))


if __name__ == "__main__":
    _worker_main(int(sys.argv[1]), int(sys.argv[2]))
