"""matrix.py: sample-input and reference-input matrices are kept apart."""

from __future__ import annotations

import pytest

from jaxdev.audit import AuditError, matrix
from jaxdev.audit.model import Cell


def _one(inputs: str | None, op: str = "sin") -> matrix.Matrix:
    m = matrix.empty({"complete": True, **({"inputs": inputs} if inputs else {})})
    m.put(op, "float32", "forward", Cell("pass", samples=1))
    return m


def test_merging_keeps_the_kind_of_inputs_and_refuses_to_mix_them():
    merged = matrix.merge([_one("reference"), _one("reference", "cos")])
    assert matrix.inputs(merged) == "reference" and matrix.inputs(_one(None)) == "sample"
    with pytest.raises(AuditError, match="mix sample-input and reference-input"):
        matrix.merge([_one("reference"), _one(None)])
    with pytest.raises(AuditError, match="holds cells run on sample inputs, not reference inputs"):
        matrix.combine([_one("reference")], _one(None), "m.yaml")
    assert matrix.combine([_one("reference", "cos")], _one("reference"), "m.yaml").get("cos", "float32", "forward")
