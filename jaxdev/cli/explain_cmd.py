"""`jaxdev explain`: one op, in plain words."""

from __future__ import annotations

import click

from jaxdev.cli.render import coloured, console, dump


@click.command("explain")
@click.argument("op", required=False)
@click.option(
    "--from-error", "error_text", help="Paste a NotImplementedError / dispatcher error; the op in it is explained."
)
@click.option(
    "--matrix",
    "matrix_path",
    type=click.Path(dir_okay=False),
    help="Coverage matrix to read results from (default coverage/matrix.yaml, then coverage/baseline.yaml).",
)
@click.option("--format", "fmt", type=click.Choice(["text", "yaml", "json"]), default="text", show_default=True)
def command(op, error_text, matrix_path, fmt):
    """Explain how OP reaches the jax device: schema, kernels and where they were registered,
    the CompositeImplicitAutograd rule, what its decomposition lacks, coverage results and the fix.

    OP is an aten overload (`aten::add.Tensor`), an op (`aten::reshape`, `reshape`) or an OpInfo
    name (`nn.functional.relu`).

    \b
    Examples:
      jaxdev explain aten::reshape
      jaxdev explain add
      jaxdev explain nn.functional.conv2d
      jaxdev explain --from-error "Could not run 'aten::reshape' with arguments from the 'Autogradjax' backend"
    """
    from jaxdev.audit import explain

    if bool(op) == bool(error_text):
        raise click.UsageError("give an OP or --from-error TEXT (one of them)")
    if error_text:
        op = explain.op_from_error(error_text)
        console.print(f"the error is about [bold]{op}[/bold]")
    report = explain.explain(op, matrix_path)
    if fmt != "text":
        click.echo(dump(report, fmt))
        return
    for info in report["overloads"]:
        console.rule(f"[bold]{info['name']}[/bold]")
        if info["schema"]:
            console.print(f"schema    {info['schema']}", markup=False)
        console.print(f"jax       {coloured(info['device'])}: {info['device_meaning']}")
        console.print(f"autograd  {coloured(info['autograd'])}: {info['autograd_meaning']}")
        for key, k in info["kernels"].items():
            console.print(
                f"  {key}: direct kernel {'yes' if k['direct'] else 'no'}; runs {k['computed'] or 'nothing'}",
                markup=False,
            )
        if info["jaxdev"]:
            console.print(
                "  jaxdev registry: " + ", ".join(f"{k}={v}" for k, v in info["jaxdev"].items()), markup=False
            )
        verdict = info.get("aten_matrix")
        if verdict:
            category = f" ({verdict['category']})" if verdict.get("category") else ""
            console.print(
                f"aten.yaml {coloured(verdict['verdict'])}{category} [{verdict['evidence']}]: ",
                end="",
            )
            console.print(verdict.get("reason", ""), markup=False)
            for dtype, dirs in verdict.get("cells", {}).items():
                console.print(f"  {dtype}: " + "  ".join(f"{d} {coloured(s)}" for d, s in dirs.items()))
            if verdict.get("repro") and verdict["verdict"] != "pass":
                console.print(f"  repro: {verdict['repro']}", markup=False)
        if info.get("rule"):
            console.print(f"[cyan]rule[/cyan]      {info['rule']}")
        if info.get("fix"):
            console.print(f"[yellow]fix[/yellow]       {info['fix']}")
    if report["opinfo"]:
        console.rule(f"[bold]OpInfo {report['opinfo']}[/bold]")
        if report["decomposition"]:
            console.print("reaches (CPU trace of one sample):")
            for row in report["decomposition"]:
                mark = "  <- first op the device lacks" if row["first_missing"] else ""
                console.print(f"  {row['op']:40} {coloured(row['device'])}{mark}")
    if report["coverage"]:
        console.rule("coverage")
        for row in report["coverage"]:
            console.print(
                f"{row['opinfo']} {row['dtype']} {row['direction']}: {coloured(row['status'])} {row.get('reason', '')}",
                markup="[" not in row.get("reason", ""),
            )
            if row.get("meaning"):
                console.print(f"    {row['meaning']}", markup=False)
            elif row["status"] not in ("pass", "skip") and row.get("repro"):
                console.print(f"    repro: {row['repro']}", markup=False)
    elif not report["coverage"]:
        console.print("no coverage results yet (run `jaxdev coverage`)", style="dim")
