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


@pytest.mark.parametrize(
    "v_shape,g_shape,dim",
    [((3, 3), (3, 3), 0), ((3, 4), (12,), 1), ((3, 4), (2, 4), 1), ((2, 3, 4), (2, 3), 0)],
    ids=["a square g, dim 0", "a flat g, last dim", "more rows, last dim", "a 2-d g, dim 0"],
)
def test_a_g_longer_than_vs_dim_is_read_from_its_start_as_cpu(v_shape, g_shape, dim):
    """CPU's fused kernel reads g's first v.size(dim) elements and writes as many norms, whatever g's
    size (torch._weight_norm(v, g) with g of v's shape reaches it so); jax refused any other g. The norms
    past those are memory CPU never writes (not compared)."""
    g_ = torch.Generator().manual_seed(0)
    v = torch.randn(*v_shape, generator=g_, dtype=torch.float64)
    g = torch.randn(*g_shape, generator=g_, dtype=torch.float64)
    k = v_shape[dim]
    results = {}
    for d in ("cpu", "jax"):
        vd, gd = (t.to(d, copy=True).requires_grad_() for t in (v, g))
        w, norms = torch._weight_norm_interface(vd, gd, dim)
        (w * torch.arange(w.numel(), device=d).reshape(w.shape)).sum().backward()
        composite = torch._weight_norm(v.to(d), g.to(d), dim)
        results[d] = [w, norms.flatten()[:k], composite, vd.grad, gd.grad.flatten()[:k]]
        results[d] = [t.detach().cpu() for t in results[d]] + [(norms.shape, norms.stride(), gd.grad.shape)]
    *tensors, meta = results["jax"]
    assert meta == results["cpu"][-1]
    for actual, expected in zip(tensors, results["cpu"]):
        torch.testing.assert_close(actual, expected, rtol=1e-12, atol=1e-12)


def test_a_g_shorter_than_vs_dim_is_refused_in_one_sentence():
    """CPU reads past the end of such a g (its values are whatever lies there): jax refuses."""
    with pytest.raises(RuntimeError, match=r"^weight norm: g has 2 elements, fewer than the 3 of dim 0 of v"):
        torch._weight_norm_interface(torch.ones(3, 3, device=JAX), torch.ones(2, device=JAX), 0)
