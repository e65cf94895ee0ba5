"""torch.autocast("jax") follows CUDA's policy: matmul-like ops in the autocast dtype, range-hungry
ops in float32, everything else unchanged; gradients reach float32 parameters."""

import pytest
import torch

import jaxdev  # noqa: F401


@pytest.fixture
def linear_pair():
    torch.manual_seed(0)
    cpu = torch.nn.Linear(8, 4)
    on_jax = torch.nn.Linear(8, 4).to("jax")
    on_jax.load_state_dict(cpu.state_dict())
    return cpu, on_jax, torch.randn(3, 8)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_linear_runs_in_autocast_dtype_like_cpu(linear_pair, dtype):
    cpu, on_jax, x = linear_pair
    with torch.autocast("cpu", dtype=dtype):
        expected = cpu(x)
    with torch.autocast("jax", dtype=dtype):
        got = on_jax(x.to("jax"))
    assert got.dtype == expected.dtype == dtype
    torch.testing.assert_close(got.cpu(), expected, rtol=2e-2, atol=1e-2)


def test_float32_ops_and_passthrough(linear_pair):
    _, on_jax, x = linear_pair
    with torch.autocast("jax", dtype=torch.bfloat16):
        y = on_jax(x.to("jax"))
        assert torch.softmax(y, -1).dtype == torch.float32  # CUDA's fp32 list
        assert torch.log(y.abs()).dtype == torch.float32
        assert (y + 1).dtype == torch.bfloat16  # not listed: unchanged
        assert torch.ones(2, device="jax", dtype=torch.float64).exp().dtype == torch.float64


def test_backward_under_autocast_gives_float32_grads(linear_pair):
    cpu, on_jax, x = linear_pair
    with torch.autocast("cpu", dtype=torch.bfloat16):
        cpu(x).float().sum().backward()
    with torch.autocast("jax", dtype=torch.bfloat16):
        on_jax(x.to("jax")).float().sum().backward()
    assert on_jax.weight.grad.dtype == torch.float32
    torch.testing.assert_close(on_jax.weight.grad.cpu(), cpu.weight.grad, rtol=2e-2, atol=1e-2)


def test_autocast_off_outside_the_context(linear_pair):
    _, on_jax, x = linear_pair
    assert on_jax(x.to("jax")).dtype == torch.float32
