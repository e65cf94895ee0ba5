"""`jaxdev` entry point: the command group and its user-error policy."""

from __future__ import annotations

import sys

import click

from jaxdev.audit import AuditError


class Group(click.Group):
    """Turns AuditError (a mistake the user can fix) into one red sentence and exit code 2."""

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except AuditError as e:
            click.secho(f"error: {e}", fg="red", err=True)
            sys.exit(2)


@click.group(cls=Group, context_settings={"help_option_names": ["-h", "--help"]})
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
