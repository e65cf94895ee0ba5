"""`explain`, `ops` and an unknown name answer from the committed YAML and torch's schemas, without
the device (issue 30 item 3: they took 12-27 s, importing jax, op_db and every kernel). Run as the
console script, in a process of their own, as a user runs them."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from jaxdev_testing import reshape_matrix_with_unsupported_cells

SCRIPT = Path(sys.executable).with_name("jaxdev")
ROOT = Path(__file__).resolve().parents[2]


def _run(*args):
    if not SCRIPT.exists():
        pytest.skip(f"no console script at {SCRIPT} (jaxdev not installed in this environment)")
    if not (ROOT / "coverage" / "aten.yaml").exists():
        pytest.skip("no committed coverage/aten.yaml in this checkout")
    out = subprocess.run(
        [sys.executable, "-X", "importtime", str(SCRIPT), *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        env={**os.environ, "PYTHONWARNINGS": "ignore", "COLUMNS": "80"},
    )
    imported = {line.split("|")[-1].strip() for line in out.stderr.splitlines() if line.startswith("import time:")}
    errors = "\n".join(line for line in out.stderr.splitlines() if not line.startswith("import time:"))
    return out.returncode, out.stdout, errors, imported


@pytest.mark.parametrize(
    "args",
    [("explain", "aten::reshape"), ("explain", "add"), ("ops", "add*", "--status", "fallback"), ("ops",)],
    ids=" ".join,
)
def test_answers_without_jax_or_the_device(args):
    code, _, err, imported = _run(*args)
    assert code == 0, err[-2000:]
    assert "jax" not in imported and "jaxdev.ops" not in imported and "jaxdev.device" not in imported
    assert "torch.testing._internal.common_methods_invocations" not in imported  # no op_db


def test_an_unknown_name_is_one_sentence_with_ranked_names_at_once():
    code, out, err, imported = _run("explain", "reshpe")
    assert code == 2 and out == ""
    assert err.strip() == (
        "error: 'reshpe' is neither an aten operator nor an OpInfo name; nearest: reshape, reshape_as, repeat, resize,"
        " _reshape_copy"
    )
    assert "jax" not in imported


def test_explain_lines_are_whole_and_notes_said_once(tmp_path):
    code, out, err, _ = _run("explain", "aten::reshape", "--matrix", reshape_matrix_with_unsupported_cells(tmp_path))
    assert code == 0, err[-2000:]
    # never wrapped at the terminal width: a long reason or path stays on its line
    (note,) = [line for line in out.splitlines() if "not supported by design" in line]
    assert note.rstrip().endswith("left out of the pass/fallback shares")
    assert "complex32   unsupported  unsupported" in out


def test_ops_into_a_closed_pipe_ends_quietly():
    if not SCRIPT.exists():
        pytest.skip(f"no console script at {SCRIPT}")
    done = subprocess.run(
        f"'{SCRIPT}' ops | head -3", shell=True, capture_output=True, text=True, timeout=120, cwd=ROOT
    )
    assert len(done.stdout.splitlines()) == 3 and "Error" not in done.stderr and "Traceback" not in done.stderr


def test_a_command_that_needs_the_device_loads_it_on_demand():
    # the console script defers jaxdev/__init__.py (jaxdev_cli): importing a module outside the
    # light ones runs it first, so --live reads a dispatcher with the jax kernels registered
    code, out, err, imported = _run("ops", "aten::add.Tensor", "--live", "--format", "json")
    assert code == 0, err[-2000:]
    assert "jax" in imported and "jaxdev.ops" in imported
    assert '"device": "native"' in out
