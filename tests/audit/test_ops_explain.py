import json

import yaml

from jaxdev.audit import dispatch


def test_ops_reports_each_overload_with_device_and_autograd_status(cli):
    code, out = cli("ops", "aten::add.Tensor", "reshape", "sin", "--format", "json")
    assert code == 0
    data = json.loads(out)
    rows = {r["name"]: r for r in data["ops"]}
    assert rows["aten::reshape"]["device"] == "decomposed"
    assert rows["aten::reshape"]["autograd"] == "math"
    assert rows["aten::add.Tensor"]["device"] in dispatch.DEVICE_STATUSES
    assert rows["aten::add.Tensor"]["autograd"] == "autograd"
    assert sum(data["counts"]["device"].values()) == len(rows)


def test_ops_table_filters_and_counts(cli):
    code, out = cli("ops", "--status", "decomposed", "--tag", "core")
    assert code == 0
    assert "overloads" in out and "decomposed" in out
    code, out = cli("ops", "*reshape*", "--format", "yaml")
    assert {r["name"] for r in yaml.safe_load(out)["ops"]} >= {"aten::reshape", "aten::_reshape_alias"}


def test_fallback_and_missing_statuses_follow_the_dispatcher():
    # an op with no jax kernel and no composite kernel runs through the CPU fallback
    fallback = [s for s in dispatch.query(["*"]) if s.device == "fallback"]
    assert fallback and all(s.device_entry.kind == "backend fallback" for s in fallback)


def test_explain_cia_op_states_the_rule(cli):
    code, out = cli("explain", "aten::reshape")
    assert code == 0
    assert "aten::reshape(Tensor(a) self, SymInt[] shape)" in out
    assert "CompositeImplicitAutograd" in out and "silently lost" in out
    assert "aten::view" in out  # the decomposition traced from the reshape OpInfo


def test_explain_overload_and_opinfo_names(cli):
    code, out = cli("explain", "aten::add.Tensor")
    assert code == 0 and "aten::add.Tensor(Tensor self, Tensor other" in out
    code, out = cli("explain", "nn.functional.relu")
    assert code == 0 and "OpInfo nn.functional.relu" in out


def test_explain_unknown_name_is_one_sentence_with_nearest_names(cli):
    code, out = cli("explain", "reshpe")
    assert code == 2
    assert "nearest: reshape" in out and "Traceback" not in out


def test_explain_from_error(cli):
    code, out = cli(
        "explain",
        "--from-error",
        "NotImplementedError: Could not run 'aten::reshape' with arguments from the 'Autogradjax' backend.",
    )
    assert code == 0 and "the error is about aten::reshape" in out
    code, out = cli("explain", "--from-error", "something odd happened")
    assert code == 2 and "found no operator name" in out
