"""The aten-level matrix: the aggregation rule, direct trials (pass, untriable, fails on jax) and
`jaxdev coverage --aten` on a tiny scope."""

import pytest
import yaml

from jaxdev.audit import aten_matrix, matrix, schema_samples


def _entry(status, **extra):
    return {"status": status, "reason": f"{status} reason", "samples": 1, **extra}


OPS = {
    # a namesake of aten::foo.Tensor, and another OpInfo that also reaches it
    "foo": {
        "aten": ["aten::foo.Tensor", "aten::bar"],
        "results": {
            "float32": {"forward": _entry("pass"), "backward": _entry("fallback", fallback=["aten::bar"])},
            "int64": {"forward": _entry("fallback", fallback=["aten::foo.Tensor"])},
        },
    },
    "other": {
        "aten": ["aten::foo.Tensor", "aten::bar", "aten::baz_backward"],
        "results": {
            "float32": {
                "forward": _entry("wrong", repro="other float32 forward: ..."),
                "backward": _entry("pass"),
            },
            "complex32": {"forward": _entry("unsupported")},
        },
    },
}


def test_namesake_opinfos_judge_and_fallback_on_other_ops_counts_as_pass():
    node = aten_matrix.from_opinfos("aten::foo.Tensor", OPS, ["foo", "other"], ["foo"])
    # other's wrong forward does not count: foo is named after the overload
    assert node["judged_by"] == ["foo"] and node["opinfos"] == ["foo", "other"]
    # foo's float32 backward fell back for aten::bar only: a pass for aten::foo.Tensor
    assert node["cells"] == {"float32": {"forward": "pass", "backward": "pass"}, "int64": {"forward": "fallback"}}
    assert node["verdict"] == "fallback" and "foo int64 forward" in node["reason"]


def test_without_namesake_the_worst_cell_of_every_reaching_opinfo_decides():
    node = aten_matrix.from_opinfos("aten::bar", OPS, ["foo", "other"], [])
    assert node["cells"]["float32"] == {"forward": "wrong", "backward": "fallback"}
    assert node["cells"]["complex32"] == {"forward": "unsupported"}  # kept, but not measured
    assert node["verdict"] == "fails" and node["category"] == "wrong"
    assert node["reason"].startswith("wrong in OpInfo other float32 forward") and "indirect" in node["reason"]
    assert node["repro"] == "other float32 forward: ..."


def test_backward_ops_take_backward_cells_and_unmeasured_cells_give_no_verdict():
    node = aten_matrix.from_opinfos("aten::baz_backward", OPS, ["other"], [])
    assert node["cells"] == {"float32": {"backward": "pass"}} and node["verdict"] == "pass"
    only_unsupported = {"x": {"aten": ["aten::x"], "results": {"complex32": {"forward": _entry("unsupported")}}}}
    assert aten_matrix.from_opinfos("aten::x", only_unsupported, ["x"], ["x"]) is None  # -> a direct trial


def test_counts_and_trial_nodes():
    nodes = {
        "a": aten_matrix.from_trial({"status": "pass", "reason": "", "dtype": "float32", "repro": "a(...)"}),
        "b": aten_matrix.from_trial({"status": "wrong", "reason": "output differs", "dtype": "int64"}),
        "c": aten_matrix.from_trial({"status": "untriable", "category": "sparse", "reason": "sparse"}),
        "d": aten_matrix.from_trial({"status": "untriable", "category": "no_valid_sample", "reason": "no valid"}),
    }
    assert nodes["a"]["cells"] == {"float32": {"forward": "pass"}} and nodes["a"]["evidence"] == "direct"
    assert nodes["b"]["verdict"] == "fails" and nodes["b"]["category"] == "wrong"
    assert nodes["c"]["evidence"] == "none" and nodes["c"]["cells"] == {}
    c = aten_matrix.counts(nodes)
    assert c["verdicts"] == {"pass": 1, "fails": 1, "fallback": 0, "untriable": 2}
    assert c["tried"] == 2 and c["tried_share"] == 0.5 and c["dense"] == 3 and c["tried_share_dense"] == 0.6667
    assert c["comparable"] == 3 and c["untriable"] == {"no_valid_sample": 1, "sparse": 1}


