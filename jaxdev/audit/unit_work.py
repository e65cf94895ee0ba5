"""OpInfo units in the worker pool (runner.py): the parent's record of a unit in progress (its
samples' verdicts, where to resume) and the worker's serving of it.

For each sample the worker first says Started(i, repro), then Judged(i, verdict) (messages.py). If the
worker dies or goes silent past the timeout during sample i, sample i is recorded as crash/timeout,
and the unit resumes at sample i + 1 in a fresh worker (up to MAX_LOST_SAMPLES lost samples).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from jaxdev.audit import runner
from jaxdev.audit.facts import FAILURES, SweepOptions, worst
from jaxdev.audit.messages import Count, Done, Judged, Started, UnitRequest
from jaxdev.audit.model import Cell, Platform, Verdict
from jaxdev.audit.samples import Unit

MAX_LOST_SAMPLES = 2  # crashes/timeouts after which a unit's remaining samples are not run


@dataclasses.dataclass
class UnitResult:
    unit: Unit
    cell: Cell
    aten: list[str]
    samples: int


class UnitTask(runner.Task):
    """A unit in progress: the verdicts so far, the sample in hand and where to resume."""

    def __init__(self, unit: Unit, max_samples: int, counter: _Counter | None = None, inputs: str = "sample"):
        self.unit = unit
        self.max_samples = max_samples
        self.inputs = inputs  # facts.INPUTS: which of the OpInfo's inputs the cell draws from
        self.verdicts: dict[int, Verdict] = {}
        self.total: int | None = None
        self.next = 0
        self.lost_samples = 0
        self.current: int | None = None
        self.current_repro = ""  # the sample's shapes, dtypes and kwargs, for a crash or hang
        self.counter = counter or _Counter()

    def request(self) -> UnitRequest:
        self.current = None
        return UnitRequest(self.unit, self.next, self.max_samples, self.inputs)

    def progress(self, msg: Count | Started | Judged) -> None:
        if isinstance(msg, Count):
            self.total = msg.total
        elif isinstance(msg, Started):
            self.current, self.current_repro = msg.index, msg.repro
        elif isinstance(msg, Judged):
            self.verdicts[msg.index] = msg.verdict
            self.next = msg.index + 1
            self.current = None
            self.counter.sample()

    def done(self, error: str) -> None:
        """`error`: why the OpInfo's sample generator failed ("" when it did not)."""
        if error:
            self.verdicts.setdefault(self.next, Verdict("skip", error))
        self.counter.finish(self)

    def lost(self, status: str, reason: str) -> bool:
        """Charge the sample in hand (or the next one) with the crash or hang; resume after it."""
        i = self.current if self.current is not None else self.next
        if status == "timeout":
            reason += f" on sample {i}" if self.current is not None else " on sample generation"
        elif self.current is not None:
            reason += f" on sample {i}"
        repro = self.current_repro if self.current is not None else ""
        self.verdicts[i] = Verdict(
            status, reason, repro or f"{self.unit.op} {self.unit.dtype} {self.unit.direction}: sample {i}"
        )
        self.counter.samples += 1
        self.lost_samples += 1
        self.next = i + 1
        limit = min(self.total if self.total is not None else i + 1, self.max_samples)
        if self.lost_samples < MAX_LOST_SAMPLES and self.next < limit:
            return True
        self.counter.finish(self)
        return False

    def cell(self) -> Cell:
        """The cell: the worst status of its samples, the first reason of that status, counts, ..."""
        verdicts = [self.verdicts[i] for i in sorted(self.verdicts)]
        status = worst(v.status for v in verdicts) if verdicts else "skip"
        # the first sample of the cell's status that says something (a pass by float64 arbitration
        # or up to gauge explains itself even when an earlier sample passed plainly)
        of_status = [v for v in verdicts if v.status == status]
        first_bad = next((v for v in of_status if v.reason), of_status[0] if of_status else None)
        counts: dict[str, int] = {}
        for v in verdicts:
            counts[v.status] = counts.get(v.status, 0) + 1
        cell = Cell(status, first_bad.reason if first_bad else "no samples", len(verdicts), counts)
        cell.fallback = sorted({op for v in verdicts for op in v.fallback})
        if (status in FAILURES or status == "stride_mismatch") and first_bad and first_bad.repro:
            cell.repro = first_bad.repro
        abs_errors = [v.max_abs for v in verdicts if v.max_abs is not None]
        rel_errors = [v.max_rel for v in verdicts if v.max_rel is not None]
        cell.max_abs = float(f"{max(abs_errors):.4g}") if abs_errors else None
        cell.max_rel = float(f"{max(rel_errors):.4g}") if rel_errors else None
        cell.random = any(v.random for v in verdicts)
        cell.arbitrated = sum(1 for v in verdicts if v.arbitrated)  # passed by float64 arbitration (check.arbitrate)
        cell.unstable = sum(1 for v in verdicts if v.unstable)  # CPU gave two results (check._reference)
        cell.limited = self.total is not None and self.total > self.max_samples
        return cell

    def aten(self) -> list[str]:
        return sorted({op for v in self.verdicts.values() for op in v.aten})


