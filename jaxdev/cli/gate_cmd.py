"""`jaxdev gate`: fail CI when coverage changes against the committed baseline."""

from __future__ import annotations

import os
import sys
import tempfile

import click

from jaxdev.audit import facts
from jaxdev.cli.coverage_cmd import print_aten_results, resolve_ops
from jaxdev.cli.options import scope_options
from jaxdev.cli.progress import run_sweep
from jaxdev.cli.render import coloured, console

HELP = """Rerun the baseline's cells (of OPS, or all of them) and compare with the baseline.

    OPS are OpInfo names, globs or aten names (`aten::add.Tensor`, `add.Tensor`, `aten::add`),
    as for `jaxdev coverage`. Only the cells the baseline holds are checked (narrowed by --dtype,
    --mode, --no-backward); the other cells of OPS are listed as `not in baseline` and neither
    run nor failing, unless --strict (or --accept, which records them).

    Exit 1 on any change, each printed as `KIND op dtype direction: old -> new`:

    \b
      new failure      a passing (or new) cell fails
      unexpected pass  a failing cell passes: accept it, so the baseline only ratchets forward
      changed kind     a failure became another failure (wrong -> exception, missing -> wrong);
                       it fails the gate too, since the device behaves differently from the
                       record, better or worse, and the new reason deserves a look
      new pass         (--strict) a cell the baseline lacks passes; new failure if it fails
      new unsupported  (--strict) a cell the baseline lacks that jaxdev cannot hold (quantized, sparse)

    `unsupported` cells (jaxdev cannot hold the tensors by design) are neither passes nor
    failures: pass -> unsupported is a new failure, unsupported -> pass an unexpected pass.

    --accept rewrites the baseline with the fresh results. A missing, malformed or
    wrong-version baseline is an error (exit 2) and nothing is overwritten.

    Platforms: a baseline records the JAX platform it was measured on, and is gated only there.
    The default baseline is coverage/baseline.yaml on CPU, coverage/PLATFORM/baseline.yaml on any
    other platform (coverage/tpu/baseline.yaml: create it there with --init).

    \b
    Examples:
      jaxdev gate                                   # CI: everything in coverage/baseline.yaml
      jaxdev gate sin add                           # only the baseline's cells of these OpInfos
      jaxdev gate add.Tensor --dtype float32        # the OpInfos that reach aten::add.Tensor
      jaxdev gate abs --strict                      # abs's cells the baseline lacks fail the gate
      jaxdev gate sin --accept                      # record an improvement
      jaxdev gate sin add --dtype float32 --init --baseline coverage/baseline.yaml
      jaxdev gate --jobs 1                          # on a TPU: coverage/tpu/baseline.yaml
"""


@click.command("gate", help=HELP)
@click.option(
    "--baseline",
    "baseline_path",
    type=click.Path(dir_okay=False),
    help=f"The baseline matrix (default {facts.DEFAULT_BASELINE}; on another platform than CPU, "
    "coverage/PLATFORM/baseline.yaml).",
)
@click.option("--accept", is_flag=True, help="Record the fresh results in the baseline instead of failing.")
@click.option("--init", is_flag=True, help="Create the baseline from a fresh run of OPS (refuses to overwrite one).")
@click.option(
    "--strict",
    is_flag=True,
    help="Also run the cells of OPS the baseline does not hold, and fail the gate on them.",
)
@scope_options(defaults_from_baseline=True)
def command(
    ops, baseline_path, accept, init, strict, all_reaching, dtypes, no_backward, mode, jobs, timeout, max_samples
):
    from jaxdev.audit import AuditError, platforms

    probe = platforms.Probe()  # the platform the workers will find, asked while op_db loads
    if baseline_path is None:
        baseline_path = platforms.path(os.path.dirname(facts.DEFAULT_BASELINE), "baseline.yaml", probe.result())
    if init:
        if os.path.exists(baseline_path):
            raise AuditError(f"{baseline_path} already exists; use --accept to update it")
        if not ops:
            raise click.UsageError("--init needs the OPS to put in the new baseline")
        _init(ops, baseline_path, all_reaching, dtypes, no_backward, mode, (jobs, timeout, max_samples, probe))
        return
    how = (jobs, timeout, max_samples, probe)
    _check(ops, baseline_path, accept, strict, all_reaching, dtypes, no_backward, mode, how)


