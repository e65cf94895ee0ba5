import json
import xml.etree.ElementTree as ET

from jaxdev.audit import matrix
from jaxdev.audit.model import Cell

GOOD = "jaxdev_audit_test.good"


def test_gate_red_on_broken_kernel_green_after_accept(cli, tmp_path):
    base = str(tmp_path / "baseline.yaml")
    code, out = cli("gate", GOOD, "--init", "--baseline", base, "--jobs", "1")
    assert code == 0, out
    assert matrix.load(base).get(GOOD, "float32", "forward").status == "pass"

    broken = {"JAXDEV_TEST_BREAK": "1"}
    code, out = cli("gate", "--baseline", base, "--jobs", "1", env=broken)
    assert code == 1
    assert f"new failure     {GOOD} float32 forward: pass -> wrong" in out
    # the fresh matrix lives in a temporary folder deleted before gate exits: no path to it is shown
    assert "1 units, 3 samples in" in out and "jaxdev-gate-" not in out and "matrix.yaml" not in out
    assert "gate failed: 1 changes over 1 cells (1 new failure)" in out

    code, out = cli("gate", "--baseline", base, "--jobs", "1", "--accept", env=broken)
    assert code == 0, out
    code, out = cli("gate", "--baseline", base, "--jobs", "1", env=broken)
    assert code == 0 and "gate passed" in out

    # fixing the kernel is an unexpected pass: red until accepted
    code, out = cli("gate", "--baseline", base, "--jobs", "1")
    assert code == 1 and "unexpected pass" in out and "wrong -> pass" in out


def test_gate_names_each_kind_of_change_and_fails_on_all():
    from jaxdev.audit.gate import Change, failed, tally

    changes = [
        Change("a", "float32", "forward", "pass", "wrong", ""),
        Change("b", "float32", "forward", "wrong", "exception", ""),
        Change("c", "float32", "forward", "missing", "pass", ""),
        Change("d", "float32", "forward", "absent", "crash", ""),
    ]
    assert [c.kind for c in changes] == ["new failure", "changed kind", "unexpected pass", "new failure"]
    assert tally(changes) == {"new failure": 2, "changed kind": 1, "unexpected pass": 1}
    assert failed(changes[1:2])  # a failure that changed kind still fails the gate
    assert not failed([])


def test_gate_treats_unsupported_as_neither_pass_nor_failure():
    from jaxdev.audit.gate import Change, failed

    kinds = {
        ("pass", "unsupported"): "new failure",  # a regression
        ("unsupported", "pass"): "unexpected pass",  # an improvement, recorded with --accept
        ("unsupported", "exception"): "new failure",  # the cell runs now, and fails
        ("exception", "unsupported"): "changed kind",
        ("absent", "unsupported"): "new unsupported",
    }
    for (old, new), kind in kinds.items():
        change = Change("a", "complex32", "forward", old, new, "")
        assert change.kind == kind, (old, new)
        assert failed([change])


def test_shares_leave_out_unsupported_and_skipped_cells(cli, tmp_path):
    m = matrix.empty({"complete": True, "samples": 6})
    m.put("abs", "float32", "forward", Cell("pass", ""))
    m.put("abs", "float64", "forward", Cell("fallback", "CPU fallback for aten::abs"))
    m.put("abs", "complex32", "forward", Cell("unsupported", "UnsupportedDtypeError: no JAX type"))
    m.put("chalf", "float32", "forward", Cell("unsupported", "UnsupportedDtypeError: no JAX type"))
    m.put("neg", "int8", "forward", Cell("skip", "CPU raised"))
    m.put("neg", "float32", "forward", Cell("wrong", "differs"))
    assert m.shares["forward"] == {"measured": 3, "pass": 0.3333, "fallback": 0.3333}
    path = tmp_path / "matrix.yaml"
    matrix.save(m, str(path))
    assert matrix.load(str(path)).to_yaml()["shares"] == m.shares
    code, out = cli("report", str(path), "--out", str(tmp_path / "reports"))
    assert code == 0, out
    md = (tmp_path / "reports" / "summary.md").read_text()
    assert "| unsupported | 2 | 0 | 0 |" in md and "| pass share | 33.3% | - | - |" in md
    assert "| measured | 3 | 0 | 0 |" in md
    assert "## unsupported (2)" in md and "`abs` complex32 forward: UnsupportedDtypeError" in md
    assert "## wrong (1)" in md
    suites = ET.parse(tmp_path / "reports" / "junit.xml").getroot()
    forward = next(s for s in suites if s.get("name") == "coverage.forward")
    assert forward.get("failures") == "1" and forward.get("skipped") == "3"
    code, out = cli("explain", "abs", "--matrix", str(path))
    assert code == 0, out
    text = " ".join(out.split())
    assert "complex32 unsupported" in text and "unsupported (complex32 forward): not supported by design" in text
    assert "float64 forward fallback: CPU fallback for aten::abs" in text and "float32 pass" in text


