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


_X2, _X4 = torch.randn(3, 5).log_softmax(1), torch.randn(2, 5, 3, 3).log_softmax(1)
_T3, _T433 = torch.tensor([1, 2, 3]), torch.zeros(2, 3, 3, dtype=torch.long)
_A = torch.ops.aten

NLL_ARGUMENT_ERRORS = {
    "int32 target": lambda d: F.nll_loss(_X2.to(d), _T3.int().to(d)),
    "float target": lambda d: F.nll_loss(_X2.to(d), _T3.float().to(d)),
    "weight of 4 for 5 classes": lambda d: F.nll_loss(_X2.to(d), _T3.to(d), weight=torch.ones(4).to(d)),
    "float64 weight": lambda d: F.nll_loss(_X2.to(d), _T3.to(d), weight=torch.ones(5, dtype=torch.float64).to(d)),
    "int64 input": lambda d: F.nll_loss(_X2.long().to(d), _T3.to(d)),
    "complex input": lambda d: F.nll_loss(_X2.to(torch.complex64).to(d), _T3.to(d)),
    "2-d target": lambda d: _A.nll_loss_forward(_X2.to(d), _T3[:, None].to(d), None, 1, -100),
    "size mismatch": lambda d: _A.nll_loss_forward(_X2.to(d), _T3[:2].to(d), None, 1, -100),
    "uint8 255 beside ignore_index -1": lambda d: F.nll_loss(
        _X2.to(d), _T3.to(torch.uint8).add(252).to(d), ignore_index=-1
    ),
    "images: uint8 target": lambda d: F.nll_loss(_X4.to(d), _T433.to(torch.uint8).to(d)),
    "images: int32 target": lambda d: F.nll_loss(_X4.to(d), _T433.int().to(d)),
    "images: weight of 4": lambda d: F.nll_loss(_X4.to(d), _T433.to(d), weight=torch.ones(4).to(d)),
    "images: float64 weight": lambda d: F.nll_loss(_X4.to(d), _T433.to(d), weight=torch.ones(5).double().to(d)),
    "images: int64 input": lambda d: F.nll_loss(_X4.long().to(d), _T433.to(d)),
    "images: size mismatch": lambda d: F.nll_loss(_X4.to(d), torch.zeros(2, 3, 4, dtype=torch.long).to(d)),
    "images: 3-d input": lambda d: _A.nll_loss2d_forward(_X4[0].to(d), _T433.to(d), None, 1, -100),
    "images: 2-d target": lambda d: _A.nll_loss2d_forward(_X4.to(d), _T433[0].to(d), None, 1, -100),
    "images: 2-d weight": lambda d: _A.nll_loss2d_forward(_X4.to(d), _T433.to(d), torch.ones(5, 1).to(d), 1, -100),
    "backward: int32 target": lambda d: _A.nll_loss_backward(
        torch.tensor(1.0).to(d), _X2.to(d), _T3.int().to(d), None, 1, -100, torch.tensor(3.0).to(d)
    ),
    "backward: int64 input": lambda d: _A.nll_loss_backward(
        torch.tensor(1.0).to(d), _X2.long().to(d), _T3.to(d), None, 1, -100, torch.tensor(3.0).to(d)
    ),
}


@pytest.mark.parametrize("name", list(NLL_ARGUMENT_ERRORS))
def test_nll_loss_argument_checks_as_cpu(name):
    """CPU's checks of nll_loss's arguments, in its order and words (they ran unchecked on jax)."""
    make = NLL_ARGUMENT_ERRORS[name]
    try:
        expected = make("cpu")
    except Exception as cpu_error:
        with pytest.raises(type(cpu_error)) as jax_error:
            make("jax")
        assert str(jax_error.value) == str(cpu_error)
        return
    torch.testing.assert_close(
        make("jax")[0].cpu() if isinstance(expected, tuple) else make("jax").cpu(),
        expected[0] if isinstance(expected, tuple) else expected,
    )


@pytest.mark.parametrize("shape", [(3, 5), (2, 5, 3, 3)])
def test_nll_loss_every_target_ignored_gives_zero_gradient(shape):
    """mean over no kept target: the loss is nan (0/0) and the gradient zeros, as CPU skips ignored
    targets (the jax gradient was 0 * inf = nan)."""
    x = torch.randn(shape)
    t = torch.full((shape[0], *shape[2:]), -100)
    grads = []
    for d in ("cpu", "jax"):
        xx = x.detach().to(d).requires_grad_()
        F.nll_loss(xx, t.to(d)).backward()
        grads.append(xx.grad.cpu())
    torch.testing.assert_close(grads[1], grads[0])
    assert not grads[1].isnan().any()