class _Counter:
    """What the run's tasks report to the caller: each sample, each finished unit."""

    def __init__(self, on_result: Callable[[UnitResult], None] = lambda r: None, on_sample=None):
        self.on_result = on_result
        self.on_sample = on_sample
        self.samples = 0

    def sample(self) -> None:
        self.samples += 1
        if self.on_sample:
            self.on_sample()

    def finish(self, task: UnitTask) -> None:
        self.on_result(UnitResult(task.unit, task.cell(), task.aten(), len(task.verdicts)))


def run(
    units: list[Unit],
    options: SweepOptions,
    *,
    on_result: Callable[[UnitResult], None],
    on_sample: Callable[[], None] | None = None,
    env: dict | None = None,
    platform: Platform | None = None,
    peer=None,
) -> int:
    """Run every unit across `options.jobs` workers; `on_result` gets each finished unit. Returns
    samples run. `options.cache_dir`: JAX's persistent cache (default $JAXDEV_AUDIT_CACHE, else
    runner.CACHE_DIR); `platform`: the one the workers must run on (None: any); `peer`: the peer
    backend the workers test instead of jaxdev (a peers.Selected; None: jaxdev)."""
    counter = _Counter(on_result, on_sample)
    tasks = [UnitTask(u, options.max_samples, counter, options.inputs) for u in units]
    env = runner.worker_env(env, options.cache_dir)
    name, argv = "coverage worker", runner.JAXDEV_WORKER
    if peer is not None:
        env, name, argv = peer.worker_env(env), f"{peer.name} coverage worker", peer.argv
    pool = runner.Pool(__name__, options.jobs, options.timeout, env, name, platform=platform, argv=argv)
    runner.run(tasks, pool)
    return counter.samples


# ---------------------------------------------------------------------------------------------
# The worker's side (runner.worker_main imports this module by name)


def prepare() -> None:
    from jaxdev.audit import samples

    samples.op_db()


def serve(msg: UnitRequest, send) -> None:
    """Run the unit's samples from `start` (up to `limit`, drawn from `inputs`: samples.drawn),
    saying each one's start and verdict."""
    from jaxdev.audit import check, samples

    unit = msg.unit
    try:
        todo, total = samples.drawn(unit, msg.limit, msg.inputs)
    except Exception as e:  # the OpInfo's sample generator itself failed
        send.send(Done(f"sample generation raised {type(e).__name__}: {str(e)[:200]}"))
        return
    send.send(Count(total))
    for i in range(msg.start, len(todo)):
        repro = check.describe(unit, todo[i])
        send.send(Started(i, repro))
        try:
            verdict = check.run_sample(unit, todo[i], repro)
        except Exception as e:  # an auditor bug on an odd sample must not stop the sweep
            verdict = Verdict("exception", f"auditor: {type(e).__name__}: {str(e)[:200]}")
        send.send(Judged(i, verdict))
    send.send(Done(""))
