"""report.py: summary.md's section on the reference-input matrix."""

from __future__ import annotations

from jaxdev.audit import matrix, report
from jaxdev.audit.model import Cell


def test_summary_has_a_reference_inputs_section_with_its_failures():
    m = matrix.empty({"complete": True, "max_samples": 3, "samples": 2})
    m.put("sin", "float32", "forward", Cell("pass", samples=1))
    ref = matrix.empty({"complete": True, "max_samples": 5, "samples": 9, "inputs": "reference"})
    ref.put("sin", "float32", "forward", Cell("wrong", "max abs 1 | x", samples=5))
    ref.put("cos", "float32", "forward", Cell("pass", samples=4))
    text = report.markdown(m, "matrix.yaml", reference=("reference_matrix.yaml", ref))
    head, _, section = text.partition("## reference inputs")
    assert "2 samples (at most 3 per cell)" in head and "wrong" not in head
    assert "9 reference inputs (at most 5 per cell)" in section and "- forward: pass 1, wrong 1" in section
    assert "1 cells fail or restride on reference inputs:" in section
    assert "- wrong: `sin` float32 forward: max abs 1 \\| x" in section
    assert "## reference inputs" not in report.markdown(m, "matrix.yaml")
