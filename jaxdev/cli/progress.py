"""Progress of the long runs (a sweep, the direct trials): rich's bar in a terminal, a plain line
every LOG_EVERY_S in a log (CI, nohup, pipes), and SIGTERM handled as Ctrl-C."""

from __future__ import annotations

import os
import signal
import sys
import time

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from jaxdev.cli.render import console


def term_as_interrupt(*_):
    raise KeyboardInterrupt


def interrupt_on_term() -> None:
    """A kill (SIGTERM) ends the run as Ctrl-C does: what it finished is saved."""
    signal.signal(signal.SIGTERM, term_as_interrupt)


class LogProgress:
    """Progress for logs: one plain line every LOG_EVERY_S, where rich's bar would only redraw a terminal."""

    LOG_EVERY_S = 10.0

    def __init__(self, quiet: bool):
        self.quiet = quiet
        self.start = self.last = time.monotonic()
        self.done = self.total = self.already = self.samples = 0

    def line(self) -> str:
        elapsed = time.monotonic() - self.start
        ran = self.done - self.already
        eta = (self.total - self.done) * elapsed / ran if ran else None
        return (
            f"{self.done}/{self.total} units, {self.samples} samples, "
            f"{self.samples / max(elapsed, 1e-9):.1f} samples/s, elapsed {clock(elapsed)}, "
            f"ETA {clock(eta) if eta is not None else '?'}"
        )

    def tick(self) -> None:
        if not self.quiet and time.monotonic() - self.last >= self.LOG_EVERY_S:
            self.last = time.monotonic()
            console.print(self.line(), markup=False)


def clock(seconds: float) -> str:
    m, s = divmod(int(seconds), 60)
    return f"{m // 60}:{m % 60:02d}:{s:02d}" if m >= 60 else f"{m}:{s:02d}"


def bar(*, rate: bool, disable: bool) -> Progress:
    """rich's progress bar: description, bar, done/total, [rate], elapsed and ETA."""
    columns = [TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn()]
    if rate:
        columns.append(TextColumn("{task.fields[rate]}"))
    columns += [TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn()]
    return Progress(*columns, console=console, disable=disable)


def run_sweep(
    units, out_path, options, *, resume=False, merge=False, run_info=None, quiet=False, temporary=False, platform=None,
    peer=None,
):  # fmt: skip
    """The sweep with a progress bar (in a terminal) or a progress line every 10 s (in a log);
    prints wall time and samples/s. Shared with `gate`, whose matrix is `temporary`: its path is
    never printed (it is gone when gate exits). `platform`: the one the workers must run on;
    `peer`: the peer backend they test (peers.Selected; None: jaxdev)."""
    from jaxdev.audit import sweep

    merging = merge and not resume and os.path.exists(out_path)
    interrupt_on_term()
    on_bar = not quiet and console.is_terminal
    progress = bar(rate=True, disable=not on_bar)
    log = LogProgress(quiet=quiet or on_bar)
    task = progress.add_task("units", total=len(units), rate="")

    def on_start(already, todo):
        log.done = log.already = already
        log.total = already + todo
        progress.update(task, completed=already, total=already + todo)

    def on_sample():
        log.samples += 1
        elapsed = progress.tasks[0].elapsed or 1e-9
        progress.update(task, rate=f"{log.samples / elapsed:.1f} samples/s")
        log.tick()

    def on_unit(r):
        log.done += 1
        log.tick()
        progress.advance(task)
        progress.update(task, description=f"{r.unit.op[:24]:<24}")

    with progress:
        try:
            m = sweep.sweep(units, out_path, options, resume=resume, merge=merge, run_info=run_info,
                            on_start=on_start, on_unit=on_unit, on_sample=on_sample, platform=platform,
                            peer=peer)  # fmt: skip
        except KeyboardInterrupt:
            progress.stop()
            console.print(f"[yellow]interrupted[/yellow]: {_left_behind(out_path, temporary, merging)}", soft_wrap=True)
            sys.exit(130)
    if not quiet:
        _print_rate(m.run.this_run, "" if temporary else out_path, merging)
    return m


def _print_rate(this, out_path: str, merging: bool) -> None:
    """`this`: the sweep's model.ThisRun."""
    rate = this.samples / this.wall_s if this.wall_s else 0.0
    where = f" -> {out_path}" + (" (merged: its other cells kept)" if merging else "") if out_path else ""
    console.print(
        f"{this.units} units, {this.samples} samples in {this.wall_s:.1f} s ({rate:.1f} samples/s){where}",
        soft_wrap=True,
    )


def _left_behind(out_path: str, temporary: bool, merging: bool) -> str:
    """What an interrupted sweep leaves on disk, and how to finish it."""
    if temporary:
        return "nothing was recorded"
    if merging:
        return (
            f"{out_path} holds the cells this run finished and its earlier results for the rest; "
            "run the same command again to finish"
        )
    return f"partial matrix in {out_path}; complete it with the same command and --resume"
