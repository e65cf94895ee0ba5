import click


@click.command("coverage")
def command():
    """Not yet written."""
    raise click.ClickException("not implemented yet")
