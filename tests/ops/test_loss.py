"""jaxdev/ops/loss/: regression, binary and margin losses (CTC: test_ctc.py), forward and gradients, against CPU PyTorch."""

import pytest
import torch
import torch.nn.functional as F
from jaxdev_testing import JAX, check, like_cpu, on_both, same_outcome

import jaxdev

# --- Regression and binary losses: forward and gradients equal CPU's, for every reduction.


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


@pytest.mark.per_op_mode("a value-dependent check raises at the op; fused mode defers it to the sync")
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


def test_value_checks_deferred_by_fused_mode_raise_cpus_error_at_the_sync():
    """The fused-mode side of the per-op tests above: the same value checks raise CPU's exception, at
    the next read instead of at the op."""
    x, t = torch.randn(4, 5).log_softmax(1), torch.tensor([3, -5, 7, 1])
    with pytest.raises(IndexError) as cpu_error:
        F.nll_loss(x, t)
    with jaxdev.eager_mode("fused"):
        loss = F.nll_loss(x.to("jax"), t.to("jax"))
        with pytest.raises(IndexError) as jax_error:
            loss.item()
        assert str(jax_error.value) == str(cpu_error.value)
        out = F.binary_cross_entropy(torch.tensor([0.5, 1.5], device="jax"), torch.ones(2, device="jax"))
        with pytest.raises(RuntimeError, match="between 0 and 1"):
            out.item()


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
@pytest.mark.per_op_mode("a value-dependent check raises at the op; fused mode defers it to the sync")
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


# the one value-dependent check among them (a target of 255 is out of range): fused mode defers it
_VALUE_CHECKED = {"uint8 255 beside ignore_index -1"}


@pytest.mark.parametrize(
    "name",
    [
        pytest.param(n, marks=pytest.mark.per_op_mode("a value-dependent check; fused mode defers it to the sync"))
        if n in _VALUE_CHECKED
        else n
        for n in NLL_ARGUMENT_ERRORS
    ],
)
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


aten = torch.ops.aten


# --- binary_cross_entropy: one dtype for every operand, as CPU's TensorIterator wants ------------------------------


@pytest.mark.usefixtures("no_fallback")
def test_bce_dtypes_like_cpu():
    g = torch.Generator().manual_seed(4)
    s, t, w = torch.rand(2, 3, generator=g), torch.rand(2, 3, generator=g), torch.rand(3, generator=g)
    ones = torch.ones(2, 3)
    for out_dtype in (torch.float32, torch.float64, torch.float16, torch.int64):
        like_cpu(
            lambda d, o=out_dtype: aten.binary_cross_entropy.out(
                s.to(d), t.to(d), reduction=0, out=torch.empty(2, 3, dtype=o, device=d)
            ),
            rtol=1e-6,
            atol=1e-6,
        )
        like_cpu(
            lambda d, o=out_dtype: aten.binary_cross_entropy_backward.grad_input(
                ones.to(d), s.to(d), t.to(d), grad_input=torch.empty(2, 3, dtype=o, device=d)
            ),
            rtol=1e-6,
            atol=1e-6,
        )
    like_cpu(lambda d: aten.binary_cross_entropy(s.to(d), t.double().to(d)))
    like_cpu(lambda d: aten.binary_cross_entropy_backward(ones.to(d), s.to(d), t.double().to(d)))
    like_cpu(lambda d: aten.binary_cross_entropy_backward(ones.double().to(d), s.to(d), t.to(d)))
    # weight is applied afterwards (mul_), outside that check
    like_cpu(lambda d: aten.binary_cross_entropy(s.to(d), t.to(d), w.double().to(d)), rtol=1e-6, atol=1e-6)
    like_cpu(lambda d: aten.binary_cross_entropy(s.half().to(d), t.half().to(d), w.to(d)), rtol=1e-3, atol=1e-3)
    like_cpu(lambda d: torch.nn.functional.binary_cross_entropy(s.to(d), t.to(d), w.to(d)), rtol=1e-6, atol=1e-6)


@pytest.mark.usefixtures("no_fallback")
def test_bce_out_of_the_result_shape_like_cpu():
    s, t = torch.tensor(0.3), torch.tensor(0.6)
    for red in (0, 1, 2):
        like_cpu(
            lambda d, r=red: aten.binary_cross_entropy.out(s.to(d), t.to(d), reduction=r, out=torch.empty((), device=d))
        )
    like_cpu(
        lambda d: aten.binary_cross_entropy_backward.grad_input(
            torch.tensor(1.0, device=d), s.to(d), t.to(d), grad_input=torch.empty((), device=d)
        )
    )


