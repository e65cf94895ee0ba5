"""The aten-level matrix: the aggregation rule, direct trials (pass, untriable, fails on jax) and
`jaxdev coverage --aten` on a tiny scope."""

import pytest
import yaml

from jaxdev.audit import aten_matrix, matrix, schema_samples
from jaxdev.audit.model import Cell, OpNode, Route, Verdict


def _entry(status, **extra):
    return Cell(status, f"{status} reason", 1, **extra)


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
OPS = {op: OpNode(node["aten"], node["results"]) for op, node in OPS.items()}


def test_namesake_opinfos_judge_and_fallback_on_other_ops_counts_as_pass():
    node = aten_matrix.from_opinfos("aten::foo.Tensor", OPS, ["foo", "other"], ["foo"])
    # other's wrong forward does not count: foo is named after the overload
    assert node.judged_by == ["foo"] and node.opinfos == ["foo", "other"]
    # foo's float32 backward fell back for aten::bar only: a pass for aten::foo.Tensor
    assert node.cells == {"float32": {"forward": "pass", "backward": "pass"}, "int64": {"forward": "fallback"}}
    assert node.verdict == "fallback" and "foo int64 forward" in node.reason


def test_without_namesake_the_worst_cell_of_every_reaching_opinfo_decides():
    node = aten_matrix.from_opinfos("aten::bar", OPS, ["foo", "other"], [])
    assert node.cells["float32"] == {"forward": "wrong", "backward": "fallback"}
    assert node.cells["complex32"] == {"forward": "unsupported"}  # kept, but not measured
    assert node.verdict == "fails" and node.category == "wrong"
    assert node.reason.startswith("wrong in OpInfo other float32 forward") and "indirect" in node.reason
    assert node.repro == "other float32 forward: ..."


def test_backward_ops_take_backward_cells_and_unmeasured_cells_give_no_verdict():
    node = aten_matrix.from_opinfos("aten::baz_backward", OPS, ["other"], [])
    assert node.cells == {"float32": {"backward": "pass"}} and node.verdict == "pass"
    only_unsupported = {"x": OpNode(["aten::x"], {"complex32": {"forward": _entry("unsupported")}})}
    assert aten_matrix.from_opinfos("aten::x", only_unsupported, ["x"], ["x"]) is None  # -> a direct trial


def test_counts_and_trial_nodes():
    nodes = {
        "a": aten_matrix.from_trial(Verdict("pass", "", dtype="float32", repro="a(...)")),
        "b": aten_matrix.from_trial(Verdict("wrong", "output differs", dtype="int64")),
        "c": aten_matrix.from_trial(Verdict("untriable", "sparse", category="sparse")),
        "d": aten_matrix.from_trial(Verdict("untriable", "no valid", category="no_valid_sample")),
    }
    assert nodes["a"].cells == {"float32": {"forward": "pass"}} and nodes["a"].evidence == "direct"
    assert nodes["b"].verdict == "fails" and nodes["b"].category == "wrong"
    assert nodes["c"].evidence == "none" and nodes["c"].cells == {}
    c = aten_matrix.counts(nodes)
    assert c["verdicts"] == {"pass": 1, "fails": 1, "fallback": 0, "untriable": 2}
    assert c["tried"] == 2 and c["tried_share"] == 0.5 and c["dense"] == 3 and c["tried_share_dense"] == 0.6667
    assert c["comparable"] == 3 and c["untriable"] == {"no_valid_sample": 1, "sparse": 1}


def test_pinning_host_memory_is_untriable_as_on_cuda():
    # pin_memory takes CPU tensors on every device: a jax tensor's raises, as a CUDA tensor's does
    for name in ("aten::pin_memory", "aten::_pin_memory", "aten::_pin_memory.out"):
        assert schema_samples.static_untriable(name)[0] == "host_only", name


def test_direct_trial_passes_on_an_out_variant():
    result = schema_samples.trial("aten::sinh.out")
    assert result.status == "pass", result
    assert result.dtype == "float32" and result.repro.startswith("aten::sinh.out(self=float32[3, 3]")


