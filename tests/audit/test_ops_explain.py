import json

import yaml
from jaxdev_testing import reshape_matrix_with_unsupported_cells

from jaxdev.audit import dispatch


def test_ops_from_aten_yaml_agrees_with_the_live_dispatcher(cli):
    picks = ("aten::add.Tensor", "reshape", "sin", "*pool2d*", "--format", "json")
    code, recorded = cli("ops", *picks)
    assert code == 0, recorded
    code, live = cli("ops", *picks, "--live")
    assert code == 0, live
    strip = lambda out: {r["name"]: (r["device"], r["autograd"], r["tags"]) for r in json.loads(out)["ops"]}
    assert strip(recorded) == strip(live)
    assert json.loads(recorded)["source"].endswith("aten.yaml")


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


def test_explain_answers_the_user_and_keeps_the_rule_for_kernel_authors(cli, tmp_path):
    code, out = cli("explain", "aten::reshape")
    assert code == 0
    assert "aten::reshape(Tensor(a) self, SymInt[] shape)" in out
    assert "decomposes into other ops, which run on jax" in out and "to do     nothing: use it on jax" in out
    assert "silently lost" not in out and "dispatcher rule" not in out  # the kernel author's words: --dev only
    code, noted = cli("explain", "aten::reshape", "--matrix", reshape_matrix_with_unsupported_cells(tmp_path))
    assert code == 0, noted
    assert noted.count("not supported by design") == 1  # the unsupported cells' note once, not per cell
    code, dev = cli("explain", "aten::reshape", "--dev")
    assert code == 0 and dev.startswith(out.rsplit("for kernel authors:", 1)[0])
    assert "CompositeImplicitAutograd" in dev and "silently lost" in dev
    assert "aten::view" in dev  # what the reshape OpInfo's samples reach
    assert "PyTorch's build: aten/src/ATen/RegisterCompositeImplicitAutograd" in dev and "/__w/" not in dev


def test_explain_dev_points_at_this_checkout(cli):
    code, out = cli("explain", "aten::relu", "--dev")
    assert code == 0
    assert "jaxdev kernel: jaxdev/ops/" in out  # a path in this checkout, relative to it


def test_explain_overload_and_opinfo_names(cli):
    code, out = cli("explain", "aten::add.Tensor")
    assert code == 0 and "aten::add.Tensor(Tensor self, Tensor other" in out
    code, out = cli("explain", "nn.functional.relu")
    assert code == 0 and "OpInfo nn.functional.relu" in out


def test_explain_unknown_name_is_one_sentence_with_ranked_names(cli):
    code, out = cli("explain", "reshpe")
    assert code == 2
    assert "nearest: reshape," in out and "Traceback" not in out and out.count("\n") == 1
    code, out = cli("explain", "nosuchop")
    assert code == 2 and "nothing near it" in out and "jaxdev ops '*nosuchop*'" in out


def test_explain_from_error(cli):
    code, out = cli(
        "explain",
        "--from-error",
        "NotImplementedError: Could not run 'aten::reshape' with arguments from the 'Autogradjax' backend.",
    )
    assert code == 0 and "the error is about aten::reshape" in out
    code, out = cli("explain", "--from-error", "something odd happened")
    assert code == 2 and "found no operator name" in out
