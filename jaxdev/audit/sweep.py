"""A coverage sweep: choose the units, skip what a partial matrix already has, run the rest in
workers, and keep the matrix on disk current (atomically) so a killed sweep can be resumed."""

from __future__ import annotations

import contextlib
import os
import re
import time
from collections.abc import Callable

from jaxdev.audit import AuditError, matrix, runner, samples
from jaxdev.audit.facts import SweepOptions

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
) -> list[samples.Unit]:
    names = samples.select(ops, all_reaching=all_reaching)
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
    run_info: dict | None = None,
    on_start: Callable[[int, int], None] | None = None,
    on_unit: Callable[[runner.UnitResult], None] | None = None,
    on_sample: Callable[[], None] | None = None,
) -> dict:
    """Runs the units, writes `out_path` as it goes, and returns the final matrix."""
    problem = options.problems()
    if problem:
        raise AuditError(problem)
    max_samples = options.max_samples
    info = {"max_samples": max_samples, "timeout_s": options.timeout, **(run_info or {})}
    if resume and os.path.exists(out_path):
        m = matrix.load(out_path)
        if m.run.get("max_samples") not in (None, max_samples):
            raise AuditError(
                f"{out_path} was run with --max-samples {m.run['max_samples']}; resume with the same value"
            )
        todo = [u for u in units if m.get(u.op, u.dtype, u.direction) is None]
    else:
        m = matrix.empty()
        todo = list(units)
        if os.path.exists(out_path):
            # A run replaces the directions it runs: an eager sweep keeps the compile cells of the
            # matrix it overwrites, a compile sweep keeps the eager ones.
            with contextlib.suppress(AuditError):  # not a readable matrix: this run replaces it
                m.keep_directions(matrix.load(out_path), {u.direction for u in units})
    previous_wall = m.run.get("wall_s", 0.0) if resume else 0.0
    previous_samples = m.run.get("samples", 0) if resume else 0
    m.run.update(info, complete=False)
    if on_start:
        on_start(len(units) - len(todo), len(todo))
    start = time.monotonic()
    last_save = [start]
    save_cost = [0.0]

    def save(complete: bool):
        began = time.monotonic()
        m.run["wall_s"] = round(previous_wall + began - start, 1)
        m.run["complete"] = complete
        matrix.save(m, out_path)
        last_save[0] = time.monotonic()
        save_cost[0] = last_save[0] - began

    done_samples = [0]

    def on_result(r: runner.UnitResult):
        m.put(r.unit.op, r.unit.dtype, r.unit.direction, r.entry, r.aten)
        done_samples[0] += r.samples
        m.run["samples"] = previous_samples + done_samples[0]
        if on_unit:
            on_unit(r)
        if time.monotonic() - last_save[0] > max(SAVE_EVERY_S, SAVE_SHARE * save_cost[0]):
            save(False)

    save(False)
    try:
        runner.run(todo, options, on_result=on_result, on_sample=on_sample)
    except BaseException:
        save(False)  # Ctrl-C or kill: a partial matrix that --resume completes
        raise
    m.run["this_run"] = {
        "units": len(todo),
        "samples": done_samples[0],
        "wall_s": round(time.monotonic() - start, 1),
    }
    save(True)
    return m
