"""`jaxdev ops`: every aten overload and how it reaches the jax device."""

from __future__ import annotations

import click

from jaxdev.audit import facts
from jaxdev.audit.facts import AUTOGRAD_STATUSES, DEVICE_STATUSES
from jaxdev.cli.render import dump, shown

STATUSES = tuple(dict.fromkeys(DEVICE_STATUSES + AUTOGRAD_STATUSES))


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
@click.option(
    "--live",
    is_flag=True,
    help="Read this checkout's dispatcher now instead of coverage/aten.yaml (loads the device: seconds).",
)
@click.option("--format", "fmt", type=click.Choice(["table", "yaml", "json"]), default="table", show_default=True)
def command(patterns, tags, statuses, live, fmt):
    """List aten overloads with their PrivateUse1 (jax) and AutogradPrivateUse1 status.

    Read from coverage/aten.yaml (the routes `jaxdev coverage --aten` recorded, with each overload's
    verdict) and torch's schemas: no device, under a second. --live asks this checkout's dispatcher
    (after adding or removing a kernel), as does a pattern in another namespace (`prims::*`).

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
      jaxdev ops --status lost --live
    """
    from jaxdev.audit import aten_matrix, listing

    path = None if live else aten_matrix.default_path()
    if listing.needs_live(patterns, path):
        rows, notes, source = _live(patterns, tags, statuses)
    else:
        chosen, notes = listing.chosen(patterns, path)
        rows, source = listing.rows(path, chosen, tags, statuses), shown(path)
    totals = listing.counts(rows)
    if fmt != "table":
        click.echo(dump({"ops": [r.as_dict() for r in rows], "counts": totals, "source": source}, fmt))
        return
    _table(rows)
    for note in notes:
        click.echo(note)
    click.echo(f"{len(rows)} overloads (from {source})")
    for what, counts in totals.items():
        click.echo(f"{what + ':':10}" + "  ".join(f"{_styled(k)} {v}" for k, v in counts.items()))


def _live(patterns, tags, statuses):
    from jaxdev.audit import dispatch, names, samples

    notes, chosen = [], None
    if patterns:
        chosen, notes = names.overloads_named(patterns, samples.op_db)
    return dispatch.query((), tags, statuses, names=chosen), notes, "this checkout's dispatcher"


def _styled(status: str, width: int = 0) -> str:
    """`status` padded to `width`, coloured as the rich output colours it (plain when piped)."""
    colour = facts.colour(status)
    padded = status.ljust(width)
    if colour == "dim":
        return click.style(padded, dim=True)
    return click.style(padded, fg=colour) if colour else padded


def _table(rows) -> None:
    """Plain aligned columns: rich's Table takes ~1.6 s for the 3,110 overloads; this, milliseconds."""
    if not rows:
        return
    w = min(max(len(r.name) for r in rows), 44) + 2  # the few longer names push their line
    click.echo(f"{'op':{w}}{'device':12}{'autograd':10}{'verdict':10}tags")
    lines = [
        f"{r.name:{w - 2}}  {_styled(r.device, 12)}{_styled(r.autograd, 10)}{_styled(getattr(r, 'verdict', '') or '-', 10)}{','.join(r.tags)}"
        for r in rows
    ]
    click.echo("\n".join(line.rstrip() for line in lines))
