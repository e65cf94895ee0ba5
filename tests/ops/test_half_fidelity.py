"""Half-precision fidelity: kernels whose float16/bfloat16 results CPU rounds in its own way, each
compared with CPU bit for bit (or within the stated tolerance) with JAXDEV_FALLBACK=error."""

from __future__ import annotations

import pytest
import torch
from jaxdev_testing import JAX, assert_same

pytestmark = pytest.mark.usefixtures("no_fallback")  # tests/conftest.py

HALF = [torch.float16, torch.bfloat16]


def _gen(seed=0):
    return torch.Generator().manual_seed(seed)


# --- special.i0e: CPU's scalar op computes in the half dtype, its vector op in float32 -------------

_I0E_VIEWS = {
    "contiguous": lambda b: b,
    "0-dim": lambda b: b[0, 0],
    "63 elements": lambda b: b.flatten()[:63],
    "transposed": lambda b: b.t(),
    "strided": lambda b: b[:, ::2],
    "row slice": lambda b: b[:, :50],
    "row step": lambda b: b[::2],
    "expanded rows": lambda b: b[:1].expand(5, 70),
    "expanded columns": lambda b: b[:, :1].expand(37, 40),
    "transposed slice": lambda b: b.t()[:, 3:40],
}


@pytest.mark.parametrize("view", list(_I0E_VIEWS))
@pytest.mark.parametrize("dtype", HALF)
def test_i0e_half_as_cpu_loop(dtype, view):
    base = (torch.randn(37, 70, generator=_gen()) * 8).to(dtype)
    edges = torch.tensor([0.0, -0.0, 8.0, -8.0, 7.99, 8.01, float("inf"), -float("inf"), float("nan"), 1e-4, 500.0])
    base.view(-1)[: edges.numel()] = edges.to(dtype)
    f = _I0E_VIEWS[view]
    assert_same(torch.special.i0e(f(base.to(JAX))), torch.special.i0e(f(base)))


@pytest.mark.parametrize("n", [1, 5, 31, 32, 33, 63, 64, 100, 40001])
@pytest.mark.parametrize("dtype", [*HALF, torch.float32, torch.float64])
def test_i0e_lengths_as_cpu(dtype, n):
    x = (torch.randn(n, generator=_gen(n)) * 9).to(dtype)
    assert_same(torch.special.i0e(x.to(JAX)), torch.special.i0e(x))


@pytest.mark.parametrize("dtype", HALF)
def test_i0e_backward_as_cpu(dtype):
    x = (torch.randn(5, generator=_gen(3)) * 4).to(dtype)
    g = torch.randn(5, generator=_gen(4)).to(dtype)
    grads = []
    for device in ("cpu", JAX):
        xx = x.to(device).requires_grad_()
        (grad,) = torch.autograd.grad(torch.special.i0e(xx), xx, g.to(device))
        grads.append(grad)
    assert_same(grads[1], grads[0])


# --- reflection/replication pad backward: CPU adds in the output's order, rounding each sum ---------

_PADS = [
    ((5, 6, 4, 4), (5, -4, -4, 3), "replicate"),  # OpInfo pad.replicate_negative: 15 gradients into one
    ((2, 3, 7, 9), (3, 2, 1, 4), "replicate"),
    ((2, 3, 7), (4, 5), "replicate"),
    ((2, 2, 4, 5, 6), (3, 1, 2, 2, 1, 3), "replicate"),
    ((2, 3, 7, 9), (3, 2, 1, 4), "reflect"),
    ((2, 3, 4, 5, 6), (2, 1, 3, 2, 1, 3), "reflect"),
    ((4, 5, 6), (1, 1, 1, 1), "reflect"),
]


@pytest.mark.parametrize("case", range(len(_PADS)))
@pytest.mark.parametrize("dtype", [*HALF, torch.float32])
def test_pad_backward_as_cpu(dtype, case):
    shape, pad, mode = _PADS[case]
    x = torch.randn(shape, generator=_gen(case)).to(dtype)
    grads = []
    for device in ("cpu", JAX):
        xx = x.to(device).requires_grad_()
        y = torch.nn.functional.pad(xx, pad, mode=mode)
        g = torch.randn(y.shape, generator=_gen(100 + case)).to(dtype).to(device)
        grads.append(torch.autograd.grad(y, xx, g)[0])
    if dtype == torch.float32:
        assert_same(grads[1], grads[0], rtol=1e-6, atol=1e-6)
    else:
        assert_same(grads[1], grads[0])


# --- pow_(Scalar): the in-place of pow.Tensor_Scalar (its name pairs it with pow.Scalar) ----------


@pytest.mark.parametrize("exponent", [0.3, -0.5, 0.5, -1.0, 2.0, 3.0, -2.0, 1.5])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
def test_pow_inplace_scalar_as_out_of_place(dtype, exponent):
    # 128 elements: CPU's vector loop covers them all, so the values do not depend on its scalar tail
    x = (torch.rand(128, generator=_gen(7)) * 10 + 0.5).to(dtype)
    tol = {"rtol": 1e-6} if dtype == torch.float32 else {}  # float32 std::pow vs XLA's: an ulp
    assert_same(x.to(JAX).pow(exponent), x.pow(exponent), **tol)
    inplace = x.to(JAX)
    inplace.pow_(exponent)
    assert_same(inplace, x.clone().pow_(exponent), **tol)


def test_pow_inplace_scalar_checks_as_cpu():
    with pytest.raises(RuntimeError, match="can't be cast"):
        torch.arange(1, 4, device=JAX).pow_(0.5)
    x = torch.arange(1, 4, device=JAX)
    x.pow_(2)
    assert_same(x, torch.arange(1, 4) ** 2)
