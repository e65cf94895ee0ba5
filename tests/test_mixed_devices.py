"""jax with a non-scalar CPU tensor is a RuntimeError naming both devices; 0-dim CPU is a scalar."""

from __future__ import annotations

import pytest
import torch
from jaxdev_testing import assert_same

MIXED = {
    "add": lambda j, c: j + c,
    "radd": lambda j, c: c + j,
    "mul": lambda j, c: torch.mul(j, c),
    "sub_cpu_first": lambda j, c: c - j,
    "matmul": lambda j, c: j @ c.reshape(3, 1),
    "where": lambda j, c: torch.where(j > 1, j, c),
    "cat": lambda j, c: torch.cat([j, c]),
    "stack": lambda j, c: torch.stack([c, j]),
    "maximum": lambda j, c: torch.maximum(j, c),
    "eq": lambda j, c: j == c,
    "inplace_add": lambda j, c: j.add_(c),
    "inplace_cpu_self": lambda j, c: c.add_(j),
    "copy_is_allowed_not_here": lambda j, c: torch.add(j, 1, out=c),
}


@pytest.mark.parametrize("name", list(MIXED))
def test_non_scalar_cpu_operand_is_an_error_naming_both_devices(name):
    j = torch.tensor([1.0, 2.0, 3.0], device="jax")
    c = torch.tensor([4.0, 5.0, 6.0])
    with pytest.raises(RuntimeError) as info:
        MIXED[name](j, c)
    message = str(info.value)
    assert "jax:0" in message and "cpu" in message, message
    assert "same device" in message, message


@pytest.mark.parametrize("name", ["add", "radd", "mul", "sub_cpu_first", "maximum", "eq", "where", "inplace_add"])
def test_zero_dim_cpu_tensor_is_a_scalar(name):
    fn = MIXED[name]
    j = torch.tensor([1.0, 2.0, 3.0])
    c = torch.tensor(2.5)
    expected = fn(j.clone(), c.clone())
    actual = fn(j.to("jax"), c.clone())
    assert_same(actual, expected)


@pytest.mark.parametrize(
    "tensor_dtype,scalar_dtype",
    [
        (torch.int32, torch.int64),
        (torch.float16, torch.float64),
        (torch.int64, torch.float64),
        (torch.uint8, torch.int64),
    ],
    ids=str,
)
def test_zero_dim_cpu_scalar_promotes_like_a_scalar(tensor_dtype, scalar_dtype):
    t = torch.tensor([1, 2, 3], dtype=tensor_dtype)
    s = torch.tensor(2, dtype=scalar_dtype)
    assert_same(t.to("jax") * s, t * s)
    assert_same(s + t.to("jax"), s + t)


def test_zero_dim_cpu_scalar_into_matmul_is_still_an_error():
    # matmul has no scalar form: CPU raises on the shape, jax must not silently succeed.
    with pytest.raises(RuntimeError):
        torch.ones(2, device="jax") @ torch.tensor(2.0)


def test_one_element_cpu_tensor_with_dims_is_not_a_scalar():
    with pytest.raises(RuntimeError, match="jax:0"):
        torch.ones(3, device="jax") + torch.ones(1)


def test_zero_dim_jax_tensor_with_cpu_tensor():
    # The mirror case: a 0-dim jax tensor next to a non-scalar CPU tensor. CUDA accepts a 0-dim CUDA
    # tensor as a scalar for a CPU op only when it is the CPU side that is 0-dim; jax must not
    # silently produce a CPU or jax result that CPU PyTorch would refuse for CUDA.
    with pytest.raises(RuntimeError, match="jax:0"):
        torch.ones(3) + torch.tensor(2.0, device="jax")


def test_index_with_cpu_index_tensor_is_allowed():
    x = torch.arange(6.0).reshape(2, 3)
    idx = torch.tensor([1, 0])
    assert_same(x.to("jax")[idx], x[idx])
    assert_same(x.to("jax")[:, idx], x[:, idx])
    mask = torch.tensor([True, False])
    assert_same(x.to("jax")[mask], x[mask])


def test_model_on_jax_with_cpu_input_names_both_devices():
    model = torch.nn.Linear(3, 2).to("jax")
    with pytest.raises(RuntimeError) as info:
        model(torch.ones(1, 3))
    assert "jax:0" in str(info.value) and "cpu" in str(info.value)
