"""ormqr's gradients on jax are laid out as CPU lays them out, for every input layout.

PyTorch's householder_product_backward (reached by ormqr_backward) builds the reflectors' gradient
with zeros_like(input) and fills it column by column, so the gradient keeps the input's layout (geqrf's
column-major reflectors give a column-major gradient). Only when a tensor subclass or a Python
dispatch mode is present does it take its out-of-place branch, which concatenates columns into a
contiguous gradient; the auditor once took CPU's strides from that branch (it traces CPU under a
TorchDispatchMode) and reported a stride mismatch that a program never sees."""

from __future__ import annotations

import itertools

import pytest
import torch
from jaxdev_testing import JAX, assert_same

pytestmark = pytest.mark.usefixtures("no_fallback")  # tests/conftest.py

TOL = {torch.float32: 1e-4, torch.float64: 1e-10, torch.complex64: 1e-4, torch.complex128: 1e-10}


def _layout(a: torch.Tensor, name: str, device) -> torch.Tensor:
    """`a`'s values on `device` as geqrf lays them out (column-major), row-major, or as a strided
    slice of a wider tensor, a leaf that requires grad."""
    if name == "sliced":
        wide = torch.zeros(*a.shape[:-1], 2 * a.shape[-1], dtype=a.dtype, device=device)
        wide[..., ::2] = a.to(device)
        leaf = wide[..., ::2]
    else:
        leaf = (a if name == "geqrf" else a.contiguous()).detach().to(device)
    return leaf.requires_grad_()


def _grads(reflectors, tau, other, left, transpose, seed, device, layout="geqrf", create_graph=False):
    leaves = [_layout(reflectors, layout, device), _layout(tau, "geqrf", device), _layout(other, "geqrf", device)]
    out = torch.ormqr(*leaves, left=left, transpose=transpose)
    return leaves[0].stride(), torch.autograd.grad(out, leaves, seed.to(device), create_graph=create_graph)


@pytest.mark.parametrize("dtype", list(TOL))
@pytest.mark.parametrize("batch", [(), (2,)])
def test_ormqr_gradients_have_cpus_strides(dtype, batch):
    torch.manual_seed(0)
    for (m, n), left, transpose in itertools.product([(5, 5), (5, 3)], (True, False), (True, False)):
        reflectors, tau = torch.geqrf(torch.randn(*batch, m, n, dtype=dtype))
        other = torch.randn(*batch, m, 4, dtype=dtype) if left else torch.randn(*batch, 4, m, dtype=dtype)
        seed = torch.randn(other.shape, dtype=dtype)
        for layout in ("geqrf", "contiguous", "sliced"):
            laid, cpu = _grads(reflectors, tau, other, left, transpose, seed, "cpu", layout)
            laid_jax, dev = _grads(reflectors, tau, other, left, transpose, seed, JAX, layout)
            assert laid_jax == laid
            for i, (d, c) in enumerate(zip(dev, cpu)):
                where = f"grad {i}, {layout} reflectors {laid}, left={left}, transpose={transpose}"
                assert_same(d, c, rtol=TOL[dtype], atol=TOL[dtype], check_stride=True, msg=where)


def test_ormqr_gradients_for_double_backward_have_cpus_strides():
    # create_graph=True: the formula keeps its reflector updates out of place, still into zeros_like(input)
    torch.manual_seed(1)
    reflectors, tau = torch.geqrf(torch.randn(5, 5, dtype=torch.float64))
    other, seed = torch.randn(5, 5, dtype=torch.float64), torch.randn(5, 5, dtype=torch.float64)
    _, cpu = _grads(reflectors, tau, other, True, True, seed, "cpu", create_graph=True)
    _, dev = _grads(reflectors, tau, other, True, True, seed, JAX, create_graph=True)
    assert cpu[0].stride() == (1, 5)  # the input's (geqrf's) layout, not a contiguous one
    for i, (d, c) in enumerate(zip(dev, cpu)):
        assert_same(d.detach(), c.detach(), rtol=1e-10, atol=1e-10, check_stride=True, msg=f"grad {i}")
