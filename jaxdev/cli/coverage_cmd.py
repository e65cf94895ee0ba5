"""`jaxdev coverage`: run OpInfo samples on jax vs CPU and write the YAML matrix."""

from __future__ import annotations

import os

import click
from click.core import ParameterSource

from jaxdev.audit.facts import REFERENCE_MAX_SAMPLES
from jaxdev.cli.aten_run import given, refuse_unused, run_aten
from jaxdev.cli.options import scope_options
from jaxdev.cli.progress import run_sweep
from jaxdev.cli.render import coloured, console, print_platform

HELP = f"""Run PyTorch's OpInfo samples on jax and on CPU, compare, and write OUT/matrix.yaml.

    OPS are OpInfo names or globs (`add`, `nn.functional.*`), or aten names: an overload
    (`aten::add.Tensor`, `add.Tensor`), an op (`aten::add`: all its overloads) or a glob
    (`aten::*pool*`). An aten name runs the OpInfos whose samples reach it (per the `aten:` lists
    of coverage/matrix.yaml, or $JAXDEV_AUDIT_INDEX), those named after it when there are such
    (`add` for add.Tensor), else all of them (--all-reaching: all of them always). None means all of op_db.
    Each (op, dtype, direction) gets a status: pass, fallback (correct only through the CPU
    fallback), untraced (compile: correct, but the graph ran op by op), missing, lost_autograd,
    exception, wrong, dtype_mismatch, shape_mismatch, stride_mismatch (values right, strides not
    CPU's), crash, timeout, unsupported (jaxdev cannot hold the tensors by design: quantized
    dtypes, sparse layouts; left out of the shares) or skip. Directions: forward
    and backward (eager), compile and compile-backward (--mode compile: the forward through
    torch.compile(backend='jax'), and torch.autograd.grad through the compiled forward's backward
    graph; float32 unless --dtype, --dtype all for every dtype), fused (--mode fused: the forward in
    fused eager mode, judged as forward is; a value error deferred to the sync counts as the sample's).

    What a run keeps of OUT/matrix.yaml: a run narrowed by OPS, --dtype or --shard replaces only
    the cells it runs and keeps every other cell (the file must come from the same torch, jax and
    --max-samples); a run of everything replaces the directions it runs and keeps the others. The
    summary gives this run's cells, then what the file now holds. --out DIR writes elsewhere.

    Platforms: the cells are measured on the JAX platform the workers find (jax.devices()[0]),
    recorded in the file. A CPU run writes OUT/matrix.yaml; a run on any other platform writes
    OUT/PLATFORM/matrix.yaml (coverage/tpu/matrix.yaml), and OUT/PLATFORM/aten.yaml with --aten,
    never another platform's file. On an accelerator one process may hold the chip: run --jobs 1,
    in pieces with --shard K/N (each merged into the platform's file), --resume to finish one.

    Peer backends: --backend torchax runs the same samples, dtypes and directions through torchax
    (forward, backward through loss.backward(), and its jitted path as compile) in workers that never
    load jaxdev, judged by the same check, into OUT/peers/torchax/matrix.yaml (and aten.yaml with
    --aten), never jaxdev's files. torchax is no dependency of jaxdev: install it with pip install
    --no-deps torchax==0.0.13 (--no-deps: pip leaves the pinned torch alone), or apart with --target
    DIR and pass --peer-path DIR. explain --peers and report put its verdicts beside jaxdev's.

    --reference-inputs runs each OpInfo's reference inputs (its sample inputs plus extremal values,
    large and noncontiguous tensors) instead, into OUT/reference_matrix.yaml, never over the
    sample-input cells: {REFERENCE_MAX_SAMPLES} per cell unless --max-samples, spread evenly over all of them.

    \b
    Examples:
      jaxdev coverage sin add --dtype float32
      jaxdev coverage abs add.Tensor aten::mm --dtype float32
      jaxdev coverage 'nn.functional.*' --no-backward --jobs 2 --out /tmp/cov
      jaxdev coverage --shard 1/4 --out shard1   # then: jaxdev coverage --merge shard*/matrix.yaml
      jaxdev coverage --shard 3/32 --jobs 1 --max-samples 2 --resume   # on a TPU: coverage/tpu/matrix.yaml
      jaxdev coverage --resume                   # finish an interrupted sweep
      jaxdev coverage --mode compile             # add torch.compile coverage beside the eager cells
      jaxdev coverage --mode compile --dtype all --jobs 2   # compiled, forward and backward, every dtype
      jaxdev coverage --mode fused --dtype float32   # fused eager's forward cells, merged beside them
      jaxdev coverage --aten --jobs 2            # coverage/aten.yaml: a verdict for every aten overload
      jaxdev coverage --reference-inputs --no-backward --jobs 2   # coverage/reference_matrix.yaml
      jaxdev coverage --backend torchax --mode both --dtype float32 --max-samples 2   # coverage/peers/torchax/
"""


