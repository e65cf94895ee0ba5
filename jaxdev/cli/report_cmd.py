"""`jaxdev report`: Markdown, an explorable HTML page and JUnit XML from a coverage matrix."""

from __future__ import annotations

import os

import click

from jaxdev.audit import facts
from jaxdev.cli.render import console


@click.command("report")
@click.argument("matrix_path", required=False, default="coverage/matrix.yaml", type=click.Path(dir_okay=False))
@click.option("--out", "out_dir", default="reports", show_default=True, type=click.Path(file_okay=False))
@click.option(
    "--baseline",
    "baseline_path",
    type=click.Path(dir_okay=False),
    help=f"Baseline matrix whose changed cells the page lists (default {facts.DEFAULT_BASELINE} when it exists).",
)
@click.option(
    "--aten",
    "aten_path",
    type=click.Path(dir_okay=False),
    help="Aten-level matrix for the page's aten view (default aten.yaml beside MATRIX when it exists).",
)
def command(matrix_path, out_dir, baseline_path, aten_path):
    """Render MATRIX (default coverage/matrix.yaml) into OUT: summary.md; index.html, one
    self-contained page to explore the cells (filters by status, dtype, direction and family,
    search, a detail per cell with its reason and repro, the aten overloads, the cells changed
    since the baseline); and junit.xml. A reference_matrix.yaml beside MATRIX (coverage
    --reference-inputs) adds a section to summary.md. Other platforms' matrices beside MATRIX
    (coverage/tpu/matrix.yaml) add their rows to the page, with a platform filter, and to
    summary.md each platform's shares and the cells whose status differs between platforms. A peer
    backend's matrix beside it (coverage/peers/torchax/matrix.yaml, `coverage --backend torchax`)
    adds its rows to the page, a section to summary.md (the cells one passes and the other fails,
    counted) and OUT/peers/NAME.md (every OpInfo and dtype, jaxdev's status beside the peer's).

    \b
    Examples:
      jaxdev report
      jaxdev report /tmp/cov/matrix.yaml --out /tmp/cov/report --baseline coverage/baseline.yaml
      jaxdev report coverage/tpu/matrix.yaml --out reports/tpu   # one platform's matrix on its own
    """
    from jaxdev.audit import AuditError, matrix, peers, platforms, report, report_files

    src = report.Sources(matrix.load(matrix_path), matrix_path)
    own = platforms.path(os.path.dirname(facts.DEFAULT_BASELINE), "baseline.yaml", src.matrix.measured_on)
    if baseline_path is None and os.path.exists(own):
        baseline_path = own  # the baseline of the matrix's platform
    if baseline_path is not None:
        if not os.path.exists(baseline_path):
            raise AuditError(f"no baseline at {baseline_path}")
        src.baseline, src.baseline_path = matrix.load(baseline_path), baseline_path
    if aten_path is not None and not os.path.exists(aten_path):
        raise AuditError(f"no aten matrix at {aten_path}")
    src.aten_path = aten_path or os.path.join(os.path.dirname(matrix_path), "aten.yaml")
    if os.path.exists(src.aten_path):
        src.aten = report.load_aten(src.aten_path)
    # the reference-input cells beside MATRIX (coverage --reference-inputs) get their own section
    reference_path = os.path.join(os.path.dirname(matrix_path), facts.REFERENCE_MATRIX_FILE)
    if os.path.exists(reference_path) and not os.path.samefile(reference_path, matrix_path):
        src.reference, src.reference_path = matrix.load(reference_path), reference_path
    src.platforms = [(path, matrix.load(path)) for _, path in platforms.beside(matrix_path)[1:]]
    if src.matrix.peer is None:  # jaxdev's matrix: each peer backend's beside it (coverage/peers/NAME/)
        src.peers = [(path, matrix.load(path)) for _, path in peers.beside(matrix_path, facts.MATRIX_FILE)]
    for path in report_files.write(src, out_dir):
        console.print(f"wrote {path}")
