"""A coverage sweep: choose the units, skip what a partial matrix already has, run the rest in
workers, and keep the matrix on disk current (atomically) so a killed sweep can be resumed."""

from __future__ import annotations

import contextlib
import os
import re
import time
from collections.abc import Callable

from jaxdev.audit import AuditError, matrix, samples, unit_work
from jaxdev.audit.facts import SweepOptions
from jaxdev.audit.model import Peer, Platform, ThisRun

# A kill loses at most the work since the last save. Saving a full matrix takes ~0.5 s, so the
# interval grows with the matrix: saving costs the parent at most 1/SAVE_SHARE of its time.
SAVE_EVERY_S = 1.0
SAVE_SHARE = 20


def parse_shard(text: str | None) -> tuple[int, int] | None:
    if not text:
        return None
    m = re.fullmatch(r"(\d+)/(\d+)", text)
    if not m or not 1 <= int(m[1]) <= int(m[2]):
        raise AuditError(f"--shard must look like K/N with 1 <= K <= N, not {text!r}")
    return int(m[1]), int(m[2])


def plan(
    ops=(),
    dtypes=(),
    backward=True,
    shard: tuple[int, int] | None = None,
    mode: str = "eager",
    all_reaching: bool = False,
    inputs: str = "sample",
) -> list[samples.Unit]:
    """The units to run; with reference inputs, of the selected OpInfos that have their own
    (an OpInfo without reference_inputs_func offers its sample inputs again)."""
    names = samples.select(ops, all_reaching=all_reaching)
    if inputs == "reference":
        names = [n for n in names if samples.op_db()[n].reference_inputs_func is not None]
        if not names:
            raise AuditError("none of these OpInfos has reference inputs (reference_inputs_func)")
    if shard:
        k, n = shard
        names = names[k - 1 :: n]  # whole OpInfos per shard, so each op's aten list stays in one file
    return samples.units(names, dtypes, backward, mode)


def sweep(
    units: list[samples.Unit],
    out_path: str,
    options: SweepOptions,
    *,
    resume: bool = False,
    merge: bool = False,
    run_info: dict | None = None,
    on_start: Callable[[int, int], None] | None = None,
    on_unit: Callable[[unit_work.UnitResult], None] | None = None,
    on_sample: Callable[[], None] | None = None,
    platform: Platform | None = None,
    peer=None,
) -> matrix.Matrix:
    """Runs the units, writes `out_path` as it goes, and returns the final matrix (see `start` for
    what it keeps of a matrix already at `out_path`). `run_info` goes into the file's `run`, or,
    when a merge keeps that run's facts, into `run.this_run`. `platform`: the one the workers must
    run on, recorded in the file (None: not checked, the file's own kept). `peer`: the peer backend
    the workers test instead of jaxdev (a peers.Selected, probed: its record goes into the file)."""
    problem = options.problems()
    if problem:
        raise AuditError(problem)
    record = peer.record if peer is not None else None
    m, todo, kept_whole = start(
        units, out_path, options.max_samples, resume=resume, merge=merge, inputs=options.inputs, platform=platform,
        peer=record,
    )  # fmt: skip
    m.platform = platform or m.platform
    m.peer = record
    # A merge leaves the facts of the sweep that made the file (complete, wall_s, max_samples) as
    # they were: they describe most of its cells. Its samples are recounted from the cells. A
    # resume of the same scope and shard (a full sweep's, or the scoped run that made the file)
    # continues it; a resume of another shard into the file is a merge.
    info = run_info or {}
    same = all(getattr(m.run, k) == info.get(k) for k in ("scope", "shard"))
    owns_run = not kept_whole or (resume and same)
    writer = _Writer(m, out_path, owns_run, resume)
    if owns_run:
        m.run.max_samples, m.run.timeout_s = options.max_samples, options.timeout
        for key, value in info.items():
            setattr(m.run, key, value)  # scope, shard
        if options.inputs != "sample":
            m.run.inputs = options.inputs  # a sample-input matrix says nothing (the default)
        m.run.complete = False
    if on_start:
        on_start(len(units) - len(todo), len(todo))

    def on_result(r: unit_work.UnitResult):
        writer.take(r)
        if on_unit:
            on_unit(r)
        writer.save_now_and_then()

    writer.save(False)
    try:
        unit_work.run(todo, options, on_result=on_result, on_sample=on_sample, platform=platform, peer=peer)
    except BaseException:
        writer.save(False)  # Ctrl-C or kill: a partial matrix that --resume completes (a merge: earlier cells kept)
        raise
    this = ThisRun(len(todo), writer.samples, round(time.monotonic() - writer.start, 1))
    if not owns_run:
        this.scope, this.shard = info.get("scope"), info.get("shard")
    m.run.this_run = this
    writer.save(True)
    return m


