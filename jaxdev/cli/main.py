"""`jaxdev` entry point: the command group and its user-error policy."""

from __future__ import annotations

import os
import sys

import click

from jaxdev.audit import AuditError


class Group(click.Group):
    """Turns AuditError (a mistake the user can fix) and click's usage errors into one red
    sentence and exit code 2."""

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True, **extra):
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, standalone_mode, **extra)
        try:
            rv = super().main(args, prog_name, complete_var, False, **extra)
        except BrokenPipeError:  # `jaxdev ops | head`: the reader has what it wanted
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error at exit
            sys.exit(0)
        except click.exceptions.NoArgsIsHelpError as e:  # bare `jaxdev`: the help, as asked
            click.echo(e.ctx.get_help())
            sys.exit(0)
        except click.UsageError as e:
            where = e.ctx.command_path if e.ctx else "jaxdev"
            message = e.format_message().rstrip(".").replace("\n", " ").replace(". (", " (")
            click.secho(f"error: {message} (see `{where} --help`)", fg="red", err=True)
            sys.exit(2)
        except click.ClickException as e:
            click.secho(f"error: {e.format_message()}", fg="red", err=True)
            sys.exit(e.exit_code)
        except click.Abort:
            click.echo("Aborted!", err=True)
            sys.exit(1)
        sys.exit(rv if isinstance(rv, int) else 0)

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except AuditError as e:
            click.secho(f"error: {e}", fg="red", err=True)
            sys.exit(2)


@click.group("jaxdev", cls=Group, context_settings={"help_option_names": ["-h", "--help"]})
def main():
    """Audit the jax device: which aten ops reach it, how, and how well they work.

    \b
    Examples:
      jaxdev ops 'add*' --status fallback
      jaxdev explain aten::reshape
      jaxdev coverage add sin --dtype float32
      jaxdev gate --baseline coverage/baseline.yaml
      jaxdev report coverage/matrix.yaml
    """


def _register_commands():
    from jaxdev.cli import coverage_cmd, explain_cmd, gate_cmd, ops_cmd, report_cmd

    for module in (ops_cmd, explain_cmd, coverage_cmd, gate_cmd, report_cmd):
        main.add_command(module.command)


_register_commands()

if __name__ == "__main__":
    main()
