"""The compiled directions: compile (the forward through torch.compile(backend="jax")) in every
dtype, and compile-backward (torch.autograd.grad through the compiled forward's backward graph),
each judged against CPU's eager run as its eager twin is. The plugin's `twice` is right eagerly and
broken only while a graph is traced (JAXDEV_TEST_BREAK_TRACED), so only these directions can see it."""

import dataclasses

import torch

import jaxdev
from jaxdev.audit import aten_matrix, calls, check, gate, matrix, report, samples
from jaxdev.audit.model import Cell, OpNode

TWICE = "jaxdev_audit_test.twice"


def _cells(m, direction):
    return {(c.op, c.dtype): c.cell for c in m.cells() if c.direction == direction}


def test_compiled_units_are_float32_unless_dtypes_are_named_and_all_names_every_dtype():
    assert samples.units(["sin"], mode="compile") == [
        samples.Unit("sin", "float32", "compile"),
        samples.Unit("sin", "float32", "compile-backward"),
    ]
    assert samples.units(["sin"], mode="compile", backward=False) == [samples.Unit("sin", "float32", "compile")]
    for op in ("sin", "eye"):  # eye runs the float8 dtypes too, which have no --dtype name
        eager = samples.units([op], mode="eager")
        compiled = samples.units([op], ["all"], mode="compile")
        for twin, direction in (("forward", "compile"), ("backward", "compile-backward")):
            dtypes = {u.dtype for u in eager if u.direction == twin}
            assert {u.dtype for u in compiled if u.direction == direction} == dtypes, (op, direction)
    assert "float8_e5m2" in {u.dtype for u in samples.units(["eye"], ["all"], mode="compile")}
    compiled = samples.units(["sin"], ["all"], mode="compile")
    assert {u.dtype for u in compiled if u.direction == "compile-backward"} < {
        u.dtype for u in compiled if u.direction == "compile"
    }  # sin differentiates floating and complex dtypes only
    both = {u.direction for u in samples.units(["sin"], mode="both")}
    assert both == {"forward", "backward", "compile", "compile-backward"}
    assert samples.samples(samples.Unit("sin", "float32", "compile-backward"), 1)[0].input.requires_grad


def test_compile_backward_runs_the_compiled_graphs_and_is_judged_against_cpu(monkeypatch):
    unit = samples.Unit("nn.functional.softplus", "float32", "compile-backward")
    sample = samples.samples(unit, 1)[0]
    eager = check.run_sample(samples.Unit(unit.op, unit.dtype, "backward"), sample)
    verdict = check.run_sample(unit, sample)
    assert verdict.status == eager.status == "pass", verdict
    # the grads came from programs the jax backend compiled: no programs, no grads. Counted in per-op
    # mode: fused eager traces a graph into its segment's program, which graphs.program.STATS does not count
    from jaxdev.graphs import program

    before = program.STATS.programs
    cpu_sample = samples.to_device(sample, "cpu")
    _, seeds = calls.call(samples.op_db()[unit.op], cpu_sample, True)
    with jaxdev.eager_mode("op"):
        grads, laid = calls.compiled_backward(
            samples.op_db()[unit.op], samples.to_device(sample, "jax"), seeds, lambda d: samples.to_device(sample, d)
        )
    assert program.STATS.programs >= before + 2  # a forward and a backward graph
    assert (
        isinstance(grads[0], torch.Tensor) and grads[0].device.type == "cpu" and laid[0][0] == tuple(sample.input.shape)
    )


def test_a_kernel_wrong_only_when_traced_fails_only_the_compiled_direction_it_breaks(cli, tmp_path):
    args = (TWICE, "--dtype", "float32", "--dtype", "bfloat16", "--jobs", "1", "--out", str(tmp_path))
    env = {"JAXDEV_TEST_BREAK_TRACED": "backward,forward-bfloat16"}
    code, out = cli("coverage", *args, env=env)  # eager: forward and backward
    assert code == 0, out
    code, out = cli("coverage", *args, "--mode", "compile", env=env)
    assert code == 0, out
    assert "compile-backward wrong 2" in out.replace("  ", " "), out
    m = matrix.load(str(tmp_path / "matrix.yaml"))
    status = {(c.dtype, c.direction): c.cell.status for c in m.cells()}
    assert status == {
        ("float32", "forward"): "pass",
        ("float32", "backward"): "pass",
        ("float32", "compile"): "pass",
        ("float32", "compile-backward"): "wrong",
        ("bfloat16", "forward"): "pass",
        ("bfloat16", "backward"): "pass",
        ("bfloat16", "compile"): "wrong",
        ("bfloat16", "compile-backward"): "wrong",
    }
    wrong = m.get(TWICE, "float32", "compile-backward")
    assert wrong.max_abs > 0 and "compile-backward" in wrong.repro
    # the reports break the compiled directions down by dtype
    md = report.markdown(m, "matrix.yaml")
    assert "## compile by dtype" in md and "## compile-backward by dtype" in md
    assert f"- `{TWICE}` float32 compile-backward: output differs" in md
    assert "coverage.compile-backward" in report.junit(m)