# --- multi-class margin losses --------------------------------------------------------------------

_MM_CASES = [
    ((5, 4), [0, 3, 1, 2, 2]),
    ((4,), [2]),
    ((4,), 2),
    ((), 0),
]


@pytest.mark.usefixtures("no_fallback")
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


@pytest.mark.usefixtures("no_fallback")
def test_multi_margin_loss_edge_values_like_cpu():
    x = torch.tensor([[0.0, -0.0, float("inf"), 1.0], [float("nan"), 1.0, -float("inf"), 2.0]])
    for red in ("none", "sum"):
        on_both(lambda d, red=red: F.multi_margin_loss(x.to(d), torch.tensor([0, 1], device=d), reduction=red))


@pytest.mark.usefixtures("no_fallback")
@pytest.mark.per_op_mode("a value-dependent check raises at the op; fused mode defers it to the sync")
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


@pytest.mark.usefixtures("no_fallback")
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
@pytest.mark.parametrize("case", range(len(_ML_CASES)))
def test_multilabel_margin_loss_like_cpu(case, reduction, dtype):
    shape, target = _ML_CASES[case]
    x = torch.randn(shape, dtype=dtype)
    t = torch.tensor(target).reshape(shape if len(shape) else ())
    check(lambda x, t: F.multilabel_margin_loss(x, t, reduction=reduction), x, t)
    on_both(lambda d: torch.ops.aten.multilabel_margin_loss_forward(x.to(d), t.to(d), 0), rtol=1e-6)


def t(device, values, dtype=None):
    return torch.tensor(values, device=device, dtype=dtype)


def ones(device, *shape, dtype=None):
    return torch.ones(*shape, device=device, dtype=dtype)


F32, F64, F16, BF16, I64 = torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int64


LOSS_CASES = {
    "binary_cross_entropy target 2": lambda d: F.binary_cross_entropy(t(d, [0.5]), t(d, [2.0])),
    "binary_cross_entropy target -1": lambda d: F.binary_cross_entropy(t(d, [0.5]), t(d, [-1.0])),
    "binary_cross_entropy target nan": lambda d: F.binary_cross_entropy(t(d, [0.5]), t(d, [float("nan")])),
    "binary_cross_entropy input nan": lambda d: F.binary_cross_entropy(t(d, [float("nan")]), t(d, [0.5])),
    "binary_cross_entropy target first": lambda d: F.binary_cross_entropy(t(d, [0.5, 2.0]), t(d, [2.0, 0.5])),
    "binary_cross_entropy input first": lambda d: F.binary_cross_entropy(t(d, [2.0, 0.5]), t(d, [0.5, 2.0])),
    "binary_cross_entropy in range": lambda d: F.binary_cross_entropy(t(d, [0.25, 0.5]), t(d, [1.0, 0.0])),
    "mse_loss int64": lambda d: F.mse_loss(ones(d, 2, dtype=I64), ones(d, 2, dtype=I64)),
    "mse_loss int64, none": lambda d: F.mse_loss(ones(d, 2, dtype=I64), ones(d, 2, dtype=I64), reduction="none"),
    "mse_loss bool": lambda d: F.mse_loss(ones(d, 2, dtype=torch.bool), ones(d, 2, dtype=torch.bool)),
    "mse_loss complex": lambda d: F.mse_loss(ones(d, 2, dtype=torch.complex64), ones(d, 2, dtype=torch.complex64)),
    "mse_loss int64 and float": lambda d: F.mse_loss(ones(d, 2, dtype=I64), t(d, [0.5, 2.0])),
    "smooth_l1_loss int64": lambda d: F.smooth_l1_loss(ones(d, 2, dtype=I64), ones(d, 2, dtype=I64)),
    "huber_loss int8": lambda d: F.huber_loss(ones(d, 2, dtype=torch.int8), ones(d, 2, dtype=torch.int8)),
}


@pytest.mark.per_op_mode("a value-dependent check raises at the op; fused mode defers it to the sync")
@pytest.mark.parametrize("case", list(LOSS_CASES))
def test_losses_check_as_on_cpu(case):
    same_outcome(LOSS_CASES[case])
