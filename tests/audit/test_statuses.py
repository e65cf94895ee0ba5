"""The one status table (facts.STATUSES): the terminal, the Markdown/JUnit reports and the HTML page
read their order, meaning, colours and glyphs from it."""

from jaxdev.audit import facts, matrix, report, report_html
from jaxdev.audit.model import Cell
from jaxdev.cli import render


def test_every_status_has_its_row_in_severity_order():
    assert tuple(facts.STATUSES) == facts.SEVERITY
    assert facts.SEVERITY[0] == "crash" and facts.SEVERITY[-1] == "skip"
    for name, s in facts.STATUSES.items():
        assert s.meaning and s.colour and s.html.startswith("#"), name
    assert facts.worst(["pass", "wrong", "fallback"]) == "wrong"


def test_the_terminal_and_the_page_read_the_table():
    assert render.coloured("wrong") == "[red]wrong[/red]" and render.coloured("native") == "[green]native[/green]"
    assert render.coloured("whatever") == "whatever"
    m = matrix.empty({"complete": True})
    m.put("sin", "float32", "forward", Cell("stride_mismatch", "r"), ["aten::sin"])
    m.put("cos", "float32", "forward", Cell("novel", "a status this jaxdev does not know"))
    d = report_html.data(report.Sources(m, "m.yaml"))
    assert d["statuses"][: len(facts.SEVERITY)] == list(facts.SEVERITY) and d["statuses"][-1] == "novel"
    for s in facts.SEVERITY:
        row = facts.STATUSES[s]
        assert (d["colours"][s], d["glyphs"][s], d["meaning"][s]) == (row.html, row.glyph, row.meaning)
    assert (d["colours"]["novel"], d["glyphs"]["novel"]) == ("#78909c", "?")
    page = report_html.page(report.Sources(m, "m.yaml"))
    assert (
        ".s-stride_mismatch{background:#c0ca33;color:#222}" in page
        and ".s-wrong{background:#6a1b9a;color:#fff}" in page
    )
