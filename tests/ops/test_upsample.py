"""jaxdev/ops/upsample.py: interpolation (half, integer and uint8 fixed point, antialiased) against CPU."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from jaxdev_testing import JAX, assert_same, check, on_both, seeded_randn

import jaxdev

pytestmark = pytest.mark.usefixtures("no_fallback")  # tests/conftest.py


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
        # CPU has no uint8 linear/trilinear kernel (test_interpolate_integer_dtypes_as_cpu checks that error)
        if not (dtype == torch.uint8 and kwargs["mode"] in ("linear", "trilinear"))
    ],
)
def test_interpolate_size_checks_as_cpu(shape, kwargs, dtype):
    """CPU's upsample checks and words: sizes above 0 ("(H: 4, W: 4) output (H: 0, W: 0)"), and no
    empty dimension but the batch."""
    x = torch.zeros(shape, dtype=dtype)
    on_both(lambda d: F.interpolate(x.to(d), **kwargs))


HALF = [torch.bfloat16, torch.float16]


# --- interpolation in half: CPU stores 1-d/3-d linear and bicubic weights in the half dtype ---


@pytest.mark.parametrize("dtype", HALF)
@pytest.mark.parametrize(
    "shape,mode", [((2, 3, 40), "linear"), ((2, 3, 5, 6, 7), "trilinear"), ((2, 3, 4, 5), "bicubic")]
)
@pytest.mark.parametrize("align_corners", [True, False])
def test_interpolate_half(dtype, shape, mode, align_corners):
    if mode == "bicubic" and dtype == torch.float16 and not align_corners:
        pytest.skip("known: float16 bicubic without align_corners still differs by an ulp past rtol 1e-3")
    x = seeded_randn(*shape, scale=4, dtype=dtype)
    # 1-d linear is bit-equal; trilinear and bicubic sum taps in float32 in another order than
    # CPU's nested loops, an ulp of the half result here and there (the weights were off by far more)
    tol = {} if mode == "linear" else {"rtol": 1e-3 if dtype == torch.float16 else 1.6e-2, "atol": 1e-5}

    def fwd(d):
        return torch.nn.functional.interpolate(x.to(d), scale_factor=1.7, mode=mode, align_corners=align_corners)

    on_both(fwd, **tol)

    def grad(d):  # CPU's backward weighs with float32 weights
        xx = x.to(d).requires_grad_()
        y = torch.nn.functional.interpolate(xx, scale_factor=1.7, mode=mode, align_corners=align_corners)
        return torch.autograd.grad(y, xx, seeded_randn(*y.shape, seed=1, dtype=dtype).to(d))

    on_both(grad, **tol)


@pytest.mark.parametrize("dtype", [torch.bool, torch.int8, torch.uint8, torch.int64])
@pytest.mark.parametrize(
    "shape,mode",
    [
        ((1, 2, 5), "nearest"),
        ((1, 2, 5, 5), "nearest-exact"),
        ((1, 2, 3, 5, 5), "nearest"),
        ((1, 2, 5), "linear"),
        ((1, 2, 5, 5), "bilinear"),
        ((1, 2, 5, 5), "bicubic"),
        ((1, 2, 3, 5, 5), "trilinear"),
    ],
)
def test_interpolate_integer_dtypes_as_cpu(dtype, shape, mode):
    jaxdev.reset_fallback_counts()
    x = torch.randint(0, 200, shape, generator=torch.Generator().manual_seed(0)).to(dtype)
    on_both(lambda d: torch.nn.functional.interpolate(x.to(d), scale_factor=1.7, mode=mode), match="not implemented")
    assert not jaxdev.fallback_counts()  # uint8 bilinear/bicubic run CPU's fixed-point sums on jax
