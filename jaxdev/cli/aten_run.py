"""`jaxdev coverage --aten`: OUT/aten.yaml from the OpInfo matrix plus direct trials, with
progress, and the options of `coverage` it honours or refuses."""

from __future__ import annotations

import time

import click
from click.core import ParameterSource

from jaxdev.cli.progress import LogProgress, bar, clock, interrupt_on_term
from jaxdev.cli.render import coloured, console, print_platform

# What --aten does with each of `coverage`'s options (parameter names): it honours these ...
HONOURED = (
    "ops",
    "jobs",
    "timeout",
    "cache_dir",
    "out_dir",
    "matrix_path",
    "aten",
    "backend",
    "peer_path",
    "tpu_compile",
)
# ... and refuses these (they choose or run OpInfo cells, which --aten reads from --matrix).
REFUSED = {
    "all_reaching": "--all-reaching",
    "dtypes": "--dtype",
    "no_backward": "--no-backward",
    "mode": "--mode",
    "max_samples": "--max-samples",
    "shard": "--shard",
    "resume": "--resume",
    "merge_files": "--merge",
    "reference_inputs": "--reference-inputs",
}
TRIAL_TIMEOUT_S = 30.0  # --timeout's default for --aten: seconds per direct trial


def given(ctx: click.Context, name: str) -> bool:
    """Whether the user gave option `name` (on the command line or from the environment)."""
    return ctx.get_parameter_source(name) not in (ParameterSource.DEFAULT, ParameterSource.DEFAULT_MAP, None)


def refuse_unused(ctx: click.Context) -> None:
    """One sentence, exit 2, when --aten is given an option it does not use (or --matrix comes without --aten)."""
    if not ctx.params["aten"]:
        if given(ctx, "matrix_path"):
            raise click.UsageError("--matrix only applies with --aten (the OpInfo matrix that --aten aggregates)")
        return
    unused = [flag for name, flag in REFUSED.items() if given(ctx, name)]
    if unused:
        raise click.UsageError(
            f"--aten does not use {', '.join(unused)}: it reads the OpInfo cells from --matrix and tries the rest "
            "directly (it takes OPS, --jobs, --timeout, --cache-dir, --out and --matrix)"
        )


def run_aten(patterns, out_dir, matrix_path, jobs, timeout, cache_dir, probe, peer=None):
    """OUT/aten.yaml (OUT/PLATFORM/aten.yaml off CPU, platforms.folder; OUT/peers/NAME/... for a
    peer) from the OpInfo matrix plus direct trials, with progress; prints the counts. `timeout`:
    seconds per trial (None: TRIAL_TIMEOUT_S); `probe`: the platforms.Probe of the platform the
    trials run on, or the peer (peers.Selected) they run through."""
    from jaxdev.audit import AuditError, aten_build, aten_matrix, facts, peers

    problem = facts.SweepOptions(jobs=jobs, timeout=timeout or TRIAL_TIMEOUT_S).problems()
    if problem:
        raise AuditError(problem)
    platform = probe.result()[1] if peer else probe.result()
    name = peer and peer.name
    source = matrix_path or peers.path(out_dir, facts.MATRIX_FILE, name, platform)
    out_path = peers.path(out_dir, aten_matrix.ATEN_FILE, name, platform)
    print_platform(platform, out_path, peer)
    on_bar = console.is_terminal
    progress = bar(rate=False, disable=not on_bar)
    task = progress.add_task("direct trials", total=None)
    log = LogProgress(quiet=on_bar)
    log.line = lambda: (
        f"{log.done}/{log.total} overloads tried, elapsed {clock(time.monotonic() - log.start)}"
        + (f", ETA {clock((log.total - log.done) * (time.monotonic() - log.start) / log.done)}" if log.done else "")
    )

    def on_start(aggregated, todo):
        console.print(
            f"{aggregated} overloads judged from {source} or untriable by construction; {todo} to try", soft_wrap=True
        )
        log.total = todo
        progress.update(task, total=todo)

    def on_trial(name, result):
        log.done += 1
        log.tick()
        progress.update(task, advance=1, description=f"{name.removeprefix('aten::')[:28]:<28}")

    interrupt_on_term()
    with progress:
        m = aten_build.build(source, out_path, patterns=patterns, jobs=jobs, timeout=timeout, cache_dir=cache_dir,
                             on_start=on_start, on_trial=on_trial, platform=platform, peer=peer)  # fmt: skip
    print_aten_counts(m, out_path)


def print_aten_counts(m, out_path: str) -> None:
    """This run's verdicts (a scoped run merged into an existing file), then what the file holds."""
    this = m.meta.get("this_run")
    direct = (this or m.meta)["direct"]
    trials = f"{direct['tried']} direct trials in {direct['wall_s']:.1f} s"
    if this:
        console.print(
            f"this run, {this['overloads']} overloads: "
            + "  ".join(f"{coloured(k)} {v}" for k, v in this["verdicts"].items())
            + f"; {trials}",
            soft_wrap=True,
        )
    c = m.counts()
    console.print(
        f"{out_path} now holds {c['overloads']} overloads: " if this else f"{c['overloads']} overloads -> {out_path}: ",
        end="",
        soft_wrap=True,
    )
    console.print(
        "  ".join(f"{coloured(k)} {v}" for k, v in c["verdicts"].items())
        + f"; tried {c['tried_share']:.1%} of all, {c['tried_share_dense']:.1%} of the {c['dense']} neither sparse, "
        f"quantized nor nested, {c['tried_share_comparable']:.1%} of the {c['comparable']} of those with a CPU kernel"
        + ("" if this else f"; {trials}"),
        soft_wrap=True,
    )
    if c["untriable"]:
        console.print(
            "untriable: " + ", ".join(f"{k} {v}" for k, v in c["untriable"].items()), markup=False, soft_wrap=True
        )
