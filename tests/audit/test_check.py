import torch

import jaxdev
from jaxdev.audit import check, samples


def test_uninitialised_memory_is_compared_by_shape_and_dtype():
    unit = samples.Unit("empty_like", "float32", "forward")
    verdict = check.run_sample(unit, samples.samples(unit, 1)[0])
    assert verdict.uninitialised and not verdict.random
    assert verdict.status in ("pass", "fallback"), verdict


def test_an_output_of_another_dtype_gets_at_least_its_own_tolerance():
    # an integer unit has zero tolerance, but its float outputs (fft, true_divide) get float32's
    expected = torch.tensor([1.0, 2.0])
    assert check.differs(expected + 1e-7, expected, atol=0.0, rtol=0.0) is None
    assert check.differs(expected + 1e-3, expected, atol=0.0, rtol=0.0).status == "wrong"
    assert check.differs(torch.tensor([1, 2]), torch.tensor([1, 3]), atol=0.0, rtol=0.0).status == "wrong"


def test_unsupported_is_judged_by_the_exception_type_never_by_the_dtype_name():
    import jaxdev

    assert check.exception_status(jaxdev.UnsupportedDtypeError("no JAX type")) == "unsupported"
    assert check.exception_status(jaxdev.UnsupportedLayoutError("sparse")) == "unsupported"
    # the same words from any other exception are a failure: a bug is never hidden by its message
    text = "dtype torch.complex32 is not supported on device 'jax': JAX has no equivalent type"
    assert check.exception_status(TypeError(text)) == "exception"
    assert check.exception_status(KeyError(torch.complex32)) == "exception"
    wrapped = RuntimeError("backend failed")
    wrapped.__cause__ = jaxdev.UnsupportedDtypeError(text)
    assert check.exception_status(wrapped) == "unsupported"  # torch.compile raises `from` the backend's error


def test_complex32_samples_are_checked_against_cpu():
    # complex32 is served as CPU serves it (jaxdev/ops/carriers/complex_half.py): its samples compare with CPU's
    for op, dtype in (("abs", "complex32"), ("view_as_complex", "float16")):
        unit = samples.Unit(op, dtype, "forward")
        verdict = check.run_sample(unit, samples.samples(unit, 1)[0])
        assert verdict.status == "pass", verdict


def test_a_sparse_result_is_checked_and_an_unheld_layout_is_unsupported_in_one_sentence():
    unit = samples.Unit("to_sparse", "float32", "forward")  # jax holds COO tensors (jaxdev/ops/sparse.py)
    verdict = check.run_sample(unit, samples.samples(unit, 1)[0])
    assert verdict.status == "pass", verdict
    try:
        torch.eye(2, device="jax").to_sparse_bsr((1, 1))
    except jaxdev.UnsupportedLayoutError as e:
        assert check.exception_status(e) == "unsupported"
        assert str(e).startswith("layout sparse_bsr is not supported on jax")
    else:
        raise AssertionError("a BSR tensor on jax did not raise UnsupportedLayoutError")


def test_arguments_pytorch_requires_on_cpu_stay_there():
    unit = samples.Unit("tensor_split", "float32", "forward")
    sample = samples.samples(unit, 1)[0]
    assert isinstance(sample.args[0], torch.Tensor)  # tensor_indices_or_sections
    moved = samples.to_device(sample, "jax", unit.op)
    assert moved.input.device.type == "jax" and moved.args[0].device.type == "cpu"
    assert samples.to_device(sample, "jax").args[0].device.type == "jax"  # other ops: everything moves
    verdict = check.run_sample(unit, sample)
    assert verdict.status == "pass", verdict


def test_strides_are_compared_with_cpu_outside_the_trace_mode():
    # Under the auditor's TorchDispatchMode, householder_product_backward takes its out-of-place
    # (tensor-subclass) branch and returns a contiguous grad for geqrf's column-major reflectors;
    # outside any mode CPU keeps the reflectors' layout, and so does jax.
    unit = samples.Unit("ormqr", "float64", "backward")
    sample = samples.samples(unit, 1)[0]
    assert sample.input.stride() == (1, 5) and sample.kwargs == {"left": True, "transpose": True}
    cpu_sample = samples.to_device(sample, "cpu")
    with check.Trace():
        traced, seeds = check.call(samples.op_db()["ormqr"], cpu_sample, True)
    plain, _ = check.call(samples.op_db()["ormqr"], samples.to_device(sample, "cpu"), True, seeds)
    assert traced[0].stride() == (5, 1) and plain[0].stride() == (1, 5)  # PyTorch's two branches
    verdict = check.run_sample(unit, sample)
    assert verdict.status == "pass", verdict


def test_cpu_giving_two_results_for_identical_calls_is_said_and_judged_against_both(monkeypatch):
    # plugin_ops' wobbly: CPU's float32 alternates between results 8e-6 and 2e-7 off (relative); jax is
    # exact: beyond tolerance of the first, within it of the second. Judged against both, it passes and
    # the reason says CPU disagrees with itself (not "random op", and no flip with the call order).
    unit = samples.Unit("jaxdev_audit_test.wobbly", "float32", "forward")
    for sample in samples.samples(unit):
        verdict = check.run_sample(unit, sample)
        assert verdict.status == "pass" and verdict.unstable and not verdict.random, verdict
        assert verdict.reason.startswith("CPU gives two results for identical calls (max abs diff"), verdict
    monkeypatch.setenv("JAXDEV_TEST_WOBBLE", "1e-4")  # far from both, and from float64
    verdict = check.run_sample(unit, samples.samples(unit)[0])
    assert verdict.status == "wrong" and verdict.unstable, verdict
    assert "farther from the float64 result than CPU" in verdict.reason
    assert verdict.reason.endswith("jax is judged against both and the float64 result"), verdict
    # float64 (not arbitrated): CPU's two results differ beyond tolerance and jax matches neither:
    # there is nothing to call jax wrong against, and the verdict says so
    monkeypatch.setenv("JAXDEV_TEST_WOBBLE", "0")
    unit = samples.Unit("jaxdev_audit_test.wobbly", "float64", "forward")
    verdict = check.run_sample(unit, samples.samples(unit)[0])
    assert verdict.status == "skip" and verdict.reason.startswith("no verdict: jax matches neither: output"), verdict