def share_text(share: dict) -> str:
    """'pass 85.1%, fallback 12.0% of 5900 measured cells' (unsupported and skipped cells left out)."""
    if not share.get("measured"):
        return "no measured cells"
    return f"pass {share['pass']:.1%}, fallback {share['fallback']:.1%} of {share['measured']} measured cells"


def print_summary(m, path: str | None = None, units=None):
    """With `units`: their cells (what this run measured); then every cell of `m`, what the file at
    `path` now holds (a scoped run keeps the cells it did not run)."""
    from jaxdev.audit import matrix
    from jaxdev.audit.facts import DIRECTIONS

    if units is not None:
        ran: dict[str, dict[str, int]] = {d: {} for d in DIRECTIONS}
        for u in units:
            cell = m.get(u.op, u.dtype, u.direction)
            if cell is not None:
                counts = ran[u.direction]
                counts[cell.status] = counts.get(cell.status, 0) + 1
        console.print(f"this run, {sum(sum(c.values()) for c in ran.values()):,} cells:")
        _print_counts(ran)
    if path:
        console.print(f"{path} now holds {matrix.cell_count(m):,} cells:", soft_wrap=True)
    _print_counts(m.summary)


def _print_counts(summary: dict[str, dict[str, int]]) -> None:
    from jaxdev.audit.facts import shares

    width = max((len(d) for d, counts in summary.items() if counts), default=0) + 1
    for direction, counts in summary.items():
        if counts:
            console.print(
                f"  {direction:{width}}"
                + "  ".join(f"{coloured(k)} {v}" for k, v in sorted(counts.items()))
                + f"  ({share_text(shares(counts))})",
                soft_wrap=True,
            )
    if any(counts.get(s) for counts in summary.values() for s in ("unsupported", "skip")):
        console.print(
            "  shares leave out unsupported cells (jaxdev cannot hold the tensors) and skipped ones",
            style="dim",
            soft_wrap=True,
        )


def resolve_ops(ops, all_reaching: bool):
    """The Selections of OPS (aten names through the index), each aten one printed with the OpInfos
    chosen for it."""
    from jaxdev.audit import names, samples

    selections = names.resolve(ops, samples.op_db(), all_reaching=all_reaching) if ops else []
    for s in selections:
        if s.is_aten:
            console.print(s.describe(), markup=False, soft_wrap=True)
    return selections


def print_aten_results(selections, m) -> None:
    """For each aten name among OPS: its OpInfos' cells by direction and status."""
    for s in selections:
        if not s.is_aten:
            continue
        per: dict[str, dict[str, int]] = {}
        for placed in m.cells():
            if placed.op in s.opinfos:
                counts = per.setdefault(placed.direction, {})
                counts[placed.cell.status] = counts.get(placed.cell.status, 0) + 1
        target = s.overloads[0] if len(s.overloads) == 1 else s.pattern
        cells = "; ".join(
            f"{d} " + " ".join(f"{coloured(k)} {v}" for k, v in sorted(c.items())) for d, c in per.items()
        )
        console.print(f"{target} (run as OpInfo {', '.join(s.opinfos)}): {cells or 'no cells'}", soft_wrap=True)