def _init(ops, baseline_path, all_reaching, dtypes, no_backward, mode, how) -> None:
    """`--init`: a new baseline from a fresh run of OPS."""
    from jaxdev.audit import sweep

    jobs, timeout, max_samples, probe = how
    selections = resolve_ops(ops, all_reaching)
    units = sweep.plan([o for s in selections for o in s.opinfos], dtypes, not no_backward, mode=mode or "eager")
    options = facts.SweepOptions(jobs, timeout or facts.DEFAULT_TIMEOUT_S, max_samples or facts.DEFAULT_MAX_SAMPLES)
    run_sweep(units, baseline_path, options, platform=probe.result())
    console.print(f"baseline written: {baseline_path}")


def _check(ops, baseline_path, accept, strict, all_reaching, dtypes, no_backward, mode, how) -> None:
    """Rerun the baseline's cells in scope and compare; exit 1 on a change (unless --accept)."""
    from jaxdev.audit import gate

    jobs, timeout, max_samples, probe = how
    baseline = gate.load_baseline(baseline_path)
    scope = gate.scope(baseline, ops, not no_backward, dtypes, mode, strict=strict or accept, all_reaching=all_reaching)
    gate.check_platform(baseline, baseline_path, probe.result())  # after op_db loaded: the probe ran meanwhile
    for s in scope.selections:
        if s.is_aten:
            console.print(s.describe(), markup=False, soft_wrap=True)
    _print_not_in_baseline(
        scope.not_in_baseline,
        "run and recorded (--accept)"
        if accept
        else "run, and failing the gate (--strict)"
        if strict
        else "not run, not failing the gate (--strict runs them)",
    )
    units = scope.units
    if not units:
        console.print(
            f"[yellow]nothing to check[/yellow]: {baseline_path} holds no cells of {' '.join(ops)} in this scope"
        )
        return
    options = facts.SweepOptions(
        jobs,
        timeout or baseline.run.timeout_s or facts.DEFAULT_TIMEOUT_S,
        max_samples or baseline.run.max_samples or facts.DEFAULT_MAX_SAMPLES,
    )
    fresh = _fresh(units, options, baseline.measured_on)
    changes = gate.compare(baseline, fresh)
    _print_changes(changes)
    print_aten_results(scope.selections, fresh)
    _verdict(changes, baseline, fresh, baseline_path, len(units), accept, strict, ops, scope)


def _fresh(units, options, platform):
    """The units' cells, run on `platform` into a temporary matrix (read back as written: what
    --accept records)."""
    from jaxdev.audit import matrix

    with tempfile.TemporaryDirectory(prefix="jaxdev-gate-") as tmp:
        path = os.path.join(tmp, "matrix.yaml")
        run_sweep(units, path, options, temporary=True, platform=platform)  # its path: gone at exit
        return matrix.load(os.path.join(tmp, "matrix.yaml"))


def _print_changes(changes) -> None:
    for c in changes:
        console.print(
            f"{c.kind:15} {c.op} {c.dtype} {c.direction}: {coloured(c.old)} -> {coloured(c.new)}"
            + (f"  ({c.reason[:160]})" if c.reason and c.new != "pass" else ""),
            markup=True,
            soft_wrap=True,
        )


def _verdict(changes, baseline, fresh, baseline_path, cells, accept, strict, ops, scope) -> None:
    """--accept records the fresh cells; otherwise pass, or fail with exit 1."""
    from jaxdev.audit import gate

    if accept:
        gate.accept(baseline, fresh, baseline_path)
        console.print(f"accepted {len(changes)} changes over {cells} cells -> {baseline_path}")
        return
    if gate.failed(changes):
        kinds = ", ".join(f"{n} {kind}" for kind, n in gate.tally(changes).items())
        console.print(
            f"[red]gate failed[/red]: {len(changes)} changes over {cells} cells ({kinds}); "
            "fix them or run with --accept"
        )
        sys.exit(1)
    absent = len(scope.not_in_baseline) if not (strict or accept) else 0
    note = f"; {absent} cells of {' '.join(ops)} not in baseline (not run)" if absent else ""
    console.print(f"[green]gate passed[/green]: {cells} cells match {baseline_path}{note}", soft_wrap=True)


def _print_not_in_baseline(units, note: str) -> None:
    """One line per OpInfo: the cells of OPS the baseline does not hold, by direction."""
    per: dict[str, dict[str, list[str]]] = {}
    for u in units:
        per.setdefault(u.op, {}).setdefault(u.direction, []).append(u.dtype)
    for op, dirs in per.items():
        n = sum(len(d) for d in dirs.values())
        what = "; ".join(f"{d} {', '.join(dtypes)}" for d, dtypes in dirs.items())
        console.print(f"not in baseline  {op}: {n} cells ({what}): {note}", markup=False, soft_wrap=True)
