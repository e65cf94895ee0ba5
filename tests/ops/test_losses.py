"""Regression and binary losses: forward and gradients equal CPU's, for every reduction."""

import pytest
import torch
import torch.nn.functional as F

import jaxdev


def _both(fn, *tensors):
    results = []
    for device in ("cpu", "jax"):
        leaves = [t.detach().to(device).requires_grad_(t.requires_grad) for t in tensors]
        out = fn(*leaves)
        (out * out).sum().backward() if out.dim() else (out * out).backward()
        results.append((out.detach().cpu(), [t.grad.cpu() if t.grad is not None else None for t in leaves]))
    return results


LOSSES = {
    "mse": lambda x, t, r: F.mse_loss(x, t, reduction=r),
    "smooth_l1": lambda x, t, r: F.smooth_l1_loss(x, t, reduction=r, beta=0.5),
    "smooth_l1_beta0": lambda x, t, r: F.smooth_l1_loss(x, t, reduction=r, beta=0.0),
    "huber": lambda x, t, r: F.huber_loss(x, t, reduction=r, delta=0.7),
    "bce": lambda x, t, r: F.binary_cross_entropy(torch.sigmoid(x), t.sigmoid(), reduction=r),
    "bce_weight": lambda x, t, r: F.binary_cross_entropy(
        torch.sigmoid(x), t.sigmoid(), torch.linspace(0.5, 2, 5, device=x.device), reduction=r
    ),
}


@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
@pytest.mark.parametrize("name", list(LOSSES))
def test_loss_and_gradients_like_cpu(name, reduction, monkeypatch):
    monkeypatch.setenv("JAXDEV_FALLBACK", "error")
    torch.manual_seed(0)
    x = torch.randn(4, 5, requires_grad=True)
    t = torch.randn(4, 5)
    (cpu_out, cpu_grads), (jax_out, jax_grads) = _both(lambda a, b: LOSSES[name](a, b, reduction), x, t)
    torch.testing.assert_close(jax_out, cpu_out)
    torch.testing.assert_close(jax_grads[0], cpu_grads[0])


def test_bce_refuses_out_of_range_input_like_cpu():
    x = torch.tensor([0.5, 1.5])
    with pytest.raises(RuntimeError, match="between 0 and 1"):
        F.binary_cross_entropy(x, torch.ones(2))
    with pytest.raises(RuntimeError, match="between 0 and 1"):
        F.binary_cross_entropy(x.to("jax"), torch.ones(2, device="jax"))


def test_bce_of_exact_zero_and_one_is_finite_like_cpu():
    x = torch.tensor([0.0, 1.0, 0.3])
    t = torch.tensor([1.0, 0.0, 0.3])
    expected = F.binary_cross_entropy(x, t, reduction="none")
    got = F.binary_cross_entropy(x.to("jax"), t.to("jax"), reduction="none")
    torch.testing.assert_close(got.cpu(), expected)
    assert jaxdev.to_jax(got).dtype == "float32"


@pytest.mark.parametrize(
    "shape,target",
    [
        ((4, 5), [3, -5, 7, 1]),  # the first bad target in memory order, not the largest
        ((4, 5), [3, 9, -7, 1]),
        ((4, 5), [1, 2, 3, 12]),
        ((5,), 6),
        ((2, 5, 2, 2), [[[0, 1], [-3, 2]], [[9, 0], [1, 1]]]),  # nll_loss2d
    ],
)
def test_nll_loss_names_cpus_out_of_range_target(shape, target):
    """nll_loss runs as one jitted program whose out-of-range flag is read eagerly: CPU's IndexError,
    naming the first kept target out of range."""
    x = torch.randn(shape).log_softmax(0 if len(shape) == 1 else 1)
    t = torch.tensor(target)
    for device in ("cpu", "jax"):
        with pytest.raises(IndexError) as cpu_error:
            F.nll_loss(x, t)
        with pytest.raises(IndexError) as jax_error:
            F.nll_loss(x.to(device), t.to(device))
        assert str(jax_error.value) == str(cpu_error.value)
    # The backward checks too. CPU's backward kernels check in an order of their own (the last bad
    # target for reduction='sum') or, for reduction='none', not at all (they write out of bounds:
    # glibc aborts the process); jax names the first, as the forward does.
    first = str(cpu_error.value)
    backward = torch.ops.aten.nll_loss2d_backward if len(shape) == 4 else torch.ops.aten.nll_loss_backward
    for reduction in (0, 1, 2):
        g = torch.ones(t.shape) if reduction == 0 and len(shape) > 1 else torch.tensor(1.0)
        with pytest.raises(IndexError) as error:
            backward(g.to("jax"), x.to("jax"), t.to("jax"), None, reduction, -100, torch.tensor(4.0).to("jax"))
        assert str(error.value) == first


def test_nll_loss_ignored_targets_are_not_checked():
    x = torch.randn(3, 4).log_softmax(1)
    t = torch.tensor([1, -100, 2])
    w = torch.rand(4)
    for reduction in ("none", "mean", "sum"):
        expected = F.nll_loss(x, t, weight=w, reduction=reduction)
        got = F.nll_loss(x.to("jax"), t.to("jax"), weight=w.to("jax"), reduction=reduction)
        torch.testing.assert_close(got.cpu(), expected)