@click.command("coverage", help=HELP)
@scope_options()
@click.option("--shard", help="K/N: run the K-th of N slices of the OpInfos (merge the shards' matrices with --merge).")
@click.option("--resume", is_flag=True, help="Complete the partial matrix in --out instead of starting over.")
@click.option(
    "--out",
    "out_dir",
    default="coverage",
    show_default=True,
    type=click.Path(file_okay=False),
    help="Folder for matrix.yaml (and aten.yaml with --aten); a scoped run merges into the matrix there.",
)
@click.option(
    "--merge",
    "merge_files",
    multiple=True,
    type=click.Path(),
    help="Merge these shard matrices into --out instead of running.",
)
@click.option(
    "--cache-dir",
    type=click.Path(file_okay=False),
    help="JAX's persistent compilation cache (default $JAXDEV_AUDIT_CACHE, else ~/.cache/jaxdev/jax); an empty folder gives a cold run.",
)
@click.option(
    "--aten",
    is_flag=True,
    help="Write OUT/aten.yaml instead: the OpInfo matrix's cells per aten overload, and a direct trial "
    "(inputs built from the schema) for each overload no sample reaches. OPS then limit the overloads, "
    "whose verdicts replace theirs in an existing OUT/aten.yaml (the others are kept). It takes --jobs, "
    "--timeout (seconds per trial, default 30), --cache-dir, --out and --matrix, and refuses the other options.",
)
@click.option(
    "--reference-inputs",
    is_flag=True,
    help="Run each OpInfo's reference inputs, not its sample inputs, into OUT/reference_matrix.yaml "
    f"({REFERENCE_MAX_SAMPLES} per cell unless --max-samples, spread evenly over all of them; --max-samples 1000 runs every one).",
)
@click.option(
    "--matrix",
    "matrix_path",
    type=click.Path(dir_okay=False),
    help="With --aten: the OpInfo matrix to aggregate (default OUT/matrix.yaml).",
)
@click.option(
    "--backend",
    default="jaxdev",
    show_default=True,
    help="The backend the cells measure: jaxdev, or a peer (torchax), whose files go to OUT/peers/NAME/.",
)
@click.option(
    "--peer-path",
    type=click.Path(file_okay=False),
    envvar="JAXDEV_PEER_PATH",
    help="With a peer --backend: the folder it is installed in (pip install --no-deps --target DIR ...), "
    "first on its workers' PYTHONPATH only [env JAXDEV_PEER_PATH].",
)
@click.option(
    "--tpu-compile",
    is_flag=True,
    help="Without a TPU: the workers take jaxdev's TPU formulations and compile every program with XLA's "
    "TPU compiler for a v5e (libtpu: bash scripts/get_libtpu.sh); values from CPU. Into OUT/tpu-compile/.",
)
def command(
    ops,
    all_reaching,
    dtypes,
    no_backward,
    mode,
    jobs,
    timeout,
    max_samples,
    shard,
    resume,
    out_dir,
    merge_files,
    cache_dir,
    aten,
    reference_inputs,
    matrix_path,
    backend,
    peer_path,
    tpu_compile,
):
    ctx = click.get_current_context()
    refuse_unused(ctx)  # before the device loads: a refusal answers at once
    from jaxdev.audit import AuditError, facts, names, peers, platforms, sweep

    if backend == peers.JAXDEV and ctx.get_parameter_source("peer_path") == ParameterSource.COMMANDLINE:
        raise click.UsageError("--peer-path only applies with a peer --backend (torchax)")
    if tpu_compile:
        if backend != peers.JAXDEV:
            raise click.UsageError("--tpu-compile runs jaxdev's programs through the TPU's compiler, not a peer's")
        from jaxdev.audit import deviceless

        before = dict(os.environ)
        os.environ.update(deviceless.environment(os.environ))  # the probe's and the workers' environment
        ctx.call_on_close(lambda: (os.environ.clear(), os.environ.update(before)))  # in-process callers

    if out_dir.endswith((".yaml", ".yml")):
        raise AuditError(f"--out is a folder (matrix.yaml and aten.yaml are written in it), not a file: {out_dir}")
    file_name = facts.REFERENCE_MATRIX_FILE if reference_inputs else facts.MATRIX_FILE
    if merge_files:
        merge_into(_merged_files(merge_files, ops), out_dir, file_name)
        return
    peer = peers.select(backend, peer_path)  # its probe started: it imports the peer while op_db loads
    probe = peer or platforms.Probe()  # the platform the workers will find, asked while op_db loads
    if aten:
        run_aten(ops, out_dir, matrix_path, jobs, timeout if given(ctx, "timeout") else None, cache_dir, probe, peer)
        return
    parsed_shard = sweep.parse_shard(shard)
    selections = resolve_ops(ops, all_reaching)
    inputs = "reference" if reference_inputs else "sample"
    units = sweep.plan(names.opinfos(selections), dtypes, not no_backward, parsed_shard, mode, inputs=inputs)
    if peer is not None:
        units = peer_units(units, peer, mode)
    if not units:
        raise click.UsageError("nothing to run: no (op, dtype) pair matches these options")
    if reference_inputs and not given(ctx, "max_samples"):
        max_samples = facts.REFERENCE_MAX_SAMPLES
    options = facts.SweepOptions(jobs, timeout, max_samples, cache_dir, inputs)
    # A run narrowed to some OpInfos, dtypes or a shard merges into the matrix already there: only
    # a run of everything may replace it (its directions) whole.
    scope = {k: list(v) for k, v in (("ops", ops), ("dtypes", dtypes)) if v}
    info = {**({"shard": shard} if shard else {}), **({"scope": scope} if scope else {})}
    platform = probe.result()[1] if peer else probe.result()
    out_path = peers.path(out_dir, file_name, peer and peer.name, platform)
    print_platform(platform, out_path, peer)
    m = run_sweep(
        units, out_path, options, resume=resume, merge=bool(scope or shard), run_info=info or None, platform=platform,
        peer=peer,
    )  # fmt: skip
    print_summary(m, out_path, units)
    print_aten_results(selections, m)


