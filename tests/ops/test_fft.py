"""jaxdev/ops/fft.py: the FFT kernels' out= (dtype, layout) and istft's gradient, against CPU PyTorch."""

from __future__ import annotations

import pytest
import torch
from jaxdev_testing import check, like_cpu, on_both

pytestmark = pytest.mark.usefixtures("no_fallback")  # tests/conftest.py

aten = torch.ops.aten


# --- FFT out=: CPU computes, resizes out and copy_'s the result in (a cast, whatever out's dtype) ----------------


_OUT_DTYPES = [torch.complex64, torch.complex128, torch.float32, torch.float64, torch.float16, torch.int32]


@pytest.mark.parametrize("out_dtype", _OUT_DTYPES)
def test_fft_c2c_out_like_cpu(out_dtype):
    x = torch.randn(5, 6, 4, dtype=torch.complex64, generator=torch.Generator().manual_seed(1))
    for out in (
        torch.empty(0, dtype=out_dtype),
        torch.empty(5, 6, 4, dtype=out_dtype),
        torch.empty(3, dtype=out_dtype),
    ):
        like_cpu(lambda d, o=out: aten._fft_c2c.out(x.to(d), [1], 1, False, out=o.clone().to(d)), rtol=1e-5, atol=1e-5)
    transposed = torch.empty(4, 6, 5, dtype=out_dtype).transpose(0, 2)
    like_cpu(lambda d: aten._fft_c2c.out(x.to(d), [0, 2], 2, True, out=transposed.clone().to(d)), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("out_dtype", _OUT_DTYPES)
@pytest.mark.parametrize("onesided", [True, False])
@pytest.mark.parametrize("shape", [(2, 3, 6), (2, 3, 2), (4, 3, 5)])
def test_fft_r2c_out_like_cpu(out_dtype, onesided, shape):
    # Two-sided into a real out: CPU mirrors the half it computed, which real dtypes cannot (NotImplementedError)
    # unless the last dim has at most 2 elements.
    y = torch.randn(shape, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
    like_cpu(
        lambda d: aten._fft_r2c.out(y.to(d), [0, 2], 2, onesided, out=torch.empty(0, dtype=out_dtype, device=d)),
        rtol=1e-5,
        atol=1e-5,
    )


@pytest.mark.parametrize("out_dtype", _OUT_DTYPES)
def test_fft_c2r_out_like_cpu(out_dtype):
    x = torch.randn(3, 5, dtype=torch.complex128, generator=torch.Generator().manual_seed(3))
    like_cpu(lambda d: aten._fft_c2r.out(x.to(d), [1], 2, 8, out=torch.empty(0, dtype=out_dtype, device=d)), atol=1e-5)


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
