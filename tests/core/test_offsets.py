"""Eager programs' view offsets: an int32 device scalar where it fits (a TPU emulates int64 arithmetic,
and the offset's digits in int64 made per-op attention over the LM's q, k, v views its costliest TPU
compile: benchmarks/tpu_cold_step.py), widened inside a program over a storage past int32's range."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import torch

from jaxdev import tensor


def test_the_offset_argument_is_int32_where_it_fits():
    # A TPU emulates int64 arithmetic: the offset's digits in int64 made per-op attention over the LM's
    # q, k, v views a 9 s TPU compile (benchmarks/tpu_cold_step.py). An offset past int32 stays int64.
    assert tensor.offset_arg(2**31 - 1).dtype == jnp.int32
    assert tensor.offset_arg(2**31).dtype == jnp.int64
    x = torch.arange(4 * 6 * 8, dtype=torch.float32).reshape(4, 6, 8)
    j = x.to("jax")
    for view in (lambda t: t[1:, 2:5, 3], lambda t: t[2].t(), lambda t: t[:, 1::2, 1:].transpose(0, 2)):
        assert torch.equal(view(j).clone().cpu(), view(x).clone())
        assert torch.equal((view(j) * 2).cpu(), view(x) * 2)  # read inside the kernel's program
        view(j).mul_(3)  # written at its offset
        view(x).mul_(3)
        assert torch.equal(j.cpu(), x)


def test_an_int32_offset_of_a_storage_past_int32_is_widened():
    # a storage of 2**31 elements or more reads its view's digits in int64: constants up to its size
    from jaxdev.core import plans

    recipe = ((2, 3), (2**30, 1), jnp.dtype(jnp.int8), plans.GRID)
    stored = jax.ShapeDtypeStruct((2**31,), jnp.int8)
    text = str(jax.make_jaxpr(lambda s, o: plans.view_value(recipe, s, o))(stored, jnp.int32(5)))
    assert "convert_element_type[new_dtype=int64" in text
    small = jax.ShapeDtypeStruct((2**12,), jnp.int8)
    recipe = ((2, 3), (2**11, 1), jnp.dtype(jnp.int8), plans.GRID)
    text = str(jax.make_jaxpr(lambda s, o: plans.view_value(recipe, s, o))(small, jnp.int32(5)))
    assert "int64" not in text
