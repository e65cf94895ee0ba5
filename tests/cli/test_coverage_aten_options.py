"""`jaxdev coverage --aten` honours or refuses each option of `coverage` it is given."""

import pytest
from click.testing import CliRunner

from jaxdev.cli import aten_run
from jaxdev.cli.coverage_cmd import command
from jaxdev.cli.main import main


def test_every_coverage_option_is_honoured_or_refused_by_aten():
    names = {p.name for p in command.params}
    assert names == set(aten_run.HONOURED) | set(aten_run.REFUSED)
    assert not set(aten_run.HONOURED) & set(aten_run.REFUSED)


@pytest.mark.parametrize(
    "args, named",
    [
        (["--dtype", "float32"], "--dtype"),
        (["--mode", "eager"], "--mode"),  # given, even as the default value
        (["--no-backward", "--max-samples", "2"], "--no-backward, --max-samples"),
        (["--shard", "1/2"], "--shard"),
        (["--resume"], "--resume"),
        (["--all-reaching"], "--all-reaching"),
        (["--merge", "x.yaml"], "--merge"),
        (["--reference-inputs"], "--reference-inputs"),
    ],
)
def test_aten_refuses_what_it_does_not_use_in_one_sentence(args, named, tmp_path):
    result = CliRunner().invoke(main, ["coverage", "--aten", *args, "--out", str(tmp_path)])
    assert result.exit_code == 2
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: --aten does not use {named}:"), result.output
    assert not list(tmp_path.iterdir())  # nothing ran, nothing written


def test_matrix_without_aten_is_refused(tmp_path):
    result = CliRunner().invoke(main, ["coverage", "sin", "--matrix", "m.yaml", "--out", str(tmp_path)])
    assert result.exit_code == 2 and "error: --matrix only applies with --aten" in result.output
