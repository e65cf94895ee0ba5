"""jaxdev.to_jax gives the jax.Array (no copy); jaxdev.from_jax wraps one (no copy)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch
from jaxdev_testing import ALL_DTYPES, JAX, assert_same

import jaxdev


def test_to_jax_gives_a_jax_array_with_the_values():
    cpu = torch.arange(6.0).reshape(2, 3)
    a = jaxdev.to_jax(cpu.to("jax"))
    assert isinstance(a, jax.Array)
    assert a.shape == (2, 3) and a.dtype == jnp.float32
    np.testing.assert_array_equal(np.asarray(a), cpu.numpy())


def test_from_jax_gives_a_jax_tensor():
    a = jnp.arange(6, dtype=jnp.int32).reshape(3, 2)
    t = jaxdev.from_jax(a)
    assert t.device == JAX and t.dtype == torch.int32 and t.shape == (3, 2)
    assert_same(t, torch.arange(6, dtype=torch.int32).reshape(3, 2))
    assert t.is_contiguous()


def test_round_trip_is_no_copy():
    a = jnp.linspace(0.0, 1.0, 5)
    t = jaxdev.from_jax(a)
    assert jaxdev.to_jax(t) is a
    b = jaxdev.to_jax(t)
    assert jaxdev.to_jax(jaxdev.from_jax(b)) is b


def test_to_jax_is_no_copy_for_a_tensor_made_by_torch():
    t = torch.ones(4, device="jax") * 3
    assert jaxdev.to_jax(t) is jaxdev.to_jax(t)
    assert jaxdev.to_jax(t).unsafe_buffer_pointer() == jaxdev.to_jax(t).unsafe_buffer_pointer()


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=str)
def test_from_jax_to_jax_every_dtype(dtype):
    cpu = torch.tensor([1, 0, 1], dtype=dtype) if dtype == torch.bool else torch.tensor([1, 2, 3], dtype=dtype)
    a = jaxdev.to_jax(cpu.to("jax"))
    t = jaxdev.from_jax(a)
    assert_same(t, cpu)


def test_to_jax_of_a_view_has_the_view_values():
    cpu = torch.arange(12.0).reshape(3, 4)
    t = cpu.to("jax")
    for jv, cv in ((t.t(), cpu.t()), (t[1:, ::2], cpu[1:, ::2]), (t[2], cpu[2]), (t.diagonal(), cpu.diagonal())):
        a = jaxdev.to_jax(jv)
        assert a.shape == tuple(cv.shape)
        np.testing.assert_array_equal(np.asarray(a), cv.numpy())


def test_jax_arrays_stay_immutable_under_inplace_torch_ops():
    a = jnp.arange(4.0)
    t = jaxdev.from_jax(a)
    t.add_(10)
    t[0] = -1
    np.testing.assert_array_equal(np.asarray(a), np.arange(4.0))  # the jax value never changes
    np.testing.assert_array_equal(np.asarray(jaxdev.to_jax(t)), np.array([-1.0, 11.0, 12.0, 13.0]))


def test_to_jax_after_inplace_write_through_a_view():
    t = torch.zeros(2, 3, device="jax")
    t[1].fill_(5)
    np.testing.assert_array_equal(np.asarray(jaxdev.to_jax(t)), np.array([[0.0] * 3, [5.0] * 3]))


def test_torch_ops_on_from_jax_tensors_match_cpu():
    a = jnp.array([[1.0, 2.0], [3.0, 4.0]], dtype=jnp.float32)
    t = jaxdev.from_jax(a)
    cpu = torch.tensor([[1.0, 2.0], [3.0, 4.0]])
    assert_same(t @ t + 1, cpu @ cpu + 1)
    assert_same(t.t().sum(0), cpu.t().sum(0))


def test_jax_functions_on_to_jax_values():
    t = torch.tensor([1.0, 4.0, 9.0], device="jax")
    r = jaxdev.from_jax(jax.jit(jnp.sqrt)(jaxdev.to_jax(t)))
    assert_same(r, torch.tensor([1.0, 2.0, 3.0]))


def test_from_jax_of_zero_dim_and_empty():
    assert_same(jaxdev.from_jax(jnp.float32(2.5)), torch.tensor(2.5))
    assert_same(jaxdev.from_jax(jnp.zeros((0, 3), jnp.int64)), torch.zeros(0, 3, dtype=torch.int64))


def test_type_errors():
    with pytest.raises(TypeError):
        jaxdev.to_jax(torch.ones(2))
    with pytest.raises(TypeError):
        jaxdev.from_jax(np.ones(2))
    with pytest.raises(TypeError):
        jaxdev.to_jax(jnp.ones(2))
