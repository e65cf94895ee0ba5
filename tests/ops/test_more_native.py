"""More kernels written on the device: multi-class margin losses, rrelu, batch norm's update/no-update
pair, histograms, segment_reduce, unfold_backward and friends, each against CPU PyTorch with
JAXDEV_FALLBACK=error so a kernel that quietly fell back to CPU fails. Random ops (rrelu) cannot
match CPU's random stream: their tests check the rule every draw must satisfy instead."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from jaxdev_testing import JAX, assert_same, check, on_both

torch.manual_seed(0)


pytestmark = pytest.mark.usefixtures("no_fallback")  # tests/conftest.py


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


# --- histogram / histogramdd -------------------------------------------------------------------------------

_X50 = torch.randn(50)
_W50 = torch.rand(50)
_X30 = torch.randn(30, 3)
_W30 = torch.rand(30)

HISTOGRAMS = {
    "counts": lambda d, dt: torch.histogram(_X50.to(d, dt), 7),
    "density": lambda d, dt: torch.histogram(_X50.to(d, dt), 7, density=True),
    "range_weight": lambda d, dt: torch.histogram(_X50.to(d, dt), 5, range=(-1.0, 1.0), weight=_W50.to(d, dt)),
    "edges_tensor": lambda d, dt: torch.histogram(
        _X50.to(d, dt), torch.tensor([-1.0, 0.0, 0.5, 2.0], dtype=dt, device=d), density=True
    ),
    "degenerate_range": lambda d, dt: torch.histogram(torch.tensor([1.0, 1.0], dtype=dt, device=d), 2),
    "empty": lambda d, dt: torch.histogram(torch.tensor([], dtype=dt, device=d), 2),
    "last_edge_inclusive": lambda d, dt: torch.histogram(
        torch.tensor([0.0, 1.0, 2.0, 3.0, 3.0], dtype=dt, device=d), 3
    ),
    "outside_and_nan_dropped": lambda d, dt: torch.histogram(
        torch.tensor([-5.0, 0.0, float("nan"), 0.5, 9.0], dtype=dt, device=d), 2, range=(0.0, 1.0)
    ),
    "dd_counts": lambda d, dt: torch.histogramdd(_X30.to(d, dt), [2, 3, 4]),
    "dd_density_weight": lambda d, dt: torch.histogramdd(
        _X30.to(d, dt), [2, 3, 4], density=True, weight=_W30.to(d, dt)
    ),
    "dd_tensors": lambda d, dt: torch.histogramdd(
        _X30.to(d, dt),
        [torch.tensor(e, dtype=dt, device=d) for e in ([-1.0, 0, 1], [0.0, 1], [-2.0, 2.0])],
    ),
    "dd_range": lambda d, dt: torch.histogramdd(_X30.to(d, dt), 3, range=[-1.0, 1.0, 0.0, 1.0, -2.0, 2.0]),
}


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("name", list(HISTOGRAMS))
def test_histogram_like_cpu(name, dtype):
    on_both(lambda d: tuple(HISTOGRAMS[name](d, dtype)), rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize(
    "fn,match",
    [
        (lambda d: torch.histogram(torch.tensor([1.0, float("nan")], device=d), 3), "is not finite"),
        (lambda d: torch.histogram(torch.tensor([1.0, float("inf")], device=d), 3), "range [1, inf] is not finite"),
        (lambda d: torch.histogram(torch.randn(5, device=d), 3, range=(2.0, 1.0)), "min should not exceed max"),
        (lambda d: torch.histogram(torch.randn(5, device=d), 0), "bins must be > 0"),
        (lambda d: torch.histogram(torch.randn(5, device=d).half(), 3), "Half"),
        (lambda d: torch.histogram(torch.randn(5, device=d), torch.ones(2, 2, device=d)), "one dimension"),
        (lambda d: torch.histogram(torch.randn(5, device=d), torch.ones(2, device=d).double()), "same dtype"),
        (lambda d: torch.histogram(torch.randn(5, device=d), 3, weight=torch.ones(4, device=d)), "weight"),
        (lambda d: torch.ops.aten._histogramdd_from_bin_cts(torch.randn(5, 2, device=d), [2, 0]), "for dimension 1"),
        (lambda d: torch.ops.aten._histogramdd_bin_edges(torch.randn(5, device=d), [2]), "at least 2 dimensions"),
        (lambda d: torch.histogramdd(torch.randn(5, 2, device=d), [2, 3], range=[0.0, 1.0]), "should have 4"),
    ],
)
def test_histogram_errors_like_cpu(fn, match):
    on_both(fn, match=match)


# --- segment_reduce -------------------------------------------------------------------------------------

_SEG_DATA = torch.tensor(
    [[1.0, 2.0], [3.0, 3.0], [float("nan"), 0.0], [-1.0, 5.0], [5.0, 5.0], [2.0, -3.0], [0.0, 0.0], [4.0, 4.0]],
    dtype=torch.float64,
)
_SEG_LENGTHS = torch.tensor([2, 0, 3, 3])  # an empty segment, NaN, ties and zeros (prod's exclusive product)


@pytest.mark.parametrize("use_offsets", [False, True])
@pytest.mark.parametrize("initial", [None, 2.5])
@pytest.mark.parametrize("reduce", ["max", "min", "sum", "mean", "prod", "amax"])
def test_segment_reduce_and_backward_like_cpu(reduce, initial, use_offsets):
    lengths = _SEG_LENGTHS
    offsets = torch.cat([torch.zeros(1, dtype=torch.long), lengths.cumsum(0)])

    def run(x):
        bounds = {"offsets": offsets.to(x.device)} if use_offsets else {"lengths": lengths.to(x.device)}
        return torch.segment_reduce(x, reduce, initial=initial, unsafe=False, **bounds).nan_to_num(nan=7.0)

    check(run, _SEG_DATA)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("reduce", ["max", "min", "sum", "mean", "prod"])
def test_segment_reduce_inner_axis_like_cpu(reduce, dtype):
    data = torch.randn(3, 6, 2).to(dtype)
    lengths = torch.tensor([[1, 5], [3, 3], [0, 6]])
    tol = 1e-5 if dtype == torch.float32 else 2e-2
    check(lambda x: torch.segment_reduce(x, reduce, lengths=lengths.to(x.device), axis=1), data, rtol=tol, atol=tol)


@pytest.mark.parametrize(
    "fn,match",
    [
        (
            lambda d: torch.segment_reduce(torch.randn(6, device=d), "max", lengths=torch.tensor([2, 3], device=d)),
            "sum to",
        ),
        (
            lambda d: torch.segment_reduce(torch.randn(6, device=d), "max", lengths=torch.tensor([2, -1, 5], device=d)),
            "negative",
        ),
        (
            lambda d: torch.segment_reduce(torch.randn(6, device=d), "foo", lengths=torch.tensor([2, 4], device=d)),
            "got foo",
        ),
        (lambda d: torch.segment_reduce(torch.randn(6, device=d), "sum"), "Either lengths or offsets"),
        (
            lambda d: torch.segment_reduce(
                torch.randn(6, 2, device=d), "sum", lengths=torch.tensor([2, 4], device=d), axis=1
            ),
            "last dimension",
        ),
        (
            lambda d: torch.segment_reduce(torch.arange(6, device=d), "sum", lengths=torch.tensor([2, 4], device=d)),
            "Long",
        ),
    ],
)
def test_segment_reduce_errors_like_cpu(fn, match):
    on_both(fn, match=match)


# --- unfold_backward (istft's gradient) --------------------------------------------------------------------


@pytest.mark.parametrize(
    "shape,sizes,dim,size,step",
    [
        ((3, 2), [6], 0, 2, 2),  # windows tile the dimension
        ((2, 1), [5], 0, 1, 3),  # gaps no window covers
        ((1,), [], 0, 1, 1),  # a 0-dim input
        ((4, 3, 2), [4, 7], 1, 2, 2),
        ((2, 5, 3), [2, 7], -1, 3, 1),  # overlapping windows add
    ],
)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.complex64, torch.int64, torch.bool])
def test_unfold_backward_like_cpu(shape, sizes, dim, size, step, dtype):
    g = (torch.randn(shape) * 3).to(dtype)
    on_both(lambda d: torch.ops.aten.unfold_backward(g.to(d), sizes, dim, size, step), rtol=1e-6, atol=1e-6)


def test_tensor_unfold_gradient_and_istft_like_cpu():
    check(lambda t: t.unfold(1, 3, 2), torch.randn(2, 9, 3))
    spec = torch.stft(torch.randn(40), 8, 2, window=torch.hann_window(8), return_complex=True)
    check(lambda s: torch.istft(s, 8, 2, window=torch.hann_window(8, device=s.device)).abs(), spec, rtol=1e-5)


# --- fractional max pooling (explicit _random_samples: the windows are then CPU's exactly) --------------------


def _pool_run(device, fn, x, s):
    xd = x.detach().to(device).requires_grad_()
    out, idx = fn(xd, s.to(device))
    out.backward(torch.linspace(-1, 1, out.numel(), dtype=out.dtype).reshape(out.shape).to(device))
    return out.detach(), idx, xd.grad


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16])
@pytest.mark.parametrize(
    "nd,shape,kernel,outs",
    [
        (2, (2, 3, 9, 11), [2, 3], [4, 5]),
        (2, (2, 3, 9, 11), [3, 2], [7, 10]),  # overlapping windows: gradients add
        (2, (2, 3, 9, 11), [1, 1], [9, 11]),
        (2, (2, 3, 9, 11), [2, 2], [1, 1]),
        (2, (3, 9, 11), [2, 2], [4, 4]),  # unbatched
        (3, (2, 2, 5, 6, 7), [2, 2, 3], [3, 4, 4]),
        (3, (2, 5, 6, 7), [2, 2, 3], [3, 4, 4]),
    ],
)
def test_fractional_max_pool_like_cpu(nd, shape, kernel, outs, dtype):
    x = torch.randn(shape).to(dtype)
    flat = x.view(-1)
    flat[:3] = float("nan")  # NaN wins (the last one scanned)
    flat[20:24] = 5.0  # ties keep the first
    flat[40:44] = -float("inf")
    channels = shape[-nd - 1]
    s = torch.rand(2, channels, nd).to(dtype)
    fn = getattr(torch.ops.aten, f"fractional_max_pool{nd}d")
    cpu = _pool_run("cpu", lambda a, b: fn(a, kernel, outs, b), x, s)
    jax = _pool_run(JAX, lambda a, b: fn(a, kernel, outs, b), x, s)
    for i, (j, c) in enumerate(zip(jax, cpu)):
        assert_same(j, c, msg=f"result {i}")


def test_fractional_max_pool_functional_draws_on_the_device():
    x = torch.randn(2, 3, 9, 9, device=JAX, requires_grad=True)
    torch.manual_seed(5)
    a, ia = F.fractional_max_pool2d(x, 2, output_size=4, return_indices=True)
    torch.manual_seed(5)
    b = F.fractional_max_pool2d(x, 2, output_size=4)
    assert torch.equal(a.cpu(), b.cpu()) and a.shape == (2, 3, 4, 4)
    taken = torch.gather(x.detach().cpu().flatten(2), 2, ia.cpu().flatten(2)).reshape(a.shape)
    assert torch.equal(taken, a.detach().cpu())  # each output is the input at its index
    a.sum().backward()
    assert x.grad.sum().item() == a.numel()


@pytest.mark.parametrize(
    "fn,match",
    [
        (
            lambda d: torch.ops.aten.fractional_max_pool2d(
                torch.randn(2, 3, 7, 8, device=d), [2, 2], [7, 4], torch.rand(2, 3, 2, device=d)
            ),
            "pool height 2",
        ),
        (
            lambda d: torch.ops.aten.fractional_max_pool2d(
                torch.randn(7, 8, device=d), [2, 2], [4, 4], torch.rand(2, 3, 2, device=d)
            ),
            "3D or 4D",
        ),
        (
            lambda d: torch.ops.aten.fractional_max_pool2d(
                torch.randn(2, 3, 0, 8, device=d), [2, 2], [4, 4], torch.rand(2, 3, 2, device=d)
            ),
            "non-zero size",
        ),
        (
            lambda d: torch.ops.aten.fractional_max_pool2d(
                torch.randn(2, 3, 7, 8, device=d), [2, 2], [4, 4], torch.rand(1, 3, 2, device=d)
            ),
            "no less then",
        ),
        (
            lambda d: torch.ops.aten.fractional_max_pool2d(
                torch.randn(2, 3, 7, 8, device=d), [2, 2], [4, 4], torch.rand(2, 3, 3, device=d)
            ),
            "equals to 2; got 3",
        ),
        (
            lambda d: torch.ops.aten.fractional_max_pool2d(
                torch.randn(2, 3, 7, 8, device=d), [2, 2], [4, 4], torch.rand(2, 3, 2, device=d).double()
            ),
            "same dtype",
        ),
        (
            lambda d: torch.ops.aten.fractional_max_pool3d(
                torch.randn(2, 3, 5, 7, 8, device=d), [2, 2, 2], [3, 4, 8], torch.rand(2, 3, 3, device=d)
            ),
            "pool width 2",
        ),
    ],
)
def test_fractional_max_pool_errors_like_cpu(fn, match):
    on_both(fn, match=match)


# --- CTC loss -------------------------------------------------------------------------------------------------

_CTC_LP = torch.randn(8, 3, 5, dtype=torch.float64)
_CTC_PADDED = torch.tensor([[1, 2, 2, 1], [3, 1, 0, 0], [4, 4, 4, 0]])
_CTC_CASES = {
    "padded": (_CTC_PADDED, [8, 6, 8], [4, 2, 3]),
    "empty_input_and_target": (_CTC_PADDED, [8, 0, 3], [4, 0, 3]),  # an impossible alignment: inf loss, NaN grad
    "empty_targets": (_CTC_PADDED, [8, 6, 8], [0, 0, 1]),
    "concatenated": (torch.tensor([1, 2, 2, 1, 3, 1, 4, 4, 4]), [8, 6, 8], [4, 2, 3]),
    "int32_tensor_lengths": (_CTC_PADDED.int(), torch.tensor([8, 6, 8]), torch.tensor([4, 2, 3])),
}


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize(
    "kwargs",
    [
        dict(reduction="none"),
        dict(reduction="mean"),
        dict(reduction="sum", zero_infinity=True),
        dict(reduction="none", blank=4),  # a target holding the blank label
    ],
    ids=["none", "mean", "sum_zero_inf", "blank4"],
)
@pytest.mark.parametrize("case", list(_CTC_CASES))
def test_ctc_loss_and_gradient_like_cpu(case, kwargs, dtype):
    targets, il, tl = _CTC_CASES[case]
    results = []
    for device in ("cpu", JAX):
        x = _CTC_LP.detach().to(dtype).to(device).clone().requires_grad_()
        lengths = [v.to(device) if isinstance(v, torch.Tensor) else v for v in (il, tl)]
        out = F.ctc_loss(x.log_softmax(2), targets.to(device), *lengths, **kwargs)
        out.sum().backward()
        results.append((out.detach(), x.grad))
    (cpu_out, cpu_grad), (jax_out, jax_grad) = results
    tol = 1e-5 if dtype == torch.float32 else 1e-10
    assert_same(jax_out, cpu_out, rtol=tol, atol=tol)
    assert_same(jax_grad, cpu_grad, rtol=tol, atol=tol)


def test_ctc_loss_forward_outputs_like_cpu():
    lp = _CTC_LP.log_softmax(2)
    nll, alpha = torch.ops.aten._ctc_loss(lp, _CTC_PADDED, [8, 6, 8], [4, 2, 3])
    jnll, jalpha = torch.ops.aten._ctc_loss(lp.to(JAX), _CTC_PADDED.to(JAX), [8, 6, 8], [4, 2, 3])
    assert_same(jnll, nll, rtol=1e-12, atol=1e-12)
    assert jalpha.shape == alpha.shape
    # CPU leaves alpha unwritten past each input's length and target's states; compare the written part
    for b, (il, tl) in enumerate(zip([8, 6, 8], [4, 2, 3])):
        torch.testing.assert_close(jalpha.cpu()[b, :il, : 2 * tl + 1], alpha[b, :il, : 2 * tl + 1])


@pytest.mark.parametrize(
    "args,match",
    [
        ((_CTC_PADDED, [8, 6, 8], [4, 2, 3], 5), "blank must be in label range"),
        ((_CTC_PADDED, [8, 6], [4, 2, 3]), "input_lengths must be of size batch_size"),
        ((_CTC_PADDED, [8, 6, 8], [4, 2]), "target_lengths must be of size batch_size"),
        ((_CTC_PADDED, [8, 6, 8], [5, 2, 3]), "size at least 5 at dimension 1"),
        ((_CTC_PADDED, [9, 6, 8], [4, 2, 3]), "at most 8, but got value 9"),
        ((_CTC_PADDED, [-1, 6, 8], [4, 2, 3]), "input_lengths to have value at least 0"),
        ((_CTC_PADDED, [8, 6, 8], [-1, 2, 3]), "target_lengths to have value at least 0"),
        ((_CTC_PADDED.flatten(), [8, 6, 8], [4, 2, 3]), "size 9 at dimension 0"),
        ((_CTC_PADDED.float(), [8, 6, 8], [4, 2, 3]), "scalar type Int"),
        ((_CTC_PADDED[:1], [8, 6, 8], [4, 2, 3]), "size 3 at dimension 0"),
    ],
)
def test_ctc_loss_errors_like_cpu(args, match):
    def call(d):
        targets, *rest = args
        return torch.ops.aten._ctc_loss(_CTC_LP.log_softmax(2).to(d), targets.to(d), *rest)

    on_both(call, match=match)
    on_both(
        lambda d: torch.ops.aten._ctc_loss(_CTC_LP.half().to(d), _CTC_PADDED.to(d), [8, 6, 8], [4, 2, 3]), match="Half"
    )


# --- antialiased bilinear upsampling --------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize(
    "kwargs",
    [
        dict(output_size=[3, 3], align_corners=False),
        dict(output_size=[5, 5], align_corners=False),
        dict(output_size=[17, 18], align_corners=False, scales_h=1.7, scales_w=0.9),
        dict(output_size=[8, 20], align_corners=True, scales_h=0.8, scales_w=1.0),  # W unchanged: no W pass
        dict(output_size=[3, 3], align_corners=True, scales_h=1.7, scales_w=0.9),
        dict(output_size=[23, 41], align_corners=False),  # upsampling: support 1
        dict(output_size=[1, 1], align_corners=True),
    ],
)
def test_upsample_bilinear2d_aa_like_cpu(kwargs, dtype):
    x = torch.randn(2, 3, 10, 20, dtype=dtype) * 5
    tol = 2e-6 if dtype == torch.float32 else 1e-13
    check(lambda t: torch.ops.aten._upsample_bilinear2d_aa(t, **kwargs), x, rtol=tol, atol=tol)
    check(lambda t: F.interpolate(t, size=(4, 7), mode="bilinear", antialias=True), x, rtol=tol, atol=tol)


def test_upsample_bilinear2d_aa_edge_values_and_errors_like_cpu():
    x = torch.tensor([[[[0.0, -0.0, float("inf"), 1.0], [float("nan"), 2.0, 3.0, -float("inf")]]]])
    on_both(lambda d: torch.ops.aten._upsample_bilinear2d_aa(x.to(d), [1, 2], False))
    on_both(
        lambda d: torch.ops.aten._upsample_bilinear2d_aa(torch.randn(2, 3, 4, device=d), [3, 3], False),
        match="input_size",
    )
    on_both(
        lambda d: torch.ops.aten._upsample_bilinear2d_aa(torch.randn(1, 1, 4, 4, device=d), [0, 3], False),
        match="greater than 0",
    )
    on_both(
        lambda d: torch.ops.aten._upsample_bilinear2d_aa(torch.randn(1, 1, 4, 4, device=d).half(), [2, 3], False),
        match="Half",
    )


# --- compiled programs (where CPU's own torch.compile cannot run the OpInfo, the coverage skips them) -------


def test_compiled_fractional_pool_and_rrelu_run_on_the_device():
    x = torch.randn(2, 3, 9, 11, device=JAX)
    s = torch.rand(2, 3, 2, device=JAX)
    pool = torch.compile(
        lambda x, s: torch.ops.aten.fractional_max_pool2d(x, [2, 3], [4, 5], s), backend="jax", fullgraph=True
    )
    got, expected = pool(x, s), torch.ops.aten.fractional_max_pool2d(x.cpu(), [2, 3], [4, 5], s.cpu())
    assert_same(got[0], expected[0])
    assert_same(got[1], expected[1])
    rrelu = torch.compile(lambda x: F.rrelu(x, 0.1, 0.3, training=True), backend="jax", fullgraph=True)
    v = torch.randn(64)
    y = rrelu(v.to(JAX)).cpu()
    slope = y[v < 0] / v[v < 0]
    assert bool(((slope >= 0.1) & (slope <= 0.3)).all()) and torch.equal(y[v >= 0], v[v >= 0])


@pytest.mark.parametrize("channels", [1, 2, 3, 4])
@pytest.mark.parametrize(
    "kwargs",
    [
        dict(output_size=[3, 3], align_corners=False),
        dict(output_size=[17, 18], align_corners=False, scales_h=1.7, scales_w=0.9),
        dict(output_size=[8, 20], align_corners=True, scales_h=0.8, scales_w=1.0),
        dict(output_size=[23, 41], align_corners=False),
        dict(output_size=[10, 7], align_corners=True),
    ],
)
def test_upsample_bilinear2d_aa_uint8_fixed_point_like_cpu(kwargs, channels):
    x = torch.randint(0, 256, (2, channels, 10, 20), dtype=torch.uint8)
    on_both(lambda d: torch.ops.aten._upsample_bilinear2d_aa(x.to(d), **kwargs))


_PLAIN_UINT8 = [
    dict(size=(3, 3)),
    dict(size=(17, 18)),
    dict(size=(23, 41), align_corners=True),
    dict(size=(1, 7)),
    dict(size=(4, 1), align_corners=True),
    dict(scale_factor=1.7),
    dict(scale_factor=(0.45, 2.3), recompute_scale_factor=False),
    dict(scale_factor=0.3, align_corners=True),
]


@pytest.mark.parametrize("mode", ["bilinear", "bicubic"])
@pytest.mark.parametrize("channels", [1, 3, 4])
@pytest.mark.parametrize("kwargs", _PLAIN_UINT8)
def test_interpolate_uint8_fixed_point_like_cpu(mode, channels, kwargs):
    """Without antialiasing, uint8 bilinear/bicubic is CPU's integer resample too (fixed taps, their
    out-of-range weights folded onto the edge, cubic A = -0.75): bit-equal, with no fallback."""
    x = torch.randint(0, 256, (2, channels, 10, 13), dtype=torch.uint8, generator=torch.Generator().manual_seed(1))
    on_both(lambda d: F.interpolate(x.to(d), mode=mode, **kwargs))


@pytest.mark.parametrize("mode", ["bilinear", "bicubic"])
@pytest.mark.parametrize("size", [(6, 9), (3, 1), (12, 1)])
def test_interpolate_uint8_many_channels_as_cpu_per_four(mode, size):
    """Past four channels CPU leaves its AVX2 kernel for a generic loop of the same integer sums, which
    is wrong when the output is one pixel wide and the height changes (103-215 off the float result,
    torch 2.13). jax gives every channel count what CPU gives four or fewer channels at a time."""
    x = torch.randint(0, 256, (2, 9, 7, 5), dtype=torch.uint8, generator=torch.Generator().manual_seed(2))
    got = F.interpolate(x.to(JAX), size=size, mode=mode)
    per_four = torch.cat([F.interpolate(part, size=size, mode=mode) for part in x.split(4, dim=1)], dim=1)
    assert_same(got, per_four)
    if size[1] > 1:  # where CPU's generic loop is right, it agrees
        assert_same(got, F.interpolate(x, size=size, mode=mode))


_SIZE_CASES = [
    ((2, 0, 4, 4), dict(size=(3, 3), mode="bilinear")),
    ((0, 0, 4, 4), dict(size=(3, 3), mode="bicubic")),
    ((0, 2, 4, 4), dict(size=(3, 3), mode="bilinear")),  # an empty batch is allowed
    ((2, 0, 4, 4), dict(size=(3, 3), mode="bilinear", antialias=True)),
    ((2, 0, 4), dict(size=3, mode="linear")),
    ((2, 3, 0, 4), dict(size=(3, 3), mode="nearest")),
    ((2, 2, 4, 4), dict(scale_factor=0.1, mode="bilinear")),
    ((2, 2, 4, 4), dict(scale_factor=0.1, mode="bicubic")),
    ((2, 2, 4), dict(scale_factor=0.1, mode="linear")),
    ((2, 2, 4, 4, 4), dict(scale_factor=0.1, mode="trilinear")),
    ((2, 2, 4, 4, 4), dict(scale_factor=0.1, mode="nearest-exact")),
]


@pytest.mark.parametrize(
    "shape,kwargs,dtype",
    [
        (shape, kwargs, dtype)
        for shape, kwargs in _SIZE_CASES
        for dtype in (torch.float32, torch.uint8)
        # CPU has no uint8 linear/trilinear kernel (test_fidelity checks that error)
        if not (dtype == torch.uint8 and kwargs["mode"] in ("linear", "trilinear"))
    ],
)
def test_interpolate_size_checks_as_cpu(shape, kwargs, dtype):
    """CPU's upsample checks and words: sizes above 0 ("(H: 4, W: 4) output (H: 0, W: 0)"), and no
    empty dimension but the batch."""
    x = torch.zeros(shape, dtype=dtype)
    on_both(lambda d: F.interpolate(x.to(d), **kwargs))
