"""platforms.py: a matrix records the JAX platform it ran on, each platform's files have their own
folder (coverage/tpu/...), and explain, report and gate tell platforms apart. CI runs on CPU only,
so the second platform here is a small synthetic TPU matrix beside a CPU one."""

from __future__ import annotations

import os

import pytest

from jaxdev.audit import AuditError, aten_matrix, matrix, platforms, report, report_html, sweep
from jaxdev.audit.model import CPU, AtenNode, Cell, Platform, Route
from jaxdev.audit.samples import Unit

TPU = Platform("tpu", "TPU v5 lite")
WRONG = "output differs (atol 1e-05, rtol 1.3e-06): max abs err 0.002; farther from the float64 result than CPU: jax 12x tolerance, CPU 0.4x"


def _matrix(platform: Platform | None, backward: str) -> matrix.Matrix:
    m = matrix.empty({"complete": True, "max_samples": 2})
    m.platform = platform
    m.put("tanh", "float32", "forward", Cell("pass", "", 2, {"pass": 2}), ["aten::tanh"])
    reason = WRONG if backward == "wrong" else ""
    m.put("tanh", "float32", "backward", Cell(backward, reason, 2, {backward: 2}), ["aten::tanh_backward"])
    return m


def _aten(platform: Platform | None, verdict: str) -> aten_matrix.AtenMatrix:
    node = AtenNode(verdict, "opinfo", "every measured cell of 1 OpInfo(s) passes", opinfos=["tanh"])
    node.route, node.cells = Route("native", "autograd"), {"float32": {"forward": "pass"}}
    if verdict == "fails":
        node.category, node.reason = "wrong", f"wrong in OpInfo tanh float32 backward: {WRONG}"
    return aten_matrix.AtenMatrix.of_run({"aten::tanh": node}, "coverage/matrix.yaml", {}, platform=platform)


@pytest.fixture
def two_platforms(tmp_path, monkeypatch):
    """tmp/coverage/{matrix,aten}.yaml (CPU, as committed: no platform field) and tmp/coverage/tpu/
    (TPU v5 lite): tanh's backward is wrong on the TPU only. The working directory is tmp."""
    cov = tmp_path / "coverage"
    matrix.save(_matrix(None, "pass"), str(cov / "matrix.yaml"))
    aten_matrix.save(_aten(None, "pass"), str(cov / "aten.yaml"))
    matrix.save(_matrix(TPU, "wrong"), platforms.path(str(cov), "matrix.yaml", TPU))
    aten_matrix.save(_aten(TPU, "fails"), platforms.path(str(cov), "aten.yaml", TPU))
    monkeypatch.chdir(tmp_path)
    return cov


def test_each_platform_has_its_folder_and_a_matrix_says_where_it_ran(tmp_path):
    assert platforms.path("coverage", "matrix.yaml", CPU) == os.path.join("coverage", "matrix.yaml")
    assert platforms.path("coverage", "aten.yaml", TPU) == os.path.join("coverage", "tpu", "aten.yaml")
    path = str(tmp_path / "m.yaml")
    matrix.save(_matrix(TPU, "wrong"), path)
    assert matrix.load(path).measured_on == TPU and platforms.recorded(path) == TPU
    matrix.save(_matrix(None, "pass"), path)  # a file from before platforms were recorded: CPU's
    assert matrix.load(path).platform is None and matrix.load(path).measured_on == CPU
    assert "platform" not in (tmp_path / "m.yaml").read_text()  # and it round-trips without gaining one
    assert TPU.label == "TPU v5 lite" and CPU.label == "cpu"


def test_a_math_setting_is_part_of_the_platform(tmp_path):
    """JAXDEV_MATH unset is near on a TPU, auto on CPU (jaxdev/math_settings.py); cells under another
    setting are another platform: their own folder, their own label, never merged with the default's."""
    auto = Platform("tpu", "TPU v5 lite", "auto")
    assert TPU.math == "near" and CPU.math == "auto" and auto != TPU
    assert platforms.folder("coverage", auto) == os.path.join("coverage", "tpu-auto")
    assert platforms.folder("coverage", Platform("cpu", "cpu", "fast")) == os.path.join("coverage", "cpu-fast")
    assert auto.label == "TPU v5 lite [JAXDEV_MATH=auto]"
    assert TPU.to_yaml()["math"] == "near" and "math" not in CPU.to_yaml()
    # a file from before the setting was recorded ran under auto, the only setting then
    assert Platform.from_yaml({"name": "tpu", "device_kind": "TPU v5 lite"}) == auto
    with pytest.raises(AuditError, match=r"measured on different platforms"):
        matrix.merge([_matrix(TPU, "pass"), _matrix(auto, "wrong")])


