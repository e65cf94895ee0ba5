"""`jaxdev explain`: one op, in plain words; `--dev` adds what a kernel author needs."""

from __future__ import annotations

import click
from rich.markup import escape

from jaxdev.audit.facts import DIRECTIONS
from jaxdev.cli.render import coloured, console, dump, shown


@click.command("explain")
@click.argument("op", required=False)
@click.option(
    "--from-error", "error_text", help="Paste a NotImplementedError / dispatcher error; the op in it is explained."
)
@click.option(
    "--matrix",
    "matrix_path",
    type=click.Path(dir_okay=False),
    help="Coverage matrix to read cells from (default coverage/matrix.yaml, then coverage/baseline.yaml).",
)
@click.option(
    "--dev",
    is_flag=True,
    help="Add the kernel author's section: routes through this checkout's dispatcher, where the kernels are "
    "registered, what registering one implies, the ops the OpInfo reaches (loads the device: seconds).",
)
@click.option(
    "--peers",
    is_flag=True,
    help="Put each peer backend's verdict and cells beside jaxdev's (coverage/peers/NAME/, from `jaxdev "
    "coverage --backend torchax`): per dtype and direction, and the cells one passes and the other fails.",
)
@click.option("--format", "fmt", type=click.Choice(["text", "yaml", "json"]), default="text", show_default=True)
def command(op, error_text, matrix_path, dev, peers, fmt):
    """Explain OP on the jax device: whether it works, in which dtypes and directions it passes or
    fails, and what to do. Read from coverage/aten.yaml, coverage/matrix.yaml and torch's schemas
    (no device: under a second); --dev adds the kernel author's view, live from this checkout.

    OP is an aten overload (`aten::add.Tensor`), an op (`aten::reshape`, `reshape`) or an OpInfo
    name (`nn.functional.relu`).

    \b
    Examples:
      jaxdev explain aten::reshape
      jaxdev explain add
      jaxdev explain nn.functional.conv2d --dev
      jaxdev explain aten::linear --peers     # jaxdev's verdict beside torchax's
      jaxdev explain --from-error "Could not run 'aten::reshape' with arguments from the 'Autogradjax' backend"
    """
    from jaxdev.audit import explain

    if bool(op) == bool(error_text):
        raise click.UsageError("give an OP or --from-error TEXT (one of them)")
    if error_text:
        op = explain.op_from_error(error_text)
        if fmt == "text":
            console.print(f"the error is about [bold]{escape(op)}[/bold]")
    report = explain.explain(op, matrix_path, dev=dev, peers=peers)
    if fmt != "text":
        click.echo(dump(report, fmt))
        return
    if report.get("stale"):
        _line(f"[yellow]note[/yellow]: {escape(report['stale'])}; its verdicts may be out of date")
    for answer in report["overloads"]:
        print_answer(answer)
    if report["coverage"]:
        print_cells(report["coverage"])
    elif report["opinfo"]:
        _line(f"[dim]no cells of OpInfo {escape(report['opinfo'])} in the coverage matrix[/dim]")
    for entry in report.get("peer_cells") or ():
        print_peer_cells(report["opinfo"], entry)
    if report.get("dev"):
        print_dev(report["dev"])
    else:
        _line(f"[dim]for kernel authors: jaxdev explain {escape(op)} --dev[/dim]")


def _line(text: str = "") -> None:
    console.print(text, soft_wrap=True)  # never wrapped by rich: a path or a repro stays whole


def print_answer(a: dict) -> None:
    verdict = a.get("verdict")
    head = f"[bold]{escape(a['name'])}[/bold]" + (f"  {coloured(verdict)}" if verdict else "")
    if a.get("category"):
        head += f" ({coloured(a['category'])})"
    _line(head)
    if a.get("schema"):
        _line(f"  schema    {escape(a['schema'])}")
    if a.get("runs"):
        _line(f"  on jax    {escape(a['runs'])}; {escape(a['gradients'] or '')}")
    if a.get("reason"):
        _line(f"  why       {escape(a['reason'])}" + (escape(f" [{a['evidence']}]") if a.get("evidence") else ""))
    for status, where in (a.get("by_status") or {}).items():
        _line(f"  {coloured(status)}{' ' * max(1, 10 - len(status))}{escape('; '.join(where))}")
    if a.get("repro") and verdict not in (None, "pass"):
        _line(f"  repro     {escape(a['repro'])}")
    if a.get("platforms"):
        _line(f"  platforms {escape(a['platforms']['line'])}")
    if a.get("peers"):
        _line(f"  backends  {escape(a['peers']['line'])}")
    _line(f"  [bold]to do[/bold]     {escape(a['todo'])}")
    _line()


