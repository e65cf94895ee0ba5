"""The op library beyond the model families: each op on jax against CPU PyTorch, forward and (where
differentiable) backward through `.backward()`, with JAXDEV_FALLBACK=error so a CPU fallback fails."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from jaxdev_testing import JAX, assert_same, check

torch.manual_seed(0)


pytestmark = [
    pytest.mark.filterwarnings("ignore:index_reduce\\(\\) is in beta"),
    pytest.mark.usefixtures("no_fallback"),  # tests/conftest.py
]


def _nan_matrix():
    x = torch.randn(4, 5)
    x[1, 2] = x[2, 0] = float("nan")
    return x


X = torch.randn(4, 6)
X3 = torch.randn(2, 3, 5)
INTS = torch.randint(0, 4, (4, 6))

# --- sorting and searching ---------------------------------------------------------------------------

SORTING = {
    "sort": (lambda t: torch.sort(t, dim=0), X),
    "sort_descending_nan": (lambda t: torch.sort(t, dim=1, descending=True), _nan_matrix()),
    "sort_stable_ints": (lambda t: torch.sort(t, stable=True, descending=True), INTS),
    "argsort": (lambda t: torch.argsort(t, dim=-1), X),
    "topk": (lambda t: torch.topk(t, 3), X),
    "topk_smallest": (lambda t: torch.topk(t, 2, dim=0, largest=False), X),
    "kthvalue": (lambda t: torch.kthvalue(t, 2, 1, True), X),
    "median": (lambda t: torch.median(t), X),
    "median_dim_nan": (lambda t: torch.median(t, 1), _nan_matrix()),
    "nanmedian_dim": (lambda t: torch.nanmedian(t, 1), _nan_matrix()),
    "mode": (lambda t: torch.mode(t, 1), INTS),
    "searchsorted": (
        lambda s, v: torch.searchsorted(s, v, side="right"),
        torch.sort(torch.randn(2, 5))[0],
        torch.randn(2, 3),
    ),
    "bucketize": (
        lambda v, b: torch.bucketize(v, b, out_int32=True),
        torch.randn(3, 4),
        torch.tensor([-1.0, 0.0, 0.5]),
    ),
    "unique": (lambda t: torch.unique(t, return_inverse=True, return_counts=True), INTS),
    "unique_dim": (
        lambda t: torch.unique(t, dim=0, return_inverse=True, return_counts=True),
        torch.tensor([[1, 2], [0, 4], [1, 2]]),
    ),
    "unique_consecutive": (
        lambda t: torch.unique_consecutive(t, return_inverse=True, return_counts=True),
        torch.tensor([1, 1, 2, 2, 1]),
    ),
    "flip": (lambda t: torch.flip(t, (0, 2)), X3),
    "roll": (lambda t: torch.roll(t, (1, -2), (0, 2)), X3),
    "roll_flat": (lambda t: torch.roll(t, 3), X3),
    "cumsum_backward": (lambda t: torch.cumsum(t, 1), X3),
}


@pytest.mark.parametrize("case", list(SORTING))
def test_sorting(case):
    fn, *inputs = SORTING[case]
    check(fn, *inputs)


def test_sort_errors_like_cpu():
    with pytest.raises(RuntimeError, match="selected index k out of range"):
        torch.topk(torch.randn(3, device=JAX), 4)
    with pytest.raises(RuntimeError, match="kthvalue\\(\\): selected number k out of range"):
        torch.kthvalue(torch.randn(3, device=JAX), 4)


def test_sort_out_variant():
    values, indices = torch.empty(0, device=JAX), torch.empty(0, dtype=torch.long, device=JAX)
    torch.sort(X.to(JAX), dim=1, out=(values, indices))
    expected = torch.sort(X, dim=1)
    assert_same(values, expected.values)
    assert_same(indices, expected.indices)


# --- padding ------------------------------------------------------------------------------------------

X2 = torch.randn(2, 3, 4, 5)
X5 = torch.randn(1, 2, 3, 4, 5)
PADDING = {
    "constant": (lambda t: F.pad(t, (1, 2, 0, 3), value=1.5), X2),
    "constant_negative": (lambda t: F.pad(t, (-1, 2, 1, -2)), X2),
    "reflect1d": (lambda t: F.pad(t, (2, 3), mode="reflect"), X3),
    "reflect2d": (lambda t: F.pad(t, (2, 3, 1, 2), mode="reflect"), X2),
    "reflect3d": (lambda t: F.pad(t, (2, 3, 1, 2, 1, 1), mode="reflect"), X5),
    "replicate1d": (lambda t: F.pad(t, (2, 3), mode="replicate"), X3),
    "replicate2d_negative": (lambda t: F.pad(t, (-1, 3, 1, -2), mode="replicate"), X2),
    "replicate3d": (lambda t: F.pad(t, (2, 3, 1, 2, 1, 1), mode="replicate"), X5),
}


@pytest.mark.parametrize("case", list(PADDING))
def test_padding(case):
    fn, *inputs = PADDING[case]
    check(fn, *inputs)


def test_reflection_pad_too_large_raises():
    with pytest.raises(RuntimeError, match="Padding size should be less than the corresponding input dimension"):
        F.pad(X3.to(JAX), (5, 1), mode="reflect")


# --- activations ----------------------------------------------------------------------------------------

ACT = torch.randn(3, 4) * 4
ACT[0] = torch.tensor([1.0, -1.0, 3.0, -3.0])  # the kinks: gradients there follow CPU's comparisons
ACTIVATIONS = {
    "hardtanh": lambda t: F.hardtanh(t, -2.0, 0.5),
    "relu6": F.relu6,
    "leaky_relu": lambda t: F.leaky_relu(t, 0.2),
    "leaky_relu_inplace": lambda t: F.leaky_relu(t * 1, 0.1, inplace=True),
    "elu": lambda t: F.elu(t, 1.3),
    "celu": lambda t: F.celu(t, 0.7),
    "selu": F.selu,
    "hardsigmoid": F.hardsigmoid,
    "hardswish": F.hardswish,
    "softplus": lambda t: F.softplus(t, 2.0, 3.0),
    "mish": F.mish,
    "softshrink": lambda t: F.softshrink(t, 1.0),
    "hardshrink": lambda t: F.hardshrink(t, 1.0),
    "logsigmoid": F.logsigmoid,
    "silu": F.silu,
    "logit": lambda t: torch.logit(torch.sigmoid(t), 0.1),
    "glu": lambda t: F.glu(t, 1),
    "prelu": lambda t: F.prelu(t, torch.tensor([0.1, 0.2, 0.3, 0.4], device=t.device)),
}


@pytest.mark.parametrize("case", list(ACTIVATIONS))
def test_activation(case):
    check(ACTIVATIONS[case], ACT)


@pytest.mark.parametrize("case", ["hardtanh", "softplus"])
def test_activation_half(case):
    check(ACTIVATIONS[case], ACT.to(torch.bfloat16), grad=False)


# --- normalization and pooling ----------------------------------------------------------------------

V = torch.randn(2, 3, 6, 7, 8)
NORM_POOL = {
    "group_norm": (lambda t, w, b: F.group_norm(t, 3, w, b), torch.randn(2, 6, 3, 4), torch.randn(6), torch.randn(6)),
    "group_norm_no_affine": (lambda t: F.group_norm(t, 2), torch.randn(3, 6, 5)),
    "max_pool3d": (
        lambda t: F.max_pool3d(t, (3, 2, 3), (2, 1, 2), (1, 1, 0), (1, 2, 1), ceil_mode=True, return_indices=True),
        V,
    ),
    "avg_pool3d": (lambda t: F.avg_pool3d(t, 3, 2, 1, ceil_mode=True, count_include_pad=False), V),
    "avg_pool3d_divisor": (lambda t: F.avg_pool3d(t, (2, 3, 2), 1, 1, divisor_override=5), V),
    "adaptive_avg_pool3d": (lambda t: F.adaptive_avg_pool3d(t, (4, 3, 5)), V),
    "adaptive_max_pool2d": (lambda t: F.adaptive_max_pool2d(t, (4, 3), return_indices=True), V[0]),
    "adaptive_max_pool3d": (lambda t: F.adaptive_max_pool3d(t, (4, 3, 5), return_indices=True), V),
}


@pytest.mark.parametrize("case", list(NORM_POOL))
def test_normalization_and_pooling(case):
    fn, *inputs = NORM_POOL[case]
    check(fn, *inputs)


# --- scatter-like writes and scans --------------------------------------------------------------------

S_INDEX = torch.randint(0, 4, (6, 5))
MASK = torch.rand(4, 5) > 0.5
SCATTER = {
    **{
        f"scatter_reduce_{r}_{inc}": (
            lambda t, s, r=r, inc=inc: t.scatter_reduce(0, S_INDEX.to(t.device), s, r, include_self=inc),
            torch.randn(4, 5),
            torch.randn(6, 5),
        )
        for r, inc in [("sum", False), ("prod", True), ("mean", False), ("amax", True), ("amin", False)]
    },
    "scatter_reduce_mean_int": (
        lambda t, s: t.scatter_reduce(0, S_INDEX.to(t.device), s, "mean"),
        torch.randint(-5, 5, (4, 5)),
        torch.randint(-5, 5, (6, 5)),
    ),
    "index_add": (
        lambda t, s: t.index_add(0, torch.tensor([0, 2, 0], device=t.device), s, alpha=2.0),
        torch.randn(4, 5),
        torch.randn(3, 5),
    ),
    "masked_scatter": (lambda t, s: t.masked_scatter(MASK.to(t.device), s), torch.randn(4, 5), torch.randn(30)),
    "masked_scatter_broadcast": (
        lambda t, s: t.masked_scatter(MASK[0].to(t.device), s),
        torch.randn(4, 5),
        torch.randn(30),
    ),
    "cummax": (lambda t: torch.cummax(t, 1), torch.randn(4, 5)),
    "cummin_ties_nan": (
        lambda t: torch.cummin(t, 0),
        torch.tensor([1.0, 3.0, 3.0, float("nan"), 5.0, float("nan"), 2.0]),
    ),
    "logcumsumexp": (lambda t: torch.logcumsumexp(t, 1), torch.randn(4, 5)),
}


@pytest.mark.parametrize("case", list(SCATTER))
def test_scatter_and_scans(case):
    fn, *inputs = SCATTER[case]
    check(fn, *inputs)


# --- upsampling ---------------------------------------------------------------------------------------

UPSAMPLE = {
    "nearest1d": (lambda t: F.interpolate(t, size=11, mode="nearest"), torch.randn(2, 3, 7)),
    "nearest2d_scale": (lambda t: F.interpolate(t, scale_factor=(1.7, 0.6), mode="nearest"), torch.randn(2, 3, 5, 7)),
    "nearest_exact3d": (lambda t: F.interpolate(t, size=(5, 3, 9), mode="nearest-exact"), torch.randn(1, 2, 3, 4, 5)),
    "linear_align": (lambda t: F.interpolate(t, size=11, mode="linear", align_corners=True), torch.randn(2, 3, 7)),
    "bilinear": (lambda t: F.interpolate(t, size=(8, 4), mode="bilinear"), torch.randn(2, 3, 5, 7)),
    "bilinear_scale": (lambda t: F.interpolate(t, scale_factor=(1.7, 0.6), mode="bilinear"), torch.randn(2, 3, 5, 7)),
    "trilinear": (lambda t: F.interpolate(t, size=(5, 3, 9), mode="trilinear"), torch.randn(1, 2, 3, 4, 5)),
    "bicubic_align": (
        lambda t: F.interpolate(t, scale_factor=2.3, mode="bicubic", align_corners=True),
        torch.randn(2, 3, 5, 7),
    ),
}


@pytest.mark.parametrize("case", list(UPSAMPLE))
def test_upsample(case):
    fn, *inputs = UPSAMPLE[case]
    check(fn, *inputs)


# --- embedding_bag ----------------------------------------------------------------------------------

BAG_INDICES = torch.tensor([1, 2, 4, 5, 4, 3, 2, 9, 0])
BAG_OFFSETS = torch.tensor([0, 4, 4, 6])  # bag 1 is empty


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
@pytest.mark.parametrize("padding_idx", [None, 4])
def test_embedding_bag(mode, padding_idx):
    check(
        lambda w: F.embedding_bag(
            BAG_INDICES.to(w.device), w, BAG_OFFSETS.to(w.device), mode=mode, padding_idx=padding_idx
        ),
        torch.randn(10, 3),
    )


def test_embedding_bag_per_sample_weights():
    check(
        lambda w, p: F.embedding_bag(
            BAG_INDICES.to(w.device), w, BAG_OFFSETS.to(w.device), mode="sum", per_sample_weights=p
        ),
        torch.randn(10, 3),
        torch.randn(9),
    )


# --- im2col / col2im, pairwise distances ----------------------------------------------------------------

IMAGE = torch.randn(2, 3, 6, 7)
BLOCKS = dict(kernel_size=(2, 3), dilation=(2, 1), padding=(1, 2), stride=(2, 3))
A, B = torch.randn(2, 5, 4), torch.randn(2, 6, 4)
FOLD_DISTANCE = {
    "unfold": (lambda t: F.unfold(t, **BLOCKS), IMAGE),
    "fold": (lambda t: F.fold(t, (6, 7), **BLOCKS), F.unfold(IMAGE, **BLOCKS)),
    "fold_unbatched": (lambda t: F.fold(t, (6, 7), 3, padding=1), F.unfold(IMAGE[0], 3, padding=1)),
    **{f"cdist_p{p}": (lambda x, y, p=p: torch.cdist(x, y, p), A, B) for p in (0.0, 1.5, 2.0, float("inf"))},
    "cdist_mm": (lambda x, y: torch.cdist(x, y, compute_mode="use_mm_for_euclid_dist"), A, B),
    "cdist_broadcast": (lambda x, y: torch.cdist(x, y), torch.randn(3, 1, 5, 4), torch.randn(2, 6, 4)),
    "pdist": (lambda x: F.pdist(x), A[0]),
    "pdist_p1": (lambda x: F.pdist(x, 1.0), A[0]),
}


@pytest.mark.parametrize("case", list(FOLD_DISTANCE))
def test_fold_and_distance(case):
    fn, *inputs = FOLD_DISTANCE[case]
    check(fn, *inputs)


# --- fft, grid_sample -----------------------------------------------------------------------------------

SIGNAL, SPECTRUM = torch.randn(4, 6), torch.randn(4, 6, dtype=torch.complex64)
IMG, GRID = torch.randn(2, 3, 5, 7), torch.rand(2, 4, 6, 2) * 2.6 - 1.3  # the grid reaches outside [-1, 1]
FFT_GRID = {
    "fft": (lambda t: torch.fft.fft(t), SIGNAL),
    "ifft_ortho": (lambda t: torch.fft.ifft(t, norm="ortho"), SIGNAL),
    "fft2_complex": (lambda t: torch.fft.fft2(t, norm="forward"), SPECTRUM),
    "rfft_padded": (lambda t: torch.fft.rfft(t, n=9), SIGNAL),
    "irfft": (lambda t: torch.fft.irfft(t, n=7), SPECTRUM),
    "hfft": (lambda t: torch.fft.hfft(t), SPECTRUM),
    "ihfft": (lambda t: torch.fft.ihfft(t), SIGNAL),
    "fftshift": (lambda t: torch.fft.fftshift(t), SIGNAL),
    **{
        f"grid_sample_{mode}_{pad}": (
            lambda i, g, mode=mode, pad=pad: F.grid_sample(
                i, g, mode=mode, padding_mode=pad, align_corners=pad == "border"
            ),
            IMG,
            GRID,
        )
        for mode, pad in [
            ("bilinear", "zeros"),
            ("bilinear", "reflection"),
            ("nearest", "border"),
            ("bicubic", "zeros"),
        ]
    },
}


@pytest.mark.parametrize("case", list(FFT_GRID))
def test_fft_and_grid_sample(case):
    fn, *inputs = FFT_GRID[case]
    check(fn, *inputs, rtol=1e-5, atol=1e-5)


def test_value_selecting_backward_on_0dim():
    """median/cummax of a 0-dim tensor: their backward scatters into a 0-dim gradient."""
    check(lambda t: torch.median(t, 0), torch.tensor(1.5))
    check(lambda t: torch.cummax(t, 0), torch.tensor(1.5))


def test_max_unpool():
    pooled, indices = F.max_pool2d(torch.randn(2, 3, 6, 8), 2, return_indices=True)
    check(lambda t, i: F.max_unpool2d(t, i, 2, output_size=(7, 9)), pooled, indices)
    pooled, indices = F.max_pool3d(torch.randn(1, 2, 4, 6, 8), 2, return_indices=True)
    check(lambda t, i: F.max_unpool3d(t, i, 2), pooled, indices)


SLICE_INDEX = torch.tensor([0, 2, 0, 3])
SLICE_WRITES = {
    "index_copy": (
        lambda t, s: t.index_copy(1, torch.tensor([4, 0], device=t.device), s),
        torch.randn(4, 5),
        torch.randn(4, 2),
    ),
    "index_fill": (lambda t: t.index_fill(1, torch.tensor([4, -1, 0], device=t.device), 2.5), torch.randn(4, 5)),
    **{
        f"index_reduce_{r}": (
            lambda t, s, r=r: t.index_reduce(0, SLICE_INDEX.to(t.device), s, r, include_self=r != "mean"),
            torch.randn(4, 5),
            torch.randn(4, 5),
        )
        for r in ("prod", "mean", "amax", "amin")
    },
    "put_accumulate": (
        lambda t, s: t.put(torch.tensor([1, 1, -7], device=t.device), s, accumulate=True),
        torch.randn(4, 5),
        torch.randn(3),
    ),
    "take": (lambda t: t.take(torch.tensor([[1, -2], [7, 0]], device=t.device)), torch.randn(4, 5)),
}


@pytest.mark.parametrize("case", list(SLICE_WRITES))
def test_slice_writes(case):
    fn, *inputs = SLICE_WRITES[case]
    check(fn, *inputs)


MISC = {
    "grid_sample_3d": (
        lambda i, g: F.grid_sample(i, g, padding_mode="reflection", align_corners=False),
        torch.randn(2, 3, 4, 5, 6),
        torch.rand(2, 3, 4, 5, 3) * 2.6 - 1.3,
    ),
    "grid_sample_3d_nearest": (
        lambda i, g: F.grid_sample(i, g, mode="nearest", align_corners=False),
        torch.randn(1, 2, 4, 5, 6),
        torch.rand(1, 3, 4, 5, 3) * 2 - 1,
    ),
    "isin": (lambda a, b: torch.isin(a, b, invert=True), torch.randint(0, 9, (4, 5)), torch.tensor([[1, 3], [8, 0]])),
    "histc": (lambda t: torch.histc(t, 7, -1, 1.5), torch.randn(200)),
    "histc_edges": (lambda t: torch.histc(t, 10, 0, 1), torch.arange(0, 1.01, 0.1)),
    "gather_int32_index": (
        lambda t: torch.gather(t, 1, torch.tensor([[0, 1], [2, 2]], dtype=torch.int32, device=t.device)),
        torch.randn(2, 4),
    ),
}


@pytest.mark.parametrize("case", list(MISC))
def test_misc(case):
    fn, *inputs = MISC[case]
    check(fn, *inputs, rtol=1e-5, atol=1e-5)