def test_the_probe_reads_the_setting_the_workers_will(monkeypatch):
    monkeypatch.setenv("JAXDEV_MATH", "fast")
    assert platforms.Probe().result() == Platform("cpu", "cpu", "fast")
    monkeypatch.setenv("JAXDEV_MATH", "fastest")
    with pytest.raises(AuditError, match="JAXDEV_MATH must be auto, near, fast or own, not 'fastest'"):
        platforms.Probe().result()


def test_the_workers_platform_is_probed_without_starting_jax_here():
    assert platforms.Probe().result() == CPU  # CI's


def test_no_file_mixes_platforms(tmp_path):
    tpu_file = platforms.path(str(tmp_path), "matrix.yaml", TPU)
    matrix.save(_matrix(TPU, "wrong"), tpu_file)
    units = [Unit("tanh", "float32", "forward")]
    for how in ({"merge": True, "resume": False}, {"merge": False, "resume": True}, {"merge": False, "resume": False}):
        with pytest.raises(AuditError, match=r"was measured on TPU v5 lite \(tpu\) and this is cpu \(cpu\)"):
            sweep.start(units, tpu_file, 2, platform=CPU, **how)
    with pytest.raises(AuditError, match=r"measured on different platforms \(cpu, TPU v5 lite\)"):
        matrix.merge([_matrix(None, "pass"), _matrix(TPU, "wrong")])
    with pytest.raises(AuditError, match="merging these matrices would mix the two"):
        matrix.combine([_matrix(TPU, "wrong")], _matrix(CPU, "pass"), "m.yaml")
    assert matrix.merge([_matrix(TPU, "wrong"), _matrix(TPU, "pass")]).platform == TPU


def test_merged_shards_of_a_platform_go_to_its_folder(cli, tmp_path):
    shards = []
    for i, status in enumerate(("wrong", "pass")):
        shards.append(str(tmp_path / f"shard{i}.yaml"))
        matrix.save(_matrix(TPU, status), shards[-1])
    code, out = cli("coverage", "--merge", *shards, "--out", str(tmp_path / "cov"))
    assert code == 0, out
    assert matrix.load(str(tmp_path / "cov" / "tpu" / "matrix.yaml")).measured_on == TPU
    assert not (tmp_path / "cov" / "matrix.yaml").exists()


def test_explain_gives_each_platforms_verdict_side_by_side(cli, two_platforms):
    code, out = cli("explain", "tanh", "--matrix", str(two_platforms / "matrix.yaml"))
    assert code == 0, out
    lines = [line.strip() for line in out.splitlines()]
    assert f"tanh float32 backward: pass on cpu; wrong on TPU v5 lite: {WRONG}" in lines
    assert any(
        line.startswith("platforms pass on cpu; fails (wrong) on TPU v5 lite: wrong in OpInfo") for line in lines
    )
    code, out = cli("explain", "tanh", "--matrix", str(two_platforms / "matrix.yaml"), "--format", "json")
    assert '"device_kind": "TPU v5 lite"' in out and '"by_platform"' in out
    os.remove(two_platforms / "tpu" / "matrix.yaml")
    os.remove(two_platforms / "tpu" / "aten.yaml")
    code, out = cli("explain", "tanh", "--matrix", str(two_platforms / "matrix.yaml"), "--format", "json")
    assert code == 0 and "platform" not in out  # one platform: the answer as before


def test_the_report_has_a_platform_section_and_filter(two_platforms):
    main = str(two_platforms / "matrix.yaml")
    src = report.Sources(matrix.load(main), main)
    src.platforms = [(path, matrix.load(path)) for _, path in platforms.beside(main)[1:]]
    text = report.markdown(src.matrix, main, others=src.platforms)
    assert "## platforms" in text and "matrix.yaml` | 100.0% of 1 | 0.0% of 1 |" in text
    assert "## where the platforms differ (1)" in text
    assert "- `tanh` float32 backward: pass on cpu; wrong on TPU v5 lite (tpu): output differs" in text
    data = report_html.data(src)
    assert data["platforms"] == ["cpu", "TPU v5 lite (tpu)"]
    assert [(row[0], row[4] if len(row) > 4 else 0) for row in data["opinfo"]] == [("tanh", 0), ("tanh", 1)]
    alone = report_html.data(report.Sources(src.matrix, main))
    assert "platforms" not in alone  # a page of one platform is drawn as before


def test_gate_holds_a_baseline_on_its_own_platform_only(cli, two_platforms):
    tpu_baseline = platforms.path(str(two_platforms), "baseline.yaml", TPU)
    matrix.save(_matrix(TPU, "wrong"), tpu_baseline)
    code, out = cli("gate", "--baseline", tpu_baseline)
    assert code == 2, out
    assert " ".join(out.split()) == (
        f"error: {tpu_baseline} was measured on TPU v5 lite (tpu) and this JAX runs on cpu (cpu): gate against "
        f"{os.path.join('coverage', 'baseline.yaml')} (create it with --init OPS) or run on tpu"
    )
