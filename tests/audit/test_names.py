"""Aten names wherever an op is named (coverage, gate, ops, explain), near-name suggestions, and the
gate's scope: the baseline's cells of the named ops only."""

import dataclasses
import json

import pytest
import yaml

from jaxdev.audit import AuditError, gate, matrix, names, samples
from jaxdev.audit.model import Cell

GOOD = "jaxdev_audit_test.good"
PASS = Cell("pass", "", 1, {"pass": 1})


def _matrix(path, cells, aten):
    """A small matrix file: cells (op, dtype, direction) all pass, `aten` op -> reached overloads."""
    m = matrix.empty({"complete": True, "max_samples": 3, "timeout_s": 60.0})
    for op, dtype, direction in cells:
        m.put(op, dtype, direction, dataclasses.replace(PASS), aten.get(op, ()))
    matrix.save(m, str(path))
    return m


@pytest.fixture
def index(tmp_path, monkeypatch):
    """An index where add.Tensor is reached by add (its namesake) and by __radd__ and atan2."""
    aten = {
        "add": ["aten::add.Tensor", "aten::view"],
        "__radd__": ["aten::add.Tensor"],
        "atan2": ["aten::add.Tensor", "aten::atan2"],
        "abs": ["aten::abs", "aten::sgn"],
        GOOD: ["jaxdev_audit_test::good"],
    }
    path = tmp_path / "index.yaml"
    _matrix(path, [(op, "float32", "forward") for op in aten], aten)
    monkeypatch.setenv(names.INDEX_ENV, str(path))
    return path


def test_the_index_scan_reads_what_yaml_reads(index):
    data = yaml.safe_load(index.read_text())
    assert names.load_index() == {op: frozenset(node["aten"]) for op, node in data["ops"].items()}


def test_aten_names_select_the_opinfos_that_reach_them(index):
    db = samples.op_db()
    for name in ("add.Tensor", "aten::add.Tensor"):
        (s,) = names.resolve([name], db)
        assert s.opinfos == ("add",) and s.overloads == ("aten::add.Tensor",)
        assert set(s.reaching) == {"add", "__radd__", "atan2"}
        assert "OpInfo add (2 more reach it; --all-reaching runs them)" in s.describe()
    (s,) = names.resolve(["add.Tensor"], db, all_reaching=True)
    assert set(s.opinfos) == {"add", "__radd__", "atan2"}
    (s,) = names.resolve(["aten::add"], db)  # every overload of add
    assert {"aten::add.Tensor", "aten::add.Scalar", "aten::add.out"} <= set(s.overloads) and s.opinfos == ("add",)
    (s,) = names.resolve(["aten::sgn"], db)  # no namesake reaches it: every OpInfo that does
    assert s.opinfos == ("abs",)
    (s,) = names.resolve(["jaxdev_audit_test::good"], db)  # other namespaces too
    assert s.opinfos == (GOOD,)
    # OpInfo names and globs select as before; mixed with aten names in one call
    assert samples.select(["abs", "add.Tensor", "nn.functional.relu*"]) == [
        "abs",
        "add",
        "nn.functional.relu",
        "nn.functional.relu6",
    ]
    with pytest.raises(
        AuditError, match=r"no OpInfo sample reaches aten::mm \(per .*index.yaml\); OpInfos named like it: mm.x"
    ):
        names.resolve(["mm"], {k: v for k, v in db.items() if k != "mm"} | {"mm.x": db["mm"]})


def test_without_an_index_aten_names_choose_opinfos_by_name(monkeypatch, tmp_path):
    monkeypatch.setenv(names.INDEX_ENV, str(tmp_path / "none.yaml"))
    (s,) = names.resolve(["aten::relu"], samples.op_db())
    assert s.opinfos == ("nn.functional.relu",) and s.by_name
    assert s.describe().startswith("aten::relu (2 overloads): OpInfo nn.functional.relu (chosen by name")


