import click


@click.command("gate")
def command():
    """Not yet written."""
    raise click.ClickException("not implemented yet")
