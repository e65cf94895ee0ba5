"""More kernels written on the device: multi-class margin losses, rrelu, batch norm's update/no-update
pair, histograms, segment_reduce, unfold_backward and friends, each against CPU PyTorch with
JAXDEV_FALLBACK=error so a kernel that quietly fell back to CPU fails. Random ops (rrelu) cannot
match CPU's random stream: their tests check the rule every draw must satisfy instead."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from jaxdev_testing import JAX, assert_same, check, on_both

import jaxdev

torch.manual_seed(0)


@pytest.fixture(autouse=True)
def no_fallback(monkeypatch):
    monkeypatch.setenv("JAXDEV_FALLBACK", "error")
    jaxdev.reset_fallback_counts()
    yield
    assert jaxdev.fallback_counts() == {}


# --- multi-class margin losses --------------------------------------------------------------------

_MM_CASES = [
    ((5, 4), [0, 3, 1, 2, 2]),
    ((4,), [2]),
    ((4,), 2),
    ((), 0),
]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
@pytest.mark.parametrize("p", [1, 2])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("case", range(len(_MM_CASES)))
def test_multi_margin_loss_like_cpu(case, weighted, p, reduction, dtype):
    shape, target = _MM_CASES[case]
    x = torch.randn(shape, dtype=dtype)
    x.view(-1)[0] = 0.25  # hinge terms exactly at and around the margin
    t = torch.tensor(target)
    w = torch.rand(shape[-1] if shape else 1, dtype=dtype) if weighted else None
    wj = {"cpu": w, "jax": None if w is None else w.to(JAX)}
    check(
        lambda x, t: F.multi_margin_loss(x, t, p=p, margin=0.75, weight=wj[x.device.type], reduction=reduction),
        x,
        t,
        rtol=1e-6 if dtype == torch.float32 else 1e-12,
    )


def test_multi_margin_loss_edge_values_like_cpu():
    x = torch.tensor([[0.0, -0.0, float("inf"), 1.0], [float("nan"), 1.0, -float("inf"), 2.0]])
    for red in ("none", "sum"):
        on_both(lambda d, red=red: F.multi_margin_loss(x.to(d), torch.tensor([0, 1], device=d), reduction=red))


@pytest.mark.parametrize(
    "fn,match",
    [
        (lambda d: F.multi_margin_loss(torch.randn(3, 4, device=d), torch.tensor([0, 1, 4], device=d)), "out of range"),
        (lambda d: F.multi_margin_loss(torch.randn(3, 4, device=d), torch.tensor([0, 1], device=d)), "target tensor"),
        (lambda d: F.multi_margin_loss(torch.randn(3, 0, device=d), torch.tensor([0, 1, 2], device=d)), "non-empty"),
        (
            lambda d: torch.ops.aten.multi_margin_loss(
                torch.randn(3, 4, device=d), torch.tensor([0, 1, 2], device=d), 3
            ),
            "p == 1",
        ),
        (
            lambda d: F.multi_margin_loss(
                torch.randn(3, 4, device=d), torch.tensor([0, 1, 2], device=d), weight=torch.ones(3, device=d)
            ),
            "inconsistent weight size",
        ),
        (lambda d: F.multi_margin_loss(torch.randn(3, 4, device=d).half(), torch.tensor([0, 1, 2], device=d)), "Half"),
        (
            lambda d: F.multilabel_margin_loss(
                torch.randn(2, 3, device=d), torch.tensor([[0, 3, -1], [0, 1, 2]], device=d)
            ),
            "out of range",
        ),
        (
            lambda d: F.multilabel_margin_loss(
                torch.randn(2, 3, device=d), torch.zeros(2, 2, dtype=torch.long, device=d)
            ),
            "inconsistent target size",
        ),
    ],
)
def test_margin_loss_errors_like_cpu(fn, match):
    on_both(fn, match=match)


_ML_CASES = [
    ((3, 4), [[0, 3, -1, 1], [2, 2, 1, -1], [-1, 0, 1, 2]]),  # stops at -1; a repeated label counts twice
    ((4,), [2, 0, -1, 3]),
    ((), [0]),
    ((2, 3), [[0, 1, 2], [1, -1, -1]]),  # every class a target: no hinge terms
]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
@pytest.mark.parametrize("case", range(len(_ML_CASES)))
def test_multilabel_margin_loss_like_cpu(case, reduction, dtype):
    shape, target = _ML_CASES[case]
    x = torch.randn(shape, dtype=dtype)
    t = torch.tensor(target).reshape(shape if len(shape) else ())
    check(lambda x, t: F.multilabel_margin_loss(x, t, reduction=reduction), x, t)
    on_both(lambda d: torch.ops.aten.multilabel_margin_loss_forward(x.to(d), t.to(d), 0), rtol=1e-6)


# --- rrelu --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_rrelu_training_draws_slopes_in_range_and_backward_uses_them(dtype):
    x = torch.tensor([-1.0, 0.0, -0.0, 2.0, float("nan"), -float("inf"), -3.0, 5.0], dtype=dtype)
    xj = x.to(JAX).requires_grad_()
    noise = torch.empty(8, dtype=dtype, device=JAX)
    y = torch.ops.aten.rrelu_with_noise(xj, noise, 0.1, 0.3, True)
    y.sum().backward()
    n, out, g = noise.cpu(), y.detach().cpu(), xj.grad.cpu()
    neg = x <= 0
    assert bool(((n[neg] >= 0.1) & (n[neg] <= 0.3)).all()) and bool((n[~neg] == 1).all())
    assert len(set(n[neg].tolist())) > 1  # drawn per element
    torch.testing.assert_close(out, (x.float() * n.float()).to(dtype), equal_nan=True)
    assert out[1].item() == 0 and not out[1].signbit() and out[2].signbit()  # signed zeros times r
    torch.testing.assert_close(g, n)


def test_rrelu_is_reproducible_from_the_seed_and_in_place_works():
    x = torch.randn(50)
    torch.manual_seed(3)
    a = F.rrelu(x.to(JAX), training=True).cpu()
    torch.manual_seed(3)
    b = F.rrelu(x.to(JAX), training=True).cpu()
    assert torch.equal(a, b)
    z = x.to(JAX)
    torch.manual_seed(3)
    F.rrelu(z, training=True, inplace=True)
    assert torch.equal(z.cpu(), a)


def test_rrelu_eval_and_errors_like_cpu():
    x = torch.tensor([-1.0, 0.0, -0.0, 2.0, float("nan"), -float("inf")])
    check(lambda t: F.rrelu(t, 0.1, 0.3, training=False), x)
    on_both(lambda d: torch.ops.aten.rrelu_with_noise(x.to(d), torch.zeros(3, device=d), 0.1, 0.3, True), match="noise")
    on_both(lambda d: torch.ops.aten.rrelu_with_noise(x.to(d), torch.zeros(6, device=d).double(), 0.1, 0.3, True))
    on_both(lambda d: torch.ops.aten.rrelu_with_noise(x.to(d), torch.zeros(6, device=d), 0.5, 0.3, True))
    on_both(lambda d: torch.ops.aten.rrelu_with_noise(x.to(d).half(), torch.zeros(6, device=d).half(), 0.1, 0.3, True))
    on_both(lambda d: torch.ops.aten.rrelu_with_noise(x.to(d).half(), torch.zeros(6, device=d), 0.1, 0.3, False))


# --- batch norm's update / no-update pair ------------------------------------------------------------


def _batch_norm_run(device, x, w, b, rm, rv, op):
    leaves = [t.detach().to(device).requires_grad_() if t is not None else None for t in (x, w, b)]
    stats = [rm.to(device).clone(), rv.to(device).clone()]
    out = op(*leaves, *stats)
    y = out[0] if isinstance(out, tuple) else out
    (y * torch.linspace(-1, 2, y.numel(), dtype=y.dtype, device=device).reshape(y.shape)).sum().backward()
    grads = [t.grad for t in leaves if t is not None]
    return [t.detach() for t in (out if isinstance(out, tuple) else (out,))] + stats + grads


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("affine", [True, False])
@pytest.mark.parametrize(
    "op",
    [
        lambda x, w, b, rm, rv: torch.ops.aten._batch_norm_with_update(x, w, b, rm, rv, 0.1, 1e-5),
        lambda x, w, b, rm, rv: torch.ops.aten._batch_norm_no_update(x, w, b, rm, rv, 0.1, 1e-5),
        lambda x, w, b, rm, rv: F.batch_norm(x, rm, rv, w, b, training=True, momentum=0.3),
        lambda x, w, b, rm, rv: F.batch_norm(x, rm, rv, w, b, training=False),
    ],
    ids=["with_update", "no_update", "F_train", "F_eval"],
)
def test_batch_norm_update_pair_like_cpu(op, affine, dtype):
    x = torch.randn(4, 3, 5, dtype=dtype)
    x[0, 0, 0] = -0.0
    w, b = (torch.randn(3, dtype=dtype), torch.randn(3, dtype=dtype)) if affine else (None, None)
    rm, rv = torch.randn(3, dtype=dtype), torch.rand(3, dtype=dtype) + 0.5
    try:
        cpu = _batch_norm_run("cpu", x, w, b, rm, rv, op)
    except RuntimeError as e:  # the raw ops' backward wants a weight on CPU too
        with pytest.raises(RuntimeError, match="Expected a proper Tensor"):
            _batch_norm_run(JAX, x, w, b, rm, rv, op)
        assert "Expected a proper Tensor" in str(e)
        return
    jax = _batch_norm_run(JAX, x, w, b, rm, rv, op)
    tol = 1e-5 if dtype == torch.float32 else 1e-12
    for i, (j, c) in enumerate(zip(jax, cpu)):
        assert_same(j, c, rtol=tol, atol=tol, msg=f"result {i}")