def test_near_names_rank_the_same_base_then_similarity():
    db = samples.op_db()
    with pytest.raises(AuditError, match=r"no OpInfo or aten operator named 'ad'; nearest: add,"):
        names.resolve(["ad"], db)
    assert names.nearest("add.Tensr", names._candidates(db))[0] == "add.Tensor"
    assert names.nearest("reshpe", ["reshape", "masked.norm", "hash_tensor"]) == ["reshape"]
    assert names.nearest("aten::add.Sclar", ["addr", "masked.norm", "add.Scalar", "add"]) == ["add.Scalar", "add"]
    assert names.nearest("nosuchop", names._candidates(db)) == []  # nothing is near: no noise offered


def test_ops_and_explain_take_aten_and_opinfo_names(cli, index):
    code, out = cli("ops", "aten::add", "sin.out", "abs", "--format", "json")
    assert code == 0, out
    got = {r["name"] for r in json.loads(out)["ops"]}
    assert {"aten::add.Tensor", "aten::add.Scalar", "aten::add.out", "aten::sin.out", "aten::abs"} <= got
    assert "aten::sin" not in got and "aten::sub.Tensor" not in got
    code, out = cli("ops", "atan2", GOOD)  # GOOD is an OpInfo only: the overloads its samples reach
    assert code == 0 and "jaxdev_audit_test::good" in out and "reaches 1 overloads" in out
    code, out = cli("ops", "ad")
    assert code == 2 and "nearest: add," in out and "Traceback" not in out
    code, out = cli("explain", "add.Tensor")
    assert code == 0 and "OpInfo add" in out
    code, out = cli("explain", "aten::*")
    assert code == 2 and "explain takes at most" in out


def test_coverage_runs_an_aten_name_through_its_opinfos(cli, tmp_path, index):
    code, out = cli("coverage", "jaxdev_audit_test::good", "--jobs", "1", "--out", str(tmp_path))
    assert code == 0, out
    assert f"jaxdev_audit_test::good: OpInfo {GOOD}" in out
    assert f"jaxdev_audit_test::good (run as OpInfo {GOOD}): forward pass 1" in out
    assert matrix.load(str(tmp_path / "matrix.yaml")).get(GOOD, "float32", "forward").status == "pass"


def test_gate_checks_only_the_baselines_cells_of_the_named_ops(tmp_path, index):
    base = tmp_path / "baseline.yaml"
    b = _matrix(base, [("abs", "float32", "forward"), ("abs", "float32", "compile"), ("sin", "float32", "forward")], {})
    s = gate.scope(b, ["abs"])
    assert sorted(s.units) == [samples.Unit("abs", "float32", "compile"), samples.Unit("abs", "float32", "forward")]
    absent = set(s.not_in_baseline)
    assert samples.Unit("abs", "float64", "forward") in absent and samples.Unit("abs", "float32", "backward") in absent
    assert not absent & set(s.units)
    strict = gate.scope(b, ["abs"], strict=True)
    assert set(strict.units) == set(s.units) | absent
    # narrowed by dtype and mode; aten names through the index
    assert gate.scope(b, ["aten::sgn"], mode="eager", dtypes=["float32"]).units == [
        samples.Unit("abs", "float32", "forward")
    ]
    assert gate.scope(b, mode="compile").units == [samples.Unit("abs", "float32", "compile")]


def test_gate_lists_cells_not_in_baseline_without_failing(cli, tmp_path, index):
    base = tmp_path / "baseline.yaml"
    _matrix(base, [(GOOD, "float32", "forward")], {GOOD: ["jaxdev_audit_test::good"]})
    code, out = cli("gate", "jaxdev_audit_test::good", "--baseline", str(base), "--jobs", "1")
    assert code == 0, out
    assert f"not in baseline  {GOOD}: 1 cells (compile float32): not run" in out
    assert "gate passed: 1 cells match" in out
