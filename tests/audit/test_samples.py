"""samples.py: which inputs a cell draws (sample inputs, or reference inputs spread evenly)."""

from __future__ import annotations

import torch

from jaxdev.audit import samples
from jaxdev.audit.samples import Unit


def test_spread_takes_the_first_and_last_and_all_when_few():
    assert samples.spread(3, 5) == [0, 1, 2]
    assert samples.spread(10, 1) == [0]
    assert samples.spread(10, 4) == [0, 3, 6, 9]
    assert samples.spread(118, 5) == [0, 29, 58, 88, 117]


def _same(a, b) -> bool:
    return a.input.shape == b.input.shape and bool(torch.eq(a.input, b.input).logical_or(a.input.isnan()).all())


def test_reference_inputs_are_drawn_seeded_and_spread_over_all_of_them():
    unit = Unit("sin", "float32", "forward")
    every = list((samples.seed_all(0), samples.op_db()["sin"].reference_inputs("cpu", torch.float32))[1])
    drawn, total = samples.drawn(unit, 4, "reference")
    assert total == len(every) > 4 + len(list(samples.op_db()["sin"].sample_inputs("cpu", torch.float32)))
    assert all(_same(d, every[i]) for d, i in zip(drawn, samples.spread(total, 4), strict=True))
    again, _ = samples.drawn(unit, 4, "reference")  # the same tensors in every process and call
    assert all(_same(a, b) for a, b in zip(drawn, again, strict=True))


def test_sample_inputs_are_the_first_ones_and_counted_one_past_the_limit():
    unit = Unit("add", "float32", "forward")
    drawn, total = samples.drawn(unit, 2, "sample")
    first = samples.samples(unit, 2)
    assert total == 3 and len(drawn) == 2 and all(_same(a, b) for a, b in zip(drawn, first, strict=True))


def test_a_plugin_runs_once_however_often_the_op_list_is_rebuilt():
    """A plugin registers a TORCH_LIBRARY, which cannot run twice in a process: rebuilding the OpInfo list
    (deviceless.forget_platform clears every jaxdev functools cache, the list's too) takes the loaded one.
    CI failed 27 audit tests in one worker after a test had forgotten the platform."""
    first = samples.op_db()
    samples.op_db.cache_clear()
    again = samples.op_db()
    assert "jaxdev_audit_test.good" in again and again["jaxdev_audit_test.good"] is first["jaxdev_audit_test.good"]
