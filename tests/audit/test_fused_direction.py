"""The fused direction: the eager forward run in fused eager mode, judged as forward is."""

import pytest
import torch
from torch.testing._internal.opinfo.core import SampleInput

import jaxdev
from jaxdev.audit import calls, check, matrix, samples


def test_fused_mode_runs_float32_forward_cells_that_match_the_eager_ones(cli, tmp_path):
    ops = ("sin", "index_select")
    code, out = cli("coverage", *ops, "--dtype", "float32", "--no-backward", "--jobs", "1", "--out", str(tmp_path))
    assert code == 0, out
    code, out = cli("coverage", *ops, "--mode", "fused", "--jobs", "1", "--out", str(tmp_path))
    assert code == 0, out
    m = matrix.load(str(tmp_path / "matrix.yaml"))
    assert {(c.op, c.dtype, c.direction) for c in m.cells()} == {
        (op, "float32", d) for op in ops for d in ("forward", "fused")
    }
    for op in ops:
        eager, fused = m.get(op, "float32", "forward"), m.get(op, "float32", "fused")
        assert (fused.status, fused.counts) == (eager.status, eager.counts) == ("pass", eager.counts)
    assert m.summary["fused"] == {"pass": 2}


def test_fused_units_are_float32_unless_dtypes_are_named():
    assert samples.units(["sin"], mode="fused") == [samples.Unit("sin", "float32", "fused")]
    assert {u.dtype for u in samples.units(["sin"], ["float64", "complex64"], mode="fused")} == {"float64", "complex64"}
    assert not [u for u in samples.units(["sin"], mode="both") if u.direction == "fused"]


def test_a_value_error_deferred_to_the_sync_is_the_samples_exception_and_does_not_leak():
    mode = jaxdev.get_eager_mode()  # "op", or "fused" under JAXDEV_EAGER=fused: calls.fused restores it
    x = torch.randn(4, 3, device="jax")
    bad = torch.tensor([0, 7], device="jax")
    with jaxdev.eager_mode("fused"):
        torch.index_select(x, 0, bad)  # recorded: fused mode checks the index at the next sync
    with pytest.raises(IndexError):
        torch.jax.synchronize()
    # the sample's own read (or its sync) raises CPU's exception, judged as the op's
    with pytest.raises(IndexError, match="index out of range"):
        calls.fused(torch.index_select, SampleInput(x, args=(0, bad)))
    assert jaxdev.get_eager_mode() == mode

    def fails_later(t, index):
        torch.index_select(t, 0, index)  # its check is deferred ...
        return torch.mm(t, t)  # ... and a shape error raises at the call

    with pytest.raises(RuntimeError, match="cannot be multiplied"):
        calls.fused(fails_later, SampleInput(x, args=(bad,)))
    # the deferred check was read with the failed sample, not left for the next one's read
    assert torch.ones(2, device="jax").sum().item() == 2.0
    unit = samples.Unit("sin", "float32", "fused")
    assert check.run_sample(unit, samples.samples(unit, 1)[0]).status == "pass"
