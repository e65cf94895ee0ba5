"""Random samplers, embedding_bag, pooling, convolution, batch norm and the pointwise losses given
arguments CPU refuses: the same exception (type and words) as CPU PyTorch, or, where CPU accepts
them, a result of the same dtype and shape (and values, for the deterministic ops). Before, jax
drew int8 values for a range of [0, 300), permuted 300 values into int8, drew with probabilities
of 1.5, summed embedding bags whose offsets did not start at 0 or ran past the indices, let a zero
divisor, dilation or output padding through, and raised TypeError, ValueError or ZeroDivisionError
from inside the kernels where CPU raises RuntimeError."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from jaxdev_testing import JAX, same_outcome


def t(device, values, dtype=None):
    return torch.tensor(values, device=device, dtype=dtype)


def ones(device, *shape, dtype=None):
    return torch.ones(*shape, device=device, dtype=dtype)


def empty(device, *shape, dtype=None):
    return torch.empty(*shape, device=device, dtype=dtype)


I8, U8 = torch.int8, torch.uint8

RANDOM_CASES = {
    "randint beyond int8": lambda d: torch.randint(0, 300, (4,), dtype=I8, device=d),
    "randint below int8": lambda d: torch.randint(-200, 3, (4,), dtype=I8, device=d),
    "randint bool": lambda d: torch.randint(0, 3, (4,), dtype=torch.bool, device=d),
    "randint half beyond its range": lambda d: torch.randint(0, 70000, (4,), dtype=torch.half, device=d),
    "randint int8 in range": lambda d: torch.randint(-128, 128, (4,), dtype=I8, device=d),
    "random_ beyond int8": lambda d: empty(d, 4, dtype=I8).random_(0, 300),
    "random_ to beyond int8": lambda d: empty(d, 4, dtype=I8).random_(300),
    "random_ uint8 from -1": lambda d: empty(d, 4, dtype=U8).random_(-1, 3),
    "random_ empty int8": lambda d: empty(d, 0, dtype=I8).random_(0, 300),
    "random_ uint16": lambda d: empty(d, 4, dtype=torch.uint16).random_(0, 70000),
    "random_ complex": lambda d: empty(d, 4, dtype=torch.complex64).random_(0, 3),
    "random_ complex default": lambda d: empty(d, 4, dtype=torch.complex64).random_(),
    "random_ half with a warning": lambda d: empty(d, 4, dtype=torch.half).random_(0, 5000),
    "randperm int8": lambda d: torch.randperm(300, dtype=I8, device=d),
    "randperm int8 129": lambda d: torch.randperm(129, dtype=I8, device=d),
    "randperm int8 128": lambda d: torch.randperm(128, dtype=I8, device=d),
    "randperm uint8 out": lambda d: torch.randperm(257, out=empty(d, 0, dtype=U8)),
    "randperm half": lambda d: torch.randperm(3000, dtype=torch.half, device=d),
    "randperm half 2049": lambda d: torch.randperm(2049, dtype=torch.half, device=d),
    "randperm half 70000": lambda d: torch.randperm(70000, dtype=torch.half, device=d),
    "randperm float": lambda d: torch.randperm(2**24 + 2, dtype=torch.float32, device=d),
    "randperm bool": lambda d: torch.randperm(3, dtype=torch.bool, device=d),
    "randperm complex": lambda d: torch.randperm(3, dtype=torch.complex64, device=d),
    "bernoulli p 1.5": lambda d: torch.bernoulli(t(d, [1.5])),
    "bernoulli p -0.5": lambda d: torch.bernoulli(t(d, [0.5, -0.5])),
    "bernoulli p nan": lambda d: torch.bernoulli(t(d, [float("nan")])),
    "bernoulli half p 2": lambda d: torch.bernoulli(t(d, [2.0, 0.5], torch.half)),
    "bernoulli_ tensor p 1.5": lambda d: torch.zeros(2, device=d).bernoulli_(t(d, [1.5, 0.5], torch.float64)),
    "bernoulli int64": lambda d: torch.bernoulli(ones(d, 2, dtype=torch.int64)),
    "bernoulli bool": lambda d: torch.bernoulli(ones(d, 2, dtype=torch.bool)),
    "bernoulli complex": lambda d: torch.bernoulli(ones(d, 2, dtype=torch.complex64)),
    "bernoulli empty int64": lambda d: torch.bernoulli(empty(d, 0, dtype=torch.int64)),
    "bernoulli_ int64 p": lambda d: torch.zeros(2, device=d).bernoulli_(ones(d, 2, dtype=torch.int64)),
    "bernoulli_ complex self": lambda d: torch.zeros(2, dtype=torch.complex64, device=d).bernoulli_(0.5),
    "bernoulli_ int64 self": lambda d: torch.zeros(2, dtype=torch.int64, device=d).bernoulli_(0.5),
    "randn int64": lambda d: torch.randn(2, dtype=torch.int64, device=d),
    "randn bool": lambda d: torch.randn(2, dtype=torch.bool, device=d),
    "normal_ int64, negative std": lambda d: empty(d, 2, dtype=torch.int64).normal_(0, -1),
    "normal_ empty int64": lambda d: empty(d, 0, dtype=torch.int64).normal_(),
    "rand bool": lambda d: torch.rand(2, dtype=torch.bool, device=d),
    "uniform_ int64": lambda d: empty(d, 2, dtype=torch.int64).uniform_(),
    "uniform_ empty int64": lambda d: empty(d, 0, dtype=torch.int64).uniform_(),
    "uniform_ half from beyond": lambda d: empty(d, 2, dtype=torch.half).uniform_(-1e6, 0),
    "uniform_ half span beyond": lambda d: empty(d, 2, dtype=torch.half).uniform_(-60000, 60000),
    "uniform_ float to inf": lambda d: empty(d, 2).uniform_(0, float("inf")),
    "uniform_ from > to": lambda d: empty(d, 2).uniform_(2, 1),
}


@pytest.mark.parametrize("case", list(RANDOM_CASES))
def test_random_checks_as_on_cpu(case):
    same_outcome(RANDOM_CASES[case], values=False)


def test_random_warns_where_a_float_cannot_hold_the_range():
    with pytest.warns(UserWarning, match=r"to - 1 is out of bounds \[-\(2\^11\), 2\^11\]"):
        empty(JAX, 4, dtype=torch.half).random_(0, 5000)


def _bag(d, offsets, mode="sum", dtype=torch.float32, include_last_offset=False, indices=(0, 1, 2, 1)):
    weight = torch.arange(12.0, device=d).reshape(4, 3).to(dtype)
    return F.embedding_bag(
        t(d, list(indices)), weight, t(d, offsets), mode=mode, include_last_offset=include_last_offset
    )


EMBEDDING_BAG_CASES = {
    "first offset 1": lambda d: _bag(d, [1, 2]),
    "first offset 1, max": lambda d: _bag(d, [1, 2], "max"),
    "first offset 1, int32": lambda d: F.embedding_bag(
        t(d, [0, 1, 2, 1], torch.int32), ones(d, 4, 3), t(d, [1, 2], torch.int32)
    ),
    "offsets past the end": lambda d: _bag(d, [0, 5]),
    "offsets past the end, last included": lambda d: _bag(d, [0, 5], include_last_offset=True),
    "offsets up to the end": lambda d: _bag(d, [0, 4]),
    "decreasing offsets": lambda d: _bag(d, [0, 2, 1]),
    "decreasing offsets, mean": lambda d: _bag(d, [0, 2, 1], "mean"),
    "decreasing offsets, half": lambda d: _bag(d, [0, 2, 1], dtype=torch.half),
    "decreasing offsets, last included": lambda d: _bag(d, [0, 2, 1], include_last_offset=True),
    "decreasing offsets, four bags": lambda d: _bag(d, [0, 3, 2, 4], indices=(0, 1, 2, 1, 3, 0)),
    "index out of range": lambda d: _bag(d, [0, 2], indices=(0, 1, 9, 1)),
    "float indices": lambda d: torch.embedding_bag(ones(d, 4, 3), t(d, [0.0, 1.0]), t(d, [0]), False, 0),
    "float offsets": lambda d: torch.embedding_bag(ones(d, 4, 3), t(d, [0, 1]), t(d, [0.0]), False, 0),
    "int64 weight": lambda d: torch.embedding_bag(ones(d, 4, 3, dtype=torch.int64), t(d, [0, 1]), t(d, [0]), False, 0),
    "no offsets, last included": lambda d: torch.embedding_bag(
        ones(d, 4, 3), t(d, [0, 1]), t(d, [0])[:0], False, 0, False, None, True
    )[0],
    "2-d offsets": lambda d: torch.ops.aten._embedding_bag(ones(d, 4, 3), t(d, [0, 1]), t(d, [[0]]))[0],
}


@pytest.fixture
def two_threads():
    """CPU's fbgemm path reports decreasing offsets chunk by chunk, a chunk per thread; the device
    follows torch.get_num_threads(), so pin it where both sides are compared."""
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    yield
    torch.set_num_threads(threads)


@pytest.mark.parametrize("case", list(EMBEDDING_BAG_CASES))
def test_embedding_bag_offsets_as_on_cpu(case, two_threads):
    same_outcome(EMBEDDING_BAG_CASES[case])


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


F32, F64, F16, BF16, I64 = torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int64

# (input, weight, bias, running_mean, running_var) dtypes; None: not given
BATCH_NORM_DTYPES = {
    "int64 running stats": (F32, None, None, I64, I64),
    "float64 running stats": (F32, None, None, F64, F64),
    "half running stats": (F32, None, None, F16, F16),
    "float64 weight": (F32, F64, None, F32, F32),
    "float64 input, float32 stats": (F64, None, None, F32, F32),
    "float64 input, half stats": (F64, None, None, F16, F16),
    "mean float32, var float64": (F32, None, None, F32, F64),
    "mean float64, var float32": (F32, None, None, F64, F32),
    "int64 input": (I64, None, None, F32, F32),
    "half input, float32 stats": (F16, None, None, F32, F32),
    "half input, float32 weight, half stats": (F16, F32, None, F16, F16),
    "half input, half mean, float32 var": (F16, None, None, F16, F32),
    "bfloat16 input, float32 stats, float64 weight": (BF16, F64, None, F32, F32),
    "bfloat16 input and stats": (BF16, BF16, BF16, BF16, BF16),
    "float32 weight and bias only": (F32, F32, F32, None, None),
    "float64 weight and bias only": (F32, F64, F64, None, None),
}


@pytest.mark.parametrize("training", [False, True])
@pytest.mark.parametrize("case", list(BATCH_NORM_DTYPES))
def test_batch_norm_dtypes_as_on_cpu(case, training):
    x_dt, w_dt, b_dt, m_dt, v_dt = BATCH_NORM_DTYPES[case]
    if m_dt is None and not training:
        pytest.skip("evaluation needs running statistics")

    def run(d):
        x = torch.arange(24.0, device=d).reshape(2, 3, 4).to(x_dt)
        make = lambda dt, v: None if dt is None else torch.full((3,), v, device=d).to(dt)
        return F.batch_norm(x, make(m_dt, 0), make(v_dt, 1), make(w_dt, 1), make(b_dt, 0), training=training)

    same_outcome(run, rtol=1e-6)  # (training statistics: float32 sums in another order, an ulp apart)


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


@pytest.mark.parametrize("case", list(LOSS_CASES))
def test_losses_check_as_on_cpu(case):
    same_outcome(LOSS_CASES[case])