class _Writer:
    """Keeps the matrix on disk current while a sweep runs: each unit's cells go in, and the file
    is saved atomically every SAVE_EVERY_S or so (see SAVE_SHARE). `owns_run`: the file's `run`
    facts are this sweep's (wall time, samples, complete); otherwise its samples are recounted."""

    def __init__(self, m: matrix.Matrix, out_path: str, owns_run: bool, resume: bool):
        self.m, self.out_path, self.owns_run = m, out_path, owns_run
        self.previous_wall = (m.run.wall_s or 0.0) if resume else 0.0
        self.previous_samples = (m.run.samples or 0) if resume else 0
        self.start = self.last_save = time.monotonic()
        self.save_cost = 0.0
        self.samples = 0

    def take(self, r: unit_work.UnitResult) -> None:
        self.m.put(r.unit.op, r.unit.dtype, r.unit.direction, r.cell, r.aten)
        self.samples += r.samples
        if self.owns_run:
            self.m.run.samples = self.previous_samples + self.samples

    def save_now_and_then(self) -> None:
        if time.monotonic() - self.last_save > max(SAVE_EVERY_S, SAVE_SHARE * self.save_cost):
            self.save(False)

    def save(self, complete: bool) -> None:
        began = time.monotonic()
        if self.owns_run:
            self.m.run.wall_s = round(self.previous_wall + began - self.start, 1)
            self.m.run.complete = complete
        else:
            matrix.recount_samples(self.m)
        matrix.save(self.m, self.out_path)
        self.last_save = time.monotonic()
        self.save_cost = self.last_save - began


def start(
    units: list[samples.Unit],
    out_path: str,
    max_samples: int,
    *,
    resume: bool,
    merge: bool,
    inputs: str = "sample",
    platform: Platform | None = None,
    peer: Peer | None = None,
) -> tuple[matrix.Matrix, list[samples.Unit], bool]:
    """(the matrix the run writes into, the units to run, whether `out_path`'s matrix is kept whole).

    Where `out_path` holds a matrix: `resume` runs only the units it lacks; `merge` (a scoped run:
    some OpInfos, dtypes or a shard) replaces only the cells of `units` and keeps every other cell,
    each earlier cell staying until its new result arrives, so an interrupted merge loses nothing;
    otherwise (a full run) the (direction, dtype) slices the units run are replaced whole and the
    others kept.
    Both keep the whole file, so a file they cannot read, or one measured with another
    --max-samples, torch/jax or inputs (sample or reference), is an error rather than replaced.
    No run writes into a file measured on another platform than `platform` (when given), nor into
    one of another backend than `peer` (None: jaxdev's)."""
    if not os.path.exists(out_path):
        return matrix.empty(), list(units), False
    if resume or merge:
        old = matrix.load(out_path)
        matrix.check_inputs(old, inputs, out_path)
        if platform is not None:
            matrix.check_platform(old.measured_on, platform, out_path, "resuming it" if resume else "a scoped run")
        matrix.check_peer(old.peer, peer, out_path, "resuming it" if resume else "a scoped run")
        ran_with = old.run.max_samples
        if ran_with not in (None, max_samples):
            how = "resume" if resume else "a scoped run merges into it, so run it"
            raise AuditError(
                f"{out_path} was run with --max-samples {ran_with}; {how} with the same value"
                + ("" if resume else ", or write elsewhere with --out DIR")
            )
        if merge:
            matrix.check_versions(old.versions, out_path)
        todo = [u for u in units if old.get(u.op, u.dtype, u.direction) is None] if resume else list(units)
        return old, todo, True
    m = matrix.empty()
    # A full run replaces the slices it runs: an eager sweep keeps the compile cells of the matrix
    # it overwrites, a compile sweep the eager ones, and a float32 compile sweep the compile cells of
    # other dtypes (scoped runs measure those: every dtype is too long for the main job).
    old = None
    with contextlib.suppress(AuditError):  # not a readable matrix (or one of other inputs): this run replaces it
        old = matrix.load(out_path)
        matrix.check_inputs(old, inputs, out_path)
    if old is not None and platform is not None:  # another platform's cells are never replaced
        matrix.check_platform(old.measured_on, platform, out_path, "a full run")
    if old is not None:  # nor another backend's (a peer's version is the backend's)
        matrix.check_peer(old.peer, peer, out_path, "a full run")
    if old is not None and matrix.inputs(old) == inputs:
        m.keep_others(old, {(u.direction, u.dtype) for u in units})
    return m, list(units), False
