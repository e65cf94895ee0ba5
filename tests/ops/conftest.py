"""Fixtures of the op tests: `tpu_policy`, the TPU's program facts on this process's platform."""

from __future__ import annotations

import jax
import numpy as np
import pytest

from jaxdev.ops.kit import capabilities, transcendentals


@pytest.fixture
def tpu_policy(monkeypatch):
    """The TPU's program facts on this process's platform and its own float32 functions (JAXDEV_MATH
    auto picks them off CPU), with every program traced and lowered afresh while they hold; and a list
    of the (from, to) dtypes of each convert the usual lowering was asked for."""
    monkeypatch.setitem(capabilities.PROGRAM_FACTS, capabilities.platform(), dict(capabilities.PROGRAM_FACTS["tpu"]))
    seen, usual = [], capabilities._usual_convert

    def spy(ctx, operand, *, new_dtype, **params):
        seen.append((ctx.avals_in[0].dtype, np.dtype(new_dtype)))
        return usual(ctx, operand, new_dtype=new_dtype, **params)

    monkeypatch.setattr(capabilities, "_usual_convert", spy)
    jax.clear_caches()
    with transcendentals.forced("own"):
        yield seen
    jax.clear_caches()  # the next test's programs as this platform makes them
