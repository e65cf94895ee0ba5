"""aten::_weight_norm_interface and its backward on jax (jaxdev/ops/weight_norm.py) against CPU: the fused
op's w and norms, gradients through it, and nn.utils' weight norm modules, without the CPU fallback."""

from __future__ import annotations

import pytest
import torch
from jaxdev_testing import JAX

pytestmark = pytest.mark.usefixtures("no_fallback")

CASES = [(0, (4, 3, 2)), (2, (4, 3, 2)), (0, (5,)), (1, (3, 4))]


def _tolerance(dtype):
    return {"rtol": 1e-2, "atol": 1e-2} if dtype == torch.bfloat16 else {"rtol": 1e-5, "atol": 1e-5}


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
@pytest.mark.parametrize("dim,shape", CASES)
def test_weight_norm_interface_forward_and_backward(dtype, dim, shape):
    g_ = torch.Generator().manual_seed(0)
    v = torch.randn(*shape, generator=g_).to(dtype).requires_grad_()
    g_shape = [1] * len(shape)
    g_shape[dim] = shape[dim]
    g = (torch.rand(*g_shape, generator=g_) + 0.5).to(dtype).requires_grad_()
    cotangent = torch.randn(*shape, generator=g_).to(dtype)
    w, norms = torch._weight_norm_interface(v, g, dim)
    (w * cotangent).sum().backward()
    vj, gj = (t.detach().to(JAX).requires_grad_() for t in (v, g))
    wj, norms_j = torch._weight_norm_interface(vj, gj, dim)
    (wj * cotangent.to(JAX)).sum().backward()
    assert (wj.dtype, norms_j.dtype) == (w.dtype, norms.dtype)  # bfloat16 keeps its norms in float32
    for actual, expected in ((wj, w), (norms_j, norms), (vj.grad, v.grad), (gj.grad, g.grad)):
        torch.testing.assert_close(actual.cpu(), expected, **_tolerance(dtype))


def test_only_first_or_last_dim_as_cpu():
    v, g = torch.randn(2, 3, 4), torch.rand(1, 3, 1)
    with pytest.raises(RuntimeError, match="first or last dim"):
        torch._weight_norm_interface(v, g, 1)
    with pytest.raises(RuntimeError, match="first or last dim"):
        torch._weight_norm_interface(v.to(JAX), g.to(JAX), 1)


@pytest.mark.parametrize("style", ["parametrizations", "legacy"])
def test_weight_norm_modules_train_as_cpu(style):
    torch.manual_seed(0)
    conv = torch.nn.Conv1d(3, 4, 3)
    if style == "parametrizations":
        make = torch.nn.utils.parametrizations.weight_norm
    else:
        make = torch.nn.utils.weight_norm
    cpu = make(conv)
    torch.manual_seed(0)
    jax_module = make(torch.nn.Conv1d(3, 4, 3))
    jax_module.load_state_dict(cpu.state_dict())
    jax_module.to(JAX)
    x = torch.randn(2, 3, 7, generator=torch.Generator().manual_seed(1))
    expected = cpu(x)
    expected.square().sum().backward()
    actual = jax_module(x.to(JAX))
    actual.square().sum().backward()
    torch.testing.assert_close(actual.cpu(), expected, rtol=1e-5, atol=1e-5)
    for (name, p), (_, q) in zip(cpu.named_parameters(), jax_module.named_parameters()):
        torch.testing.assert_close(q.grad.cpu(), p.grad, rtol=1e-4, atol=1e-5, msg=name)
