import click


@click.command("explain")
def command():
    """Not yet written."""
    raise click.ClickException("not implemented yet")
