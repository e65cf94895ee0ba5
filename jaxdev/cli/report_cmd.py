import click


@click.command("report")
def command():
    """Not yet written."""
    raise click.ClickException("not implemented yet")
