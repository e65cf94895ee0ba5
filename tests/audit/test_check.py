import torch

from jaxdev.audit import check, samples


def test_uninitialised_memory_is_compared_by_shape_and_dtype():
    unit = samples.Unit("empty_like", "float32", "forward")
    verdict = check.run_sample(unit, samples.samples(unit, 1)[0])
    assert verdict["uninitialised"] and "random" not in verdict
    assert verdict["status"] in ("pass", "fallback"), verdict


def test_an_output_of_another_dtype_gets_at_least_its_own_tolerance():
    # an integer unit has zero tolerance, but its float outputs (fft, true_divide) get float32's
    expected = torch.tensor([1.0, 2.0])
    assert check.compare(expected + 1e-7, expected, atol=0.0, rtol=0.0) is None
    assert check.compare(expected + 1e-3, expected, atol=0.0, rtol=0.0)["status"] == "wrong"
    assert check.compare(torch.tensor([1, 2]), torch.tensor([1, 3]), atol=0.0, rtol=0.0)["status"] == "wrong"