def test_compiled_strides_are_judged_against_torch_compile_on_cpu_where_they_differ_from_eager(monkeypatch):
    # rot90's eager backward keeps the input's layout; AOTAutograd's backward graph gives a contiguous
    # grad, on CPU (aot_eager) as on jax: torch.compile's layout, not jaxdev's to change
    unit = samples.Unit("rot90", "float32", "compile-backward")
    sample = samples.samples(unit, 1)[0]
    verdict = check.run_sample(unit, sample)
    assert verdict.status == "pass", verdict
    assert verdict.reason.startswith("strides as torch.compile plans them on CPU too"), verdict
    assert check.run_sample(samples.Unit("rot90", "float32", "backward"), sample).reason == ""
    # float16 mul's meta strides are not its eager kernel's: the backward graph of tensordot plans a grad
    # laid out otherwise than aot_eager's kernels lay it out, and the jax backend follows the plan
    unit16 = samples.Unit("tensordot", "float16", "compile-backward")
    verdict = check.run_sample(unit16, samples.samples(unit16, 2)[1])
    assert verdict.status == "pass" and "CPU gives [1, 2, 2] (shape [2, 2, 1])" in verdict.reason, verdict
    # strides that are neither CPU's eager ones nor torch.compile's stay a stride_mismatch
    monkeypatch.setattr(calls, "compiled_on_cpu", lambda op, cpu_sample, seeds: (None, [((5, 5, 5), (1, 5, 25))]))
    verdict = check.run_sample(unit, sample)
    assert verdict.status == "stride_mismatch" and "CPU gives [5, 25, 1]" in verdict.reason, verdict


def test_values_torch_compile_itself_computes_otherwise_on_cpu_are_judged_against_that(monkeypatch):
    # dynamo traces addcdiv(value=3.14) as div, mul and add, each rounded to float16: farther from the
    # float64 result than CPU's one eager kernel, and exactly what aot_eager gives on CPU
    unit = samples.Unit("addcdiv", "float16", "compile")
    sample = samples.samples(unit, 2)[1]
    assert sample.kwargs == {"value": 3.14}
    verdict = check.run_sample(unit, sample)
    assert verdict.status == "pass", verdict
    assert verdict.reason.startswith("as torch.compile computes it on CPU too (its graphs on CPU's kernels)"), verdict
    assert "farther from the float64 result than CPU" in verdict.reason
    # values torch.compile does not give on CPU either stay wrong
    monkeypatch.setattr(
        calls,
        "compiled_on_cpu",
        lambda op, cpu_sample, seeds: (op(cpu_sample.input, *cpu_sample.args, **cpu_sample.kwargs), []),
    )
    assert check.run_sample(unit, sample).status == "wrong"


def test_a_full_compile_run_keeps_the_compiled_cells_of_other_dtypes():
    m, old = matrix.empty(), matrix.empty()
    entry = Cell("pass", "", 1, {"pass": 1})
    for dtype in ("float32", "bfloat16"):
        for direction in ("forward", "compile", "compile-backward"):
            old.put("sin", dtype, direction, dataclasses.replace(entry, reason=f"old {dtype}"))
    m.put("sin", "float32", "compile", entry)  # what a full default run measured
    m.keep_others(old, {("compile", "float32"), ("compile-backward", "float32")})
    cells = {(c.dtype, c.direction): c.cell.reason for c in m.cells()}
    assert cells == {
        ("bfloat16", "compile"): "old bfloat16",
        ("bfloat16", "compile-backward"): "old bfloat16",
        ("bfloat16", "forward"): "old bfloat16",
        ("float32", "compile"): "",  # replaced, and the slice's stale cell is gone
        ("float32", "forward"): "old float32",
    }


def test_gate_reruns_compile_backward_cells_and_no_backward_leaves_them_out(cli, tmp_path):
    base = str(tmp_path / "baseline.yaml")
    code, out = cli("gate", TWICE, "--mode", "compile", "--dtype", "all", "--init", "--baseline", base, "--jobs", "1")
    assert code == 0, out
    baseline = matrix.load(base)
    assert set(_cells(baseline, "compile-backward")) == {(TWICE, d) for d in ("bfloat16", "float32", "float64")}
    code, out = cli("gate", "--baseline", base, "--jobs", "1")
    assert code == 0 and "gate passed: 6 cells" in out, out
    code, out = cli("gate", "--baseline", base, "--jobs", "1", env={"JAXDEV_TEST_BREAK_TRACED": "backward"})
    assert code == 1, out
    assert f"new failure     {TWICE} float64 compile-backward: pass -> wrong" in out, out
    code, out = cli(
        "gate", "--baseline", base, "--no-backward", "--jobs", "1", env={"JAXDEV_TEST_BREAK_TRACED": "backward"}
    )
    assert code == 0 and "gate passed: 3 cells" in out, out
    scope = gate.scope(baseline, (), True, ("all",), None)
    assert len(scope.units) == 6


def test_aten_verdicts_take_compile_backward_cells_and_untraced_hides_no_fallback():
    def opinfo(**cells):
        entries = {d.replace("_", "-"): Cell(st, st, 1, **x) for d, (st, x) in cells.items()}
        return {"mexp": OpNode(["aten::mexp", "aten::mexp_backward"], {"float16": entries})}

    # matrix_exp in half precision: the CPU fallback eagerly, which a compiled graph cannot trace
    ops = opinfo(forward=("fallback", {"fallback": ["aten::mexp"]}), compile=("untraced", {}))
    node = aten_matrix.from_opinfos("aten::mexp", ops, ["mexp"], ["mexp"])
    assert node.verdict == "fallback" and "mexp float16 forward" in node.reason, node
    ops = opinfo(forward=("pass", {}), compile_backward=("wrong", {}))
    node = aten_matrix.from_opinfos("aten::mexp_backward", ops, ["mexp"], [])
    assert node.cells == {"float16": {"compile-backward": "wrong"}} and node.verdict == "fails"
