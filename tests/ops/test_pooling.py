"""jaxdev/ops/pooling/: fractional max pooling, adaptive average pooling, pooling and convolution geometry
checks, against CPU PyTorch."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from jaxdev_testing import JAX, assert_same, on_both, same_outcome, seeded_randn

pytestmark = pytest.mark.usefixtures("no_fallback")  # tests/conftest.py


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


def ones(device, *shape, dtype=None):
    return torch.ones(*shape, device=device, dtype=dtype)


def empty(device, *shape, dtype=None):
    return torch.empty(*shape, device=device, dtype=dtype)


CONV_POOL_CASES = {
    "avg_pool2d divisor 0": lambda d: F.avg_pool2d(ones(d, 1, 1, 2, 2), 2, divisor_override=0),
    "avg_pool2d divisor 0, padding too large": lambda d: F.avg_pool2d(
        ones(d, 1, 1, 4, 4), 2, padding=2, divisor_override=0
    ),
    "avg_pool3d divisor 0, stride 0": lambda d: F.avg_pool3d(ones(d, 1, 1, 4, 4, 4), 2, stride=0, divisor_override=0),
    "conv_transpose2d output padding 2, stride 2": lambda d: F.conv_transpose2d(
        ones(d, 1, 1, 3, 3), ones(d, 1, 1, 3, 3), stride=2, output_padding=2
    ),
    "conv_transpose2d output padding under dilation": lambda d: F.conv_transpose2d(
        ones(d, 1, 1, 3, 3), ones(d, 1, 1, 3, 3), dilation=3, output_padding=2
    ),
    "conv_transpose1d output padding": lambda d: F.conv_transpose1d(
        ones(d, 1, 1, 3), ones(d, 1, 1, 3), stride=2, output_padding=2
    ),
    "conv_transpose3d output padding": lambda d: F.conv_transpose3d(
        ones(d, 1, 1, 3, 3, 3), ones(d, 1, 1, 3, 3, 3), stride=2, output_padding=(0, 2, 0)
    ),
    "conv_transpose2d half output padding": lambda d: F.conv_transpose2d(
        ones(d, 1, 1, 3, 3, dtype=torch.half), ones(d, 1, 1, 3, 3, dtype=torch.half), stride=2, output_padding=2
    ),
    "conv2d dilation 0": lambda d: F.conv2d(ones(d, 1, 1, 4, 4), ones(d, 1, 1, 2, 2), dilation=0),
    "conv1d dilation 0": lambda d: F.conv1d(ones(d, 1, 1, 4), ones(d, 1, 1, 2), dilation=0),
    "conv3d dilation 0": lambda d: F.conv3d(ones(d, 1, 1, 4, 4, 4), ones(d, 1, 1, 2, 2, 2), dilation=(1, 0, 1)),
    "conv_transpose2d dilation 0": lambda d: F.conv_transpose2d(ones(d, 1, 1, 4, 4), ones(d, 1, 1, 2, 2), dilation=0),
    "conv_transpose1d dilation 0": lambda d: F.conv_transpose1d(ones(d, 1, 1, 4), ones(d, 1, 1, 2), dilation=0),
    "conv_transpose3d dilation 0": lambda d: F.conv_transpose3d(
        ones(d, 1, 1, 4, 4, 4), ones(d, 1, 1, 2, 2, 2), dilation=(1, 0, 1)
    ),
    "conv_transpose2d padding 5": lambda d: F.conv_transpose2d(ones(d, 1, 1, 5, 5), ones(d, 1, 1, 3, 3), padding=5),
    "conv_transpose2d padding 4": lambda d: F.conv_transpose2d(ones(d, 1, 1, 5, 5), ones(d, 1, 1, 3, 3), padding=4),
    "conv_transpose2d padding 3": lambda d: F.conv_transpose2d(ones(d, 1, 1, 5, 5), ones(d, 1, 1, 3, 3), padding=3),
    "conv_transpose2d no rows": lambda d: F.conv_transpose2d(ones(d, 1, 1, 2, 2), ones(d, 1, 1, 1, 1), padding=(1, 0)),
    "conv_transpose1d padding 4": lambda d: F.conv_transpose1d(ones(d, 1, 1, 5), ones(d, 1, 1, 3), padding=4),
    "conv_transpose3d padding 4": lambda d: F.conv_transpose3d(
        ones(d, 1, 1, 5, 5, 5), ones(d, 1, 1, 3, 3, 3), padding=(0, 4, 0)
    ),
    "max_pool2d stride 0": lambda d: F.max_pool2d(ones(d, 1, 1, 4, 4), 2, stride=0),
    "max_pool2d stride 0, indices": lambda d: F.max_pool2d(ones(d, 1, 1, 4, 4), 2, stride=0, return_indices=True)[0],
    "max_pool3d stride 0": lambda d: F.max_pool3d(ones(d, 1, 1, 4, 4, 4), 2, stride=0),
    "max_pool2d kernel 0": lambda d: F.max_pool2d(ones(d, 1, 1, 4, 4), 0),
    "max_pool2d kernel -1": lambda d: F.max_pool2d(ones(d, 1, 1, 4, 4), -1),
    "max_pool2d stride -1": lambda d: F.max_pool2d(ones(d, 1, 1, 4, 4), 2, stride=-1),
    "max_pool2d dilation 0": lambda d: F.max_pool2d(ones(d, 1, 1, 4, 4), 2, dilation=0),
    "max_pool2d dilation -1": lambda d: F.max_pool2d(ones(d, 1, 1, 4, 4), 2, dilation=-1),
    "max_pool3d dilation 0": lambda d: F.max_pool3d(ones(d, 1, 1, 4, 4, 4), 2, dilation=0),
    "max_pool3d stride -1": lambda d: F.max_pool3d(ones(d, 1, 1, 4, 4, 4), 2, stride=-1),
    "avg_pool2d stride 0": lambda d: F.avg_pool2d(ones(d, 1, 1, 4, 4), 2, stride=0),
    "avg_pool1d stride 0": lambda d: F.avg_pool1d(ones(d, 1, 1, 4), 2, stride=0),
    "avg_pool3d stride 0": lambda d: F.avg_pool3d(ones(d, 1, 1, 4, 4, 4), 2, stride=0),
    "avg_pool2d kernel -1": lambda d: F.avg_pool2d(ones(d, 1, 1, 4, 4), -1),
    "avg_pool3d stride -1": lambda d: F.avg_pool3d(ones(d, 1, 1, 4, 4, 4), 2, stride=-1),
    "adaptive_avg_pool2d empty height": lambda d: F.adaptive_avg_pool2d(empty(d, 1, 2, 0, 3), 2),
    "adaptive_avg_pool2d empty height, 3-d": lambda d: F.adaptive_avg_pool2d(empty(d, 2, 0, 3), 2),
    "adaptive_avg_pool2d no channels": lambda d: F.adaptive_avg_pool2d(empty(d, 1, 0, 3, 3), 2),
    "adaptive_avg_pool1d empty": lambda d: F.adaptive_avg_pool1d(empty(d, 1, 2, 0), 2),
    "adaptive_avg_pool3d empty depth": lambda d: F.adaptive_avg_pool3d(empty(d, 1, 2, 0, 3, 3), 2),
    "adaptive_avg_pool3d no channels": lambda d: F.adaptive_avg_pool3d(empty(d, 1, 0, 3, 3, 3), 2),
    "adaptive_max_pool2d empty height": lambda d: F.adaptive_max_pool2d(empty(d, 1, 2, 0, 3), 2),
    "adaptive_max_pool2d no channels": lambda d: F.adaptive_max_pool2d(empty(d, 1, 0, 3, 3), 2),
    "adaptive_max_pool2d empty batch": lambda d: F.adaptive_max_pool2d(empty(d, 0, 2, 3, 3), 2),
    "adaptive_max_pool3d empty depth": lambda d: F.adaptive_max_pool3d(empty(d, 1, 2, 0, 3, 3), 2),
    "adaptive_max_pool3d no channels, 4-d": lambda d: F.adaptive_max_pool3d(empty(d, 0, 3, 3, 3), 2),
    "adaptive_max_pool2d no bins": lambda d: F.adaptive_max_pool2d(ones(d, 1, 2, 3, 3), 0, return_indices=True)[1],
    "adaptive_max_pool3d no bins": lambda d: F.adaptive_max_pool3d(ones(d, 1, 2, 3, 3, 3), (0, 1, 1)),
}


@pytest.mark.parametrize("case", list(CONV_POOL_CASES))
def test_convolution_and_pooling_geometry_as_on_cpu(case):
    same_outcome(CONV_POOL_CASES[case])


HALF = [torch.bfloat16, torch.float16]


# --- adaptive_avg_pool3d in half: CPU sums each bin in the half dtype, element by element ---


@pytest.mark.parametrize("dtype", HALF)
@pytest.mark.parametrize(
    "shape,out", [((8, 8, 8, 8), (5, 7, 4)), ((2, 3, 6, 6, 6), (4, 4, 4)), ((1, 1, 20, 20, 20), (1, 1, 1))]
)
def test_adaptive_avg_pool3d_half(dtype, shape, out):
    x = seeded_randn(*shape, scale=3, dtype=dtype)
    on_both(lambda d: torch.nn.functional.adaptive_avg_pool3d(x.to(d), out))


@pytest.mark.parametrize("nd", [2, 3])
@pytest.mark.parametrize("warn_only", [False, True])
def test_max_unpool_alerts_under_deterministic_algorithms_as_cpu(nd, warn_only):
    """CPU's max_unpool kernels call alertNotDeterministic (duplicate indices write in any order):
    an error, or a UserWarning with warn_only; jax ran silently (PyTorch's test_torch
    test_nondeterministic_alert_MaxUnpool3d)."""
    import warnings

    unpool = F.max_unpool2d if nd == 2 else F.max_unpool3d
    outcomes = []
    previous = (torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled())
    try:
        torch.use_deterministic_algorithms(True, warn_only=warn_only)
        for device in ("cpu", JAX):
            x = torch.ones((1, 1) + (2,) * nd, device=device)
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                try:
                    unpool(x, torch.zeros_like(x, dtype=torch.long), 1)
                    outcome = "ok"
                except RuntimeError as e:
                    outcome = str(e)
            said = [
                str(w.message).split(" (Triggered internally")[0] for w in caught if "deterministic" in str(w.message)
            ]
            outcomes.append((outcome, said))
    finally:
        torch.use_deterministic_algorithms(previous[0], warn_only=previous[1])
    assert outcomes[0] == outcomes[1]
    assert f"max_unpooling{nd}d_forward_out does not have a deterministic implementation" in str(outcomes[0])