def test_direct_trial_passes_on_an_out_variant():
    result = schema_samples.trial("aten::sinh.out")
    assert result["status"] == "pass", result
    assert result["dtype"] == "float32" and result["repro"].startswith("aten::sinh.out(self=float32[3, 3]")


def test_cpu_rejecting_every_candidate_is_untriable_not_a_failure():
    result = schema_samples.trial("aten::sspaddmm")  # CPU: "can only be called on sparse tensors"
    assert result["status"] == "untriable" and result["category"] == "no_valid_sample", result
    assert "no valid sample found" in result["reason"]


def test_static_classification():
    assert schema_samples.static_untriable("aten::_nnz")[0] == "sparse"
    assert schema_samples.static_untriable("aten::quantize_per_tensor")[0] == "quantized"
    assert schema_samples.static_untriable("aten::sinh.out") is None


def test_worker_trials_judge_a_broken_kernel_wrong(monkeypatch):
    """Through the worker processes: the test plugin's `good` kernel multiplies by 3 instead of 2."""
    monkeypatch.setenv("JAXDEV_TEST_BREAK", "1")
    got = {}
    schema_samples.run_trials(
        ["jaxdev_audit_test::good", "aten::sinh.out"], jobs=1, timeout=60, on_result=got.__setitem__
    )
    assert got["jaxdev_audit_test::good"]["status"] == "wrong", got
    assert "max abs err" in got["jaxdev_audit_test::good"]["reason"]
    assert got["aten::sinh.out"]["status"] == "pass"


@pytest.fixture
def tiny_matrix(tmp_path):
    m = matrix.empty({"complete": True})
    m.put("sin", "float32", "forward", _entry("pass"), ["aten::sin"])
    m.put("sin", "float32", "backward", _entry("pass"), ["aten::sin", "aten::cos", "aten::mul.Tensor"])
    path = tmp_path / "matrix.yaml"
    matrix.save(m, str(path))
    return path


def test_cli_writes_aten_yaml_for_a_scope(cli, tmp_path, tiny_matrix):
    out = tmp_path / "out"
    code, text = cli(
        "coverage", "--aten", "aten::sin.default", "sinh.out", "aten::_nnz", "--matrix", str(tiny_matrix), "--jobs", "1",
        "--out", str(out),
    )  # fmt: skip
    assert code == 0, text
    assert "3 overloads" in " ".join(text.split()) and "aten.yaml" in text
    doc = aten_matrix.load(str(out / "aten.yaml"))
    assert doc["meta"]["scope"] == ["aten::sin.default", "sinh.out", "aten::_nnz"]
    assert doc["meta"]["counts"]["verdicts"] == {"pass": 2, "fails": 0, "fallback": 0, "untriable": 1}
    sin = doc["overloads"]["aten::sin"]
    assert sin["evidence"] == "opinfo" and sin["opinfos"] == ["sin"] and sin["verdict"] == "pass"
    assert sin["cells"] == {"float32": {"forward": "pass", "backward": "pass"}}
    assert sin["route"] == {"PrivateUse1": "native", "AutogradPrivateUse1": "autograd"}
    sinh = doc["overloads"]["aten::sinh.out"]
    assert sinh["evidence"] == "direct" and sinh["cells"] == {"float32": {"forward": "pass"}}
    assert doc["overloads"]["aten::_nnz"]["category"] == "sparse"
    assert yaml.safe_load((out / "aten.yaml").read_text())["schema"] == aten_matrix.SCHEMA
    from jaxdev.audit import explain

    verdicts = explain.aten_verdicts(["aten::sinh.out", "aten::cos"], str(out / "aten.yaml"))
    assert list(verdicts) == ["aten::sinh.out"] and verdicts["aten::sinh.out"]["verdict"] == "pass"
