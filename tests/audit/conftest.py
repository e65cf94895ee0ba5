import os
import subprocess
import sys

import pytest
from click.testing import CliRunner

from jaxdev.cli.main import main

PLUGIN = os.path.join(os.path.dirname(__file__), "plugin_ops.py")
# Set before any test builds the (cached) op_db in this process, so every test sees the same one.
os.environ["JAXDEV_AUDIT_PLUGINS"] = PLUGIN


@pytest.fixture
def cli(monkeypatch):
    """Invoke `jaxdev ...` in-process; returns (exit code, output)."""
    monkeypatch.setenv("JAXDEV_AUDIT_PLUGINS", PLUGIN)

    def invoke(*args, env=None):
        for k, v in (env or {}).items():
            monkeypatch.setenv(k, v)
        result = CliRunner().invoke(main, list(args), catch_exceptions=False)
        for k in env or {}:
            monkeypatch.delenv(k)
        return result.exit_code, result.output

    return invoke


def jaxdev_process(*args, env=None, **kwargs):
    """`jaxdev ...` as a separate process (for kill tests)."""
    full_env = {**os.environ, "JAXDEV_AUDIT_PLUGINS": PLUGIN, **(env or {})}
    return subprocess.Popen(
        [sys.executable, "-m", "jaxdev.cli.main", *args],
        env=full_env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        **kwargs,
    )
