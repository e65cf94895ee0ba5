"""`jaxdev ops`: every aten overload and how it reaches the jax device."""

from __future__ import annotations

import click
from rich.table import Table

from jaxdev.cli.render import coloured, console, dump

STATUSES = ("native", "decomposed", "composite", "fallback", "missing", "autograd", "math", "lost")


@click.command("ops")
@click.argument("patterns", nargs=-1)
@click.option(
    "--tag",
    "tags",
    multiple=True,
    help="Keep ops with this tag (core, pointwise, view, inplace_view, ...). Repeatable.",
)
@click.option(
    "--status",
    "statuses",
    multiple=True,
    type=click.Choice(STATUSES),
    help="Keep ops whose device or autograd status is this. Repeatable.",
)
@click.option("--format", "fmt", type=click.Choice(["table", "yaml", "json"]), default="table", show_default=True)
def command(patterns, tags, statuses, fmt):
    """List aten overloads with their PrivateUse1 (jax) and AutogradPrivateUse1 status.

    PATTERNS are aten names (`aten::add.Tensor`, `add.Tensor`; `aten::add` or `add`: all its
    overloads), globs on them (`*pool*`; other namespaces: `prims::*`), or OpInfo names and globs
    (`nn.functional.relu`): the overloads its samples reach, per the index (coverage/matrix.yaml).

    \b
    Device status:   native | decomposed | composite | fallback | missing
    Autograd status: autograd | math | lost (backend fallback: gradients silently lost) | missing

    \b
    Examples:
      jaxdev ops
      jaxdev ops 'add*' sin --format yaml
      jaxdev ops nn.functional.gelu           # the overloads the OpInfo reaches
      jaxdev ops --tag core --status fallback
      jaxdev ops --status lost
    """
    from jaxdev.audit import dispatch, names, samples

    notes, chosen = [], None
    if patterns:
        chosen, notes = names.overloads_named(patterns, samples.op_db)
    rows = dispatch.query((), tags, statuses, names=chosen)
    totals = dispatch.counts(rows)
    if fmt != "table":
        click.echo(dump({"ops": [r.as_dict() for r in rows], "counts": totals}, fmt))
        return
    table = Table(show_edge=False, pad_edge=False)
    for col in ("op", "device", "autograd", "tags"):
        table.add_column(col)
    for r in rows:
        table.add_row(r.name, coloured(r.device), coloured(r.autograd), ",".join(r.tags))
    console.print(table)
    for note in notes:
        console.print(note, markup=False)
    console.print(f"{len(rows)} overloads")
    console.print("device:   " + "  ".join(f"{coloured(k)} {v}" for k, v in totals["device"].items()))
    console.print("autograd: " + "  ".join(f"{coloured(k)} {v}" for k, v in totals["autograd"].items()))