def print_cells(c: dict) -> None:
    _line(f"[bold]OpInfo {escape(c['opinfo'])}[/bold] ({escape(shown(c['source']))}), status per dtype and direction:")
    directions = [d for d in DIRECTIONS if any(d in dirs for dirs in c["grid"].values())]
    width = max(len(d) for d in c["grid"]) + 2
    col = {d: max(13, len(d) + 2) for d in directions}  # a status fits 13 (stride_mismatch), a name may not
    _line("  " + " " * width + "".join(f"{d:{col[d]}}" for d in directions))
    for dtype, dirs in c["grid"].items():
        cells = "".join(
            coloured(dirs[d]) + " " * (col[d] - len(dirs[d])) if d in dirs else " " * col[d] for d in directions
        )
        _line(f"  {dtype:{width}}{cells.rstrip()}")
    for p in c["problems"]:
        detail = f": {escape(p['reason'])}" if p.get("reason") else ""
        _line(f"  {p['dtype']} {p['direction']} {coloured(p['status'])}{detail}")
        if p.get("repro") and p["status"] != "pass":
            _line(f"    repro: {escape(p['repro'])}")
    if c.get("unsupported"):
        u = c["unsupported"]
        _line(f"  {coloured('unsupported')} ({escape(', '.join(u['cells']))}): {escape(u['meaning'])}")
    if "by_platform" in c:
        print_platforms(c["by_platform"])
    _line()


def print_platforms(rows: list[dict]) -> None:
    """The cells whose status differs between the platforms' matrices, each platform's side by side."""
    if not rows:
        _line("  [dim]on every platform with a matrix beside it, each cell has the same status[/dim]")
        return
    _line(f"  [bold]on each platform[/bold] ({len(rows)} cells differ):")
    for row in rows:
        _line(f"  {escape(row['line'])}")


def print_peer_cells(opinfo: str, entry: dict) -> None:
    """An OpInfo's cells on jaxdev beside a peer's: a grid of 'jaxdev / peer' statuses per dtype and
    direction, the counts, and the cells whose status differs with both reasons."""
    peer = entry["peer"]
    _line(f"[bold]OpInfo {escape(opinfo)}[/bold], jaxdev / {escape(peer)} ({escape(shown(entry['path']))}):")
    directions = [d for d in DIRECTIONS if any(d in dirs for dirs in entry["grid"].values())]
    if directions:
        width = max(len(d) for d in entry["grid"]) + 2
        col = {d: max(28, len(d) + 2) for d in directions}
        _line("  " + " " * width + "".join(f"{d:{col[d]}}" for d in directions))
        for dtype, dirs in entry["grid"].items():
            cells = ""
            for d in directions:
                pair = dirs.get(d)
                text = f"{pair[0]} / {pair[1]}" if pair else ""
                shade = "" if not pair or pair[0] == pair[1] else "[yellow]"
                cells += (f"{shade}{text}[/yellow]" if shade else text) + " " * (col[d] - len(text))
            _line(f"  {dtype:{width}}{cells.rstrip()}")
    _line(f"  {escape(entry['sentence'])}")
    for row in entry["differing"]:
        _line(f"  {escape(row['line'])}")
    _line()


def print_dev(d: dict) -> None:
    console.rule("[bold]for kernel authors[/bold] (this checkout's dispatcher and registry, live)")
    for info in d["overloads"]:
        _line(f"[bold]{escape(info['name'])}[/bold]  tags: {escape(', '.join(info['tags']) or 'none')}")
        _line(f"  PrivateUse1          {coloured(info['device'])}: {escape(info['device_meaning'])}")
        _line(f"  AutogradPrivateUse1  {coloured(info['autograd'])}: {escape(info['autograd_meaning'])}")
        for key, k in info["kernels"].items():
            registered = "a kernel registered for it" if k["direct"] else "no kernel of its own"
            _line(f"    {key}: {registered}; runs {escape(k['runs'] or 'nothing')}")
        for key, value in info["jaxdev"].items():
            _line(f"  jaxdev {key.replace('_', ' ')}: {escape(value)}")
        if info.get("changed"):
            _line(f"  [yellow]changed[/yellow]  {escape(info['changed'])}")
        if info.get("rule"):
            _line(f"  [cyan]rule[/cyan]     {escape(info['rule'])}")
        if info.get("fix"):
            _line(f"  [yellow]fix[/yellow]      {escape(info['fix'])}")
    r = d.get("reaches")
    if r:
        _line(f"OpInfo {escape(r['opinfo'])}'s samples reach (recorded on CPU over its cells):")
        for row in r["ops"]:
            mark = "  <- first op the device lacks" if row["first_missing"] else ""
            _line(f"  {escape(row['op']):40} {coloured(row['device'])}{mark}")
