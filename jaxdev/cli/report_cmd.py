"""`jaxdev report`: Markdown, HTML (with heatmap) and JUnit XML from a coverage matrix."""

from __future__ import annotations

import click

from jaxdev.cli.render import console


@click.command("report")
@click.argument("matrix_path", required=False, default="coverage/matrix.yaml", type=click.Path(dir_okay=False))
@click.option("--out", "out_dir", default="reports", show_default=True, type=click.Path(file_okay=False))
def command(matrix_path, out_dir):
    """Render MATRIX (default coverage/matrix.yaml) into OUT: summary.md, index.html with an
    op x dtype heatmap (forward and backward) and the failures by category, and junit.xml.

    \b
    Examples:
      jaxdev report
      jaxdev report coverage/baseline.yaml --out reports/
    """
    from jaxdev.audit import matrix, report

    m = matrix.load(matrix_path)
    for path in report.write(m, matrix_path, out_dir):
        console.print(f"wrote {path}")