def peer_units(units, peer, mode: str):
    """The units a peer runs: those of its directions (torchax: forward, backward, compile); a mode
    that runs none of them is one sentence."""
    kept = [u for u in units if u.direction in peer.adapter.DIRECTIONS]
    if units and not kept:
        raise click.UsageError(
            f"{peer.name} runs {', '.join(peer.adapter.DIRECTIONS)}: --mode {mode} runs none of those directions"
        )
    return kept


def _merged_files(merge_files, ops) -> list[str]:
    """`--merge a.yaml b.yaml`: a shell glob (`--merge shard*/matrix.yaml`) puts every file after the
    first among OPS; they are matrices to merge too. Anything else there is refused: a merge runs nothing."""
    files = [*merge_files, *(o for o in ops if o.endswith((".yaml", ".yml")))]
    others = [o for o in ops if not o.endswith((".yaml", ".yml"))]
    if others:
        raise click.UsageError(f"--merge merges matrix files and runs no op: {others[0]!r} is not a .yaml matrix")
    return files


def merge_into(files, out_dir: str, file_name: str) -> None:
    """`--merge`: the matrices in `files` into their platform's `file_name` under `out_dir`
    (matrix.combine's rule), with what it now holds."""
    from jaxdev.audit import matrix, peers

    inputs = [matrix.load(p) for p in files]
    merged = matrix.merge(inputs)
    out_path = peers.path(out_dir, file_name, merged.peer and merged.peer.name, merged.measured_on)
    same = os.path.exists(out_path) and any(os.path.samefile(p, out_path) for p in files if os.path.exists(p))
    existing = matrix.load(out_path) if os.path.exists(out_path) and not same else None
    combined = matrix.combine(inputs, existing, out_path)
    matrix.save(combined, out_path)
    how = (
        ""
        if existing is None
        else " (replacing its directions: a full sweep)"
        if matrix.full_sweep(inputs)
        else " (merged: its other cells kept)"
    )
    console.print(f"merged {len(files)} matrices -> {out_path}{how}", soft_wrap=True)
    print_summary(combined, out_path)
