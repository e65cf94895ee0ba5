"""sweep.py: what a reference-input run plans, and the files it refuses to join."""

from __future__ import annotations

import pytest

from jaxdev.audit import AuditError, matrix, samples, sweep
from jaxdev.audit.model import Cell
from jaxdev.audit.samples import Unit


def test_reference_runs_plan_only_opinfos_with_reference_inputs():
    assert samples.op_db()["sin"].reference_inputs_func is not None
    assert samples.op_db()["addmm"].reference_inputs_func is None
    units = sweep.plan(["sin", "addmm"], ["float32"], False, inputs="reference")
    assert units == [Unit("sin", "float32", "forward")]
    with pytest.raises(AuditError, match="has reference inputs"):
        sweep.plan(["addmm"], ["float32"], False, inputs="reference")


def test_sample_and_reference_cells_never_share_a_file(tmp_path):
    path = str(tmp_path / "m.yaml")
    m = matrix.empty({"complete": True, "max_samples": 3})
    m.put("sin", "float32", "forward", Cell("pass", samples=1))
    matrix.save(m, path)
    units = [Unit("sin", "float32", "forward")]
    for how in ({"resume": True, "merge": False}, {"resume": False, "merge": True}):
        with pytest.raises(AuditError, match="holds cells run on sample inputs, not reference inputs"):
            sweep.start(units, path, 3, inputs="reference", **how)
    full, _, _ = sweep.start(
        [Unit("cos", "float32", "forward")], path, 3, resume=False, merge=False, inputs="reference"
    )
    assert not list(full.cells())  # a full reference run keeps no sample-input cell
