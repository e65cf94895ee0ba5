"""jaxdev/ops/conv.py: convolutions (transposed ones in half precision) against CPU PyTorch."""

from __future__ import annotations

import pytest
import torch
from jaxdev_testing import JAX, on_both, seeded_randn

from jaxdev.ops import conv
from jaxdev.ops.kit import capabilities

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
    if capabilities.fact("half_transposed_taps_abort"):  # rounded once there (a TPU): no farther from exact than CPU
        exact = f(x.double(), w.double(), None if b is None else b.double(), **kw)
        got = f(x.to(JAX), w.to(JAX), None if b is None else b.to(JAX), **kw).cpu().double()
        cpu = f(x, w, b, **kw).double()
        half_ulp = torch.finfo(dtype).eps * exact.abs() / 2
        assert ((got - exact).abs() <= (cpu - exact).abs().max() + half_ulp).all()
        return
    on_both(lambda d: f(x.to(d), w.to(d), None if b is None else b.to(d), **kw))


@pytest.mark.tpu_fact("CPU's tap-by-tap half transposed convolution aborted XLA's TPU compiler (SIGABRT)")
def test_a_half_transposed_convolution_rounds_once_where_its_taps_abort_the_compiler(monkeypatch):
    """output_padding >= stride sends CPU's float16 conv_transpose3d to slow_conv_transpose on every host;
    where the platform's compiler aborts on its emulation (the grouped, dilated case below killed the
    TPU stand-in's pytest), the product accumulates in float32 and rounds once: nearer the exact result
    than CPU's per-tap rounding."""
    here = capabilities.platform()
    facts = {**capabilities.PROGRAM_FACTS.get(here, {}), "half_transposed_taps_abort": "pretended"}
    monkeypatch.setitem(capabilities.PROGRAM_FACTS, here, facts)

    def no_taps(*args):
        raise AssertionError("the tap-by-tap emulation was chosen")

    monkeypatch.setattr(conv, "_slow_transposed", no_taps)
    x, w = seeded_randn(2, 2, 4, 4, 4, dtype=torch.float16), seeded_randn(2, 2, 4, 5, 6, seed=1, dtype=torch.float16)
    b = seeded_randn(4, seed=2, dtype=torch.float16)
    kw = {"stride": (3, 2, 1), "padding": (1, 2, 3), "output_padding": (2, 3, 1), "groups": 2, "dilation": (4, 4, 4)}
    got = F_CT[3](x.to(JAX), w.to(JAX), b.to(JAX), **kw).cpu().double()
    exact = F_CT[3](x.double(), w.double(), b.double(), **kw)
    cpu = F_CT[3](x, w, b, **kw).double()
    assert (got - exact).abs().max() <= (cpu - exact).abs().max()