@pytest.mark.parametrize("name", ["aten::_ctc_loss.out", "aten::_ctc_loss.Tensor_out"])
def test_outputs_cpu_leaves_partly_unwritten_are_compared_by_shape(name):
    """_ctc_loss's log_alpha is written only within each sample's lengths: CPU's two runs may agree by
    chance (fresh zeroed pages), so its values are never compared (schema_samples.PARTLY_UNWRITTEN)."""
    # the aten matrix takes the arguments of a sibling overload the OpInfo reaches (aten_matrix.donors)
    siblings = [("aten::_ctc_loss", "nn.functional.ctc_loss"), ("aten::_ctc_loss.Tensor", "nn.functional.ctc_loss")]
    result = schema_samples.trial(name, donors=siblings)
    assert result.status == "pass", result
    assert "values of output(s) [1, 3] unchecked" in result.reason


def test_cpu_rejecting_every_candidate_is_untriable_not_a_failure():
    result = schema_samples.trial("aten::sspaddmm")  # CPU: "can only be called on sparse tensors"
    assert result.status == "untriable" and result.category == "no_valid_sample", result
    assert "no valid sample found" in result.reason


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
    assert got["jaxdev_audit_test::good"].status == "wrong", got
    assert "max abs err" in got["jaxdev_audit_test::good"].reason
    assert got["aten::sinh.out"].status == "pass"


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
    assert doc.meta["scope"] == ["aten::sin.default", "sinh.out", "aten::_nnz"]
    assert doc.counts()["verdicts"] == {"pass": 2, "fails": 0, "fallback": 0, "untriable": 1}
    sin = doc.overloads["aten::sin"]
    assert sin.evidence == "opinfo" and sin.opinfos == ["sin"] and sin.verdict == "pass"
    assert sin.cells == {"float32": {"forward": "pass", "backward": "pass"}}
    assert sin.route == Route("native", "autograd")
    sinh = doc.overloads["aten::sinh.out"]
    assert sinh.evidence == "direct" and sinh.cells == {"float32": {"forward": "pass"}}
    assert doc.overloads["aten::_nnz"].category == "sparse"
    assert yaml.safe_load((out / "aten.yaml").read_text())["schema"] == aten_matrix.SCHEMA
    from jaxdev.audit import explain

    verdicts = explain.aten_verdicts(["aten::sinh.out", "aten::cos"], str(out / "aten.yaml"))
    assert list(verdicts) == ["aten::sinh.out"] and verdicts["aten::sinh.out"]["verdict"] == "pass"


# ---------------------------------------------------------------------------------------------
# Argument builders (facts.arguments), out= dtypes from the functional overload, gauge-free decompositions


@pytest.mark.parametrize(
    "name, shown",
    [
        # a backward shaped by its forward: grad_output of the upsampled size, input_size of the input
        ("aten::upsample_nearest2d_backward", "grad_output=float32[2, 3, 6, 6], output_size=[6, 6]"),
        ("aten::nll_loss", "target=int64[4]"),  # class indices, not a float tensor like self
        ("aten::gru_cell", "hx=float32[2, 3], w_ih=float32[9, 4]"),  # 3 gates x hidden 3, input 4
        ("aten::_fused_adamw_", "max_exp_avg_sqs=[], state_steps=[float32[], float32[]]"),
    ],
)
def test_hinted_families_are_tried_with_consistent_arguments(name, shown):
    result = schema_samples.trial(name)
    assert result.status not in ("untriable", "exception", "crash"), result
    assert shown in result.repro, result.repro


def test_out_dtypes_follow_the_functional_overload_and_cpu_only_outs_stay_on_cpu():
    rfft = schema_samples.trial("aten::fft_rfft.out")  # a complex out= for a real input
    assert rfft.status == "pass" and "out=complex64[" in rfft.repro, rfft
    packed = schema_samples.trial("aten::_pack_padded_sequence.out")  # lengths and out1 (batch_sizes) on CPU
    assert packed.status == "pass", packed


