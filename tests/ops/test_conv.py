"""jaxdev/ops/conv.py: convolutions (transposed ones in half precision) against CPU PyTorch."""

from __future__ import annotations

import pytest
import torch
from jaxdev_testing import on_both, seeded_randn

pytestmark = pytest.mark.usefixtures("no_fallback")  # tests/conftest.py

HALF = [torch.bfloat16, torch.float16]


# --- transposed convolution in half: CPU's slow_conv_transpose (GEMM columns rounded, col2im adds
# rounded one tap at a time) wherever oneDNN does not take the dtype on this host ---

F_CT = {
    1: torch.nn.functional.conv_transpose1d,
    2: torch.nn.functional.conv_transpose2d,
    3: torch.nn.functional.conv_transpose3d,
}


@pytest.mark.parametrize("dtype", HALF)
@pytest.mark.parametrize(
    "xs,ws,kw",
    [
        ((1, 3, 4), (3, 3, 3), {"stride": 2, "padding": 2, "output_padding": 1}),
        ((1, 3, 4, 4), (3, 3, 3, 3), {"stride": 2, "padding": 2, "output_padding": 1}),
        (
            (2, 2, 4, 4),
            (2, 2, 4, 5),
            {"stride": (3, 2), "padding": (1, 2), "output_padding": (2, 3), "groups": 2, "dilation": (4, 4)},
        ),
        ((1, 3, 4, 4, 4), (3, 3, 3, 3, 3), {"stride": 2, "padding": 2, "output_padding": 1}),
        (
            (2, 2, 4, 4, 4),
            (2, 2, 4, 5, 6),
            {
                "stride": (3, 2, 1),
                "padding": (1, 2, 3),
                "output_padding": (2, 3, 1),
                "groups": 2,
                "dilation": (4, 4, 4),
            },
        ),
        ((2, 4, 5, 5), (4, 3, 3, 3), {"stride": 3, "padding": 4}),
    ],
)
@pytest.mark.parametrize("bias", [True, False])
def test_conv_transpose_half(dtype, xs, ws, kw, bias):
    x, w = seeded_randn(*xs, dtype=dtype), seeded_randn(*ws, seed=1, dtype=dtype)
    channels = ws[1] * kw.get("groups", 1)
    b = seeded_randn(channels, seed=2, dtype=dtype) if bias else None
    f = F_CT[len(xs) - 2]
    on_both(lambda d: f(x.to(d), w.to(d), None if b is None else b.to(d), **kw))