def test_gate_refuses_bad_baselines_and_overwrites_nothing(cli, tmp_path):
    missing = tmp_path / "missing.yaml"
    code, out = cli("gate", "--baseline", str(missing), "--accept")
    assert code == 2 and "no baseline at" in out and not missing.exists()
    for text, words in (
        ("ops: [", "not valid YAML"),
        ("hello: 1\n", "no schema field"),
        ("schema: 99\nops: {}\n", "schema version 99"),
        ("schema: 1\nops: {x: {results: {float32: {forward: {status: great}}}}}\n", "malformed"),
    ):
        bad = tmp_path / "bad.yaml"
        bad.write_text(text)
        code, out = cli("gate", "--baseline", str(bad), "--accept")
        assert code == 2 and words in out and "Traceback" not in out, out
        assert bad.read_text() == text


def test_report_writes_markdown_html_data_and_junit(cli, tmp_path):
    m = matrix.empty({"complete": True, "samples": 3})
    m.put("sin", "float32", "forward", Cell("pass", ""))
    m.put("sin", "float32", "backward", Cell("lost_autograd", "grad is None", repro="sin ..."))
    m.put("cos", "float64", "forward", Cell("fallback", "CPU fallback for aten::cos"))
    path = tmp_path / "matrix.yaml"
    matrix.save(m, str(path))
    code, out = cli("report", str(path), "--out", str(tmp_path / "reports"))
    assert code == 0, out
    md = (tmp_path / "reports" / "summary.md").read_text()
    assert "| lost_autograd | 0 | 1 |" in md and "`sin` float32 backward: grad is None" in md
    page = (tmp_path / "reports" / "index.html").read_text()
    data = json.loads(page.split("<script type='application/json' id='data'>")[1].split("</script>")[0])
    cells = {
        (op, data["directions"][d], data["statuses"][s])
        for op, _, _, flat in data["opinfo"]
        for d, s in zip(flat[1::5], flat[2::5])
    }
    assert cells == {("sin", "forward", "pass"), ("sin", "backward", "lost_autograd"), ("cos", "forward", "fallback")}
    # a cell's detail: its fields but status and samples (a hand-made cell gains counts {}: model.Cell)
    assert {"counts": {}, "reason": "grad is None", "repro": "sin ..."} in data["details"]
    assert "<td>lost_autograd</td><td>0</td><td>1</td>" in page  # the static table, for readers without scripts
    suites = ET.parse(tmp_path / "reports" / "junit.xml").getroot()
    backward = next(s for s in suites if s.get("name") == "coverage.backward")
    assert backward.get("failures") == "1"


def test_report_reads_baseline_and_aten_matrix_and_refuses_missing_ones(cli, tmp_path):
    m = matrix.empty({"complete": True})
    m.put("sin", "float32", "forward", Cell("wrong", "differs"), ["aten::sin"])
    base = matrix.empty({"complete": True})
    base.put("sin", "float32", "forward", Cell("pass", ""))
    matrix.save(m, str(tmp_path / "matrix.yaml"))
    matrix.save(base, str(tmp_path / "baseline.yaml"))
    out_dir = str(tmp_path / "reports")
    for flag, words in (("--baseline", "no baseline at"), ("--aten", "no aten matrix at")):
        code, out = cli("report", str(tmp_path / "matrix.yaml"), flag, str(tmp_path / "nope.yaml"), "--out", out_dir)
        assert code == 2 and words in out and "Traceback" not in out, out
    (tmp_path / "aten.yaml").write_text(
        "overloads: {aten::sin: {verdict: fails, cells: {float32: {forward: wrong}}}}\n"
    )
    code, out = cli(
        "report", str(tmp_path / "matrix.yaml"), "--baseline", str(tmp_path / "baseline.yaml"), "--out", out_dir
    )
    assert code == 0, out
    assert "- new failure: `sin` float32 forward: pass -> wrong" in (tmp_path / "reports" / "summary.md").read_text()
    page = (tmp_path / "reports" / "index.html").read_text()
    assert '"present":true' in page  # aten.yaml beside the matrix is read without being named