def test_fit_keeps_what_the_overload_can_take():
    import torch

    from jaxdev.audit.facts import arguments

    fit = schema_samples.fit
    assert fit(0.01, "Tensor")[0] and torch.equal(fit(0.01, "Tensor")[1], torch.tensor(0.01))  # _fused_adam lr
    assert torch.equal(fit([6, 5], "Tensor")[1], torch.tensor([6, 5]))  # ctc_loss lengths as a tensor
    assert not fit([0, 0], "str")[0] and fit("valid", "str") == (True, "valid")  # _convolution_mode's padding
    assert not fit(True, "int")[0] and not fit(None, "Tensor")[0] and fit(None, "Optional[int]")[0]
    spacing = arguments.ByType({"List[number]": [2.0], "List[Tensor]": ["coords"]})
    assert fit(spacing, "List[number]") == (True, [2.0]) and fit(spacing, "List[Tensor]") == (True, ["coords"])
    assert fit(spacing, "List[int]") == (False, None)


def test_casts_to_unsigned_get_non_negative_inputs_and_storages_are_built():
    assert schema_samples.trial("aten::_cast_Byte").status == "pass"  # negative float -> uint8 is UB in C++
    assert schema_samples.static_untriable("aten::set_.source_Storage") is None
    result = schema_samples.trial("aten::set_.source_Storage_storage_offset")
    assert result.status == "pass" and "UntypedStorage[48 bytes]" in result.repro, result


def test_sparse_only_copies_are_sparse_and_seeded_ops_without_randomness_are_compared_by_value():
    assert schema_samples.static_untriable("aten::values_copy")[0] == "sparse"
    assert schema_samples.static_untriable("aten::sspaddmm.out")[0] == "sparse"
    lstm = schema_samples.trial("aten::lstm.input")  # tagged random (dropout), dropout 0 here
    assert lstm.status == "pass" and not lstm.random and lstm.reason == "", lstm


def _flip(x, dim, index):
    """x with the `index`-th slice along `dim` negated."""
    y = x.clone()
    y.select(dim, index).neg_()
    return y


def test_decompositions_are_compared_up_to_their_gauge():
    import torch

    a = torch.randn(4, 3, generator=torch.Generator().manual_seed(0))
    u, s, vh = torch.linalg.svd(a, full_matrices=False)
    flipped = (_flip(u, -1, 0), s, _flip(vh, -2, 0))  # the same factorisation, another sign
    from jaxdev.audit import check

    assert check.differs([flipped], [(u, s, vh)], 0.0, 0.0).status == "wrong"
    assert schema_samples.gauge_free("aten::linalg_svd", [flipped], [(u, s, vh)])
    assert schema_samples.gauge_free("aten::linalg_svd.U", [flipped, *flipped], [(u, s, vh), u, s, vh])
    assert not schema_samples.gauge_free("aten::linalg_svd", [(_flip(u, -1, 0), s, vh)], [(u, s, vh)])  # U only
    assert not schema_samples.gauge_free("aten::linalg_svd", [(u, s * 1.01, vh)], [(u, s, vh)])
    assert not schema_samples.gauge_free("aten::linalg_inv", [(a,)], [(-a,)])  # not a decomposition
    q, r = torch.linalg.qr(a)
    assert schema_samples.gauge_free("aten::linalg_qr", [(_flip(q, -1, 1), _flip(r, -2, 1))], [(q, r)])
    assert not schema_samples.gauge_free("aten::linalg_qr", [(_flip(q, -1, 1), r)], [(q, r)])
    sym = a.T @ a
    w, v = torch.linalg.eigh(sym)
    assert schema_samples.gauge_free("aten::_linalg_eigh", [(w, _flip(v, -1, 2))], [(w, v)])
    assert not schema_samples.gauge_free("aten::_linalg_eigh", [(w, v.roll(1, -1))], [(w, v)])
    ev, evec = torch.linalg.eig(torch.randn(3, 3, generator=torch.Generator().manual_seed(1)))
    order = torch.tensor([2, 0, 1])
    assert schema_samples.gauge_free("aten::linalg_eig", [(ev[order], evec[:, order] * 1j)], [(ev, evec)])
    assert schema_samples.gauge_free("aten::linalg_eigvals", [ev[order]], [ev])
    assert not schema_samples.gauge_free("aten::linalg_eigvals", [ev[order] * 1.01], [ev])
