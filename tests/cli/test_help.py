"""`jaxdev --help` and each command's help answer at once: no torch or jax import to print them."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

COMMANDS = ("ops", "explain", "coverage", "gate", "report")
SCRIPT = Path(sys.executable).with_name("jaxdev")


def _help(*args):
    if not SCRIPT.exists():
        pytest.skip(f"no console script at {SCRIPT} (jaxdev not installed in this environment)")
    return subprocess.run(
        [sys.executable, "-X", "importtime", str(SCRIPT), *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONWARNINGS": "ignore"},
    )


@pytest.mark.parametrize("args", [("--help",), *((c, "--help") for c in COMMANDS)])
def test_help_imports_neither_torch_nor_jax(args):
    out = _help(*args)
    assert out.returncode == 0, out.stderr[-2000:]
    imported = {line.split("|")[-1].strip() for line in out.stderr.splitlines() if line.startswith("import time:")}
    assert "torch" not in imported and "jax" not in imported
    assert "Usage: jaxdev" in out.stdout


def test_every_command_help_shows_examples():
    for command in COMMANDS:
        out = _help(command, "--help")
        assert "Examples:" in out.stdout and "jaxdev " + command in out.stdout


@pytest.mark.parametrize(
    "args, words",
    [
        (("bogus",), "error: No such command 'bogus' (see `jaxdev --help`)"),
        (("coverage", "--bogus"), "error: No such option '--bogus' (Did you mean one of"),
        (("ops", "--status", "nope"), "error: Invalid value for '--status': 'nope' is not one of"),
    ],
)
def test_usage_errors_are_one_sentence_with_exit_2(args, words):
    from click.testing import CliRunner

    from jaxdev.cli.main import main

    result = CliRunner().invoke(main, list(args))
    assert result.exit_code == 2
    assert result.output.strip().count("\n") == 0 and words in result.output, result.output
