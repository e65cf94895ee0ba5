"""Float64 arbitration (check.arbitrate): a `wrong` sample of a reduced-precision dtype passes when jax
is at least as close as CPU to the result of the same inputs widened to float64, and stays wrong
otherwise (a wrong value, a wrong index, an op whose dtype or meaning does not carry over)."""

import math

import pytest
import torch
from torch.testing._internal.opinfo.core import SampleInput

from jaxdev.audit import check, report, samples, unit_work
from jaxdev.audit.facts import ARBITRATION_CPU_BOUND
from jaxdev.audit.matrix import Matrix
from jaxdev.audit.model import RunFacts, Verdict

ROUNDING = "jaxdev_audit_test.rounding"  # tests/audit/plugin_ops.py: CPU 8e-6 off, jax JAXDEV_TEST_ERROR off
TOL = (1e-5, 1.3e-6)  # float32's (atol, rtol)


def _arbitrate(op, dtype, sample, actual, expected, direction="forward", seeds=None):
    unit = samples.Unit(op, dtype, direction)
    return check.arbitrate(unit, samples.op_db()[op], sample, actual, expected, seeds, *TOL)


def _off_by(exact: torch.Tensor, units: float, dtype=torch.float32) -> torch.Tensor:
    """`exact` moved by `units` tolerances of float32, in `dtype`."""
    atol, rtol = TOL
    return (exact + units * (atol + rtol * exact.abs())).to(dtype)


def test_a_rounding_difference_jax_does_not_lose_passes_and_says_by_how_much():
    unit = samples.Unit(ROUNDING, "float32", "forward")
    verdict = check.run_sample(unit, samples.samples(unit)[0])
    assert verdict.status == "pass" and verdict.arbitrated, verdict
    assert verdict.reason.startswith("closer to the float64 result than CPU: jax 2.9x tolerance, CPU 5.9x")


def test_a_wrong_value_stays_wrong(monkeypatch):
    # jax 3x farther from the float64 result than CPU
    monkeypatch.setenv("JAXDEV_TEST_ERROR", "2.4e-5")
    unit = samples.Unit(ROUNDING, "float32", "forward")
    verdict = check.run_sample(unit, samples.samples(unit)[0])
    assert verdict.status == "wrong" and not verdict.arbitrated, verdict
    assert "farther from the float64 result than CPU: jax 18x tolerance, CPU 5.9x" in verdict.reason
    # a deliberately broken kernel (x * 3 where CPU's x * 2 is exact) is far from everything
    monkeypatch.setenv("JAXDEV_TEST_BREAK", "1")
    unit = samples.Unit("jaxdev_audit_test.good", "float32", "forward")
    verdict = check.run_sample(unit, samples.samples(unit)[1])
    assert verdict.status == "wrong", verdict
    assert "farther from the float64 result than CPU" in verdict.reason and "CPU 0x" in verdict.reason


def test_the_rule_directly():
    x = torch.tensor([1.5, -2.25, 3.0, 40.0])
    sample = SampleInput(x, args=(x,))
    exact = x.double() * x.double()
    for jax, cpu, passes in ((3, 5, True), (0.5, 0.1, True), (5, 5, True), (7, 3, False), (30, 0.2, False)):
        ok, note = _arbitrate("mul", "float32", sample, _off_by(exact, jax), _off_by(exact, cpu))
        assert ok == passes, (jax, cpu, note)
    # one element far off is enough to stay wrong, however close the rest
    actual = exact.float().clone()
    actual[2] = 9.5
    ok, note = _arbitrate("mul", "float32", sample, actual, _off_by(exact, 3))
    assert not ok and "farther" in note


def test_where_cpu_is_beyond_tolerance_rounding_order_does_not_decide():
    # conv_transpose3d's float32 backward: the same jax kernel 1.4x tolerance from float64 at one compile
    # setting and 2.0x at another, CPU 1.5x: within twice CPU's error jax passes either way, so the
    # verdict does not flip with a flag (facts.ARBITRATION_ORDER_SLACK)
    x = torch.tensor([1.5, -2.25, 3.0, 40.0])
    sample = SampleInput(x, args=(x,))
    exact = x.double() * x.double()
    ok, note = _arbitrate("mul", "float32", sample, _off_by(exact, 3.2), _off_by(exact, 1.7))
    assert ok and note == (
        "as far from the float64 result as CPU up to rounding order (CPU itself is beyond tolerance; "
        "within 2x CPU's error): jax 3.2x tolerance, CPU 1.7x"
    ), note
    ok, note = _arbitrate("mul", "float32", sample, _off_by(exact, 3.5), _off_by(exact, 1.5))
    assert not ok and "farther from the float64 result than CPU: jax 3.5x tolerance, CPU 1.5x" in note
    ok, note = _arbitrate("mul", "float32", sample, _off_by(exact, 2.0), _off_by(exact, 0.8))
    assert not ok  # CPU within tolerance: no slack, jax must be within tolerance too


def test_a_large_cpu_error_excuses_jax_only_within_tolerance():
    x = torch.tensor([1.5, -2.25, 3.0, 40.0])
    sample = SampleInput(x, args=(x,))
    exact = x.double() * x.double()
    far = 3 * ARBITRATION_CPU_BOUND
    ok, note = _arbitrate("mul", "float32", sample, _off_by(exact, far / 2), _off_by(exact, far))
    assert not ok and f"over the {ARBITRATION_CPU_BOUND:g}x" in note
    ok, note = _arbitrate("mul", "float32", sample, _off_by(exact, 0.5), _off_by(exact, far))
    assert ok and "closer" in note


def test_a_wrong_index_is_not_arbitrated():
    x = torch.tensor([[1.0, 5.0, 2.0], [7.0, 3.0, 7.5]])
    sample = SampleInput(x, args=(1,))
    values, indices = torch.max(x, 1)
    ok, note = _arbitrate("max.reduction_with_dim", "float32", sample, (values, indices.flip(0)), (values, indices))
    assert not ok and note == "not arbitrated: output 1 is int64 (only float32, complex64, float16, bfloat16 are)"
    # an integer unit is never arbitrated
    xi = torch.tensor([1, 2, 3])
    ok, note = _arbitrate("mul", "int64", SampleInput(xi, args=(xi,)), xi * xi + 1, xi * xi)
    assert (ok, note) == (False, "")


def test_an_output_whose_dtype_does_not_follow_the_inputs_is_not_arbitrated():
    x = torch.tensor([1.0, 2.0, 3.0], dtype=torch.float16)
    sample = SampleInput(x, kwargs={"dtype": torch.float32})  # float32 out of float16 and of float64
    expected = x.sum(dtype=torch.float32)
    ok, note = _arbitrate("sum", "float16", sample, expected + 1e-4, expected)
    assert not ok and "float32 for float16 inputs and float32 for widened ones" in note
    # an output that is float64 already has nothing to widen
    y = torch.tensor([1.5, 2.5])
    exact = torch.float_power(y, 2)
    ok, note = _arbitrate("float_power", "float32", SampleInput(y, args=(2,)), exact + 1e-3, exact)
    assert not ok and "is float64" in note


def test_ops_whose_meaning_depends_on_the_dtype():
    x = torch.tensor([1.0, math.inf, -math.inf])
    ok, note = _arbitrate("nan_to_num", "float32", SampleInput(x), x, torch.nan_to_num(x))
    assert not ok and "largest finite value" in note
    # pinv drops a singular value below float32's cut-off that float64's keeps: a jax pinv computing
    # with float64's epsilon equals the wide result, and must not pass for it
    a = torch.diag(torch.tensor([1.0, 1e-7]))
    wide = torch.linalg.pinv(a.double())
    ok, note = _arbitrate("linalg.pinv", "float32", SampleInput(a), wide.float(), torch.linalg.pinv(a))
    assert not ok and "cut-off" in note, note


def test_backward_uses_the_same_seeds_widened():
    x = torch.tensor([0.3, 1.7, 2.9], requires_grad=True)
    sample = SampleInput(x)
    seeds = [torch.tensor([1.25, -0.5, 3.0])]
    exact = seeds[0].double() / (1 - x.detach().double() ** 2)  # d atanh
    ok, note = _arbitrate("atanh", "float32", sample, (_off_by(exact, 2),), (_off_by(exact, 4),), "backward", seeds)
    assert ok and "jax 2x tolerance, CPU 4x" in note, note


@pytest.mark.parametrize("dtype", [torch.float16, torch.complex64])
def test_tolerance_units_demand_the_same_nan_and_infinities(dtype):
    wide = torch.tensor([1.0, math.nan, math.inf, 1e6], dtype=torch.complex128 if dtype.is_complex else torch.float64)
    x = wide.to(dtype)
    if dtype == torch.float16:
        assert x[3].isinf()  # 1e6 overflows float16: its infinity is the exact value rounded
    assert check.tolerance_units(x, wide, *TOL) == 0
    x[1] = 1.0
    assert check.tolerance_units(x, wide, *TOL) == math.inf
    assert check.tolerance_units(wide.to(dtype).neg(), wide, *TOL) == math.inf


def test_the_matrix_entry_and_the_report_show_the_arbitration():
    work = unit_work.UnitTask(samples.Unit(ROUNDING, "float32", "forward"), 3)
    work.verdicts = {
        0: Verdict("pass", ""),
        1: Verdict("pass", "closer to the float64 result than CPU: jax 2.9x tolerance, CPU 5.9x"),
    }
    work.verdicts[1].arbitrated = True
    entry = work.cell()
    assert entry.status == "pass" and entry.arbitrated == 1
    assert entry.reason.startswith("closer to the float64 result")
    m = Matrix(run=RunFacts(complete=True))
    m.put(ROUNDING, "float32", "forward", entry)
    text = report.markdown(m, "m.yaml")
    assert "## passed by float64 arbitration (1)" in text
    assert f"- `{ROUNDING}` float32 forward (1 of 2): closer to the float64 result" in text
