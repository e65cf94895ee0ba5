"""jaxdev/ops/reductions/: reductions and products, logsumexp, equal, against CPU PyTorch."""

from __future__ import annotations

import math

import pytest
import torch
from jaxdev_testing import JAX, assert_same, check, on_both

from jaxdev import dtypes


def test_logsumexp_gradient_as_on_cpu():
    grads = []
    for device in ("cpu", JAX):
        x = torch.randn(3, 4, generator=torch.Generator().manual_seed(1)).to(device).requires_grad_()
        torch.logsumexp(x, 1).pow(2).sum().backward()
        grads.append(x.grad)
    assert_same(grads[1], grads[0], rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("source", [torch.float16, torch.float32, torch.int64])
@pytest.mark.parametrize("out_dtype", [torch.float32, torch.float64])
def test_logsumexp_into_a_wider_out_computes_in_its_dtype(source, out_dtype):
    """CPU sums, logs and adds in out's dtype: computing in the input's and casting lost precision."""
    x = torch.randn(1000, generator=torch.Generator().manual_seed(0)) * 3
    outs = [
        torch.logsumexp(x.to(source).to(d), 0, out=torch.empty((), dtype=out_dtype, device=d)) for d in ("cpu", JAX)
    ]
    assert_same(outs[1], outs[0], rtol=1e-9 if out_dtype == torch.float64 else 1e-6)


REDUCTIONS = {
    "nansum": (lambda t: torch.nansum(t, dim=1), torch.tensor([[1.0, float("nan"), 2.0], [float("nan")] * 3])),
    "count_nonzero": (torch.count_nonzero, torch.tensor([[0, 1, 2], [0, 0, 3]])),
    "count_nonzero_dims": (lambda t: torch.count_nonzero(t, dim=(0, 2)), (torch.randn(3, 4, 5) > 0).float()),
    "aminmax": (lambda t: torch.aminmax(t, dim=0, keepdim=True), torch.randn(4, 5)),
    "aminmax_all": (torch.aminmax, torch.randint(-9, 9, (4, 5))),
    "trace": (torch.trace, torch.randn(4, 6)),
    "trace_int": (torch.trace, torch.randint(-9, 9, (5, 3), dtype=torch.int32)),
    "vdot_complex": (torch.vdot, torch.randn(7, dtype=torch.complex64), torch.randn(7, dtype=torch.complex64)),
    "addmv": (
        lambda s, m, v: torch.addmv(s, m, v, beta=0.5, alpha=2.0),
        torch.randn(4),
        torch.randn(4, 3),
        torch.randn(3),
    ),
    "addmv_beta0_nan": (
        lambda s, m, v: torch.addmv(s, m, v, beta=0),
        torch.full((4,), float("nan")),
        torch.randn(4, 3),
        torch.randn(3),
    ),
}


@pytest.mark.usefixtures("no_fallback")
@pytest.mark.parametrize("name", list(REDUCTIONS))
def test_reduction_and_product_like_cpu(name):
    fn, *inputs = REDUCTIONS[name]
    check(fn, *inputs, rtol=1e-5, atol=1e-5)


@pytest.mark.usefixtures("no_fallback")
def test_equal_promotes_and_nan_is_unequal():
    x = torch.tensor([1, 2], device=JAX)
    assert torch.equal(x, torch.tensor([1.0, 2.0], device=JAX))
    assert not torch.equal(torch.tensor([float("nan")], device=JAX), torch.tensor([float("nan")], device=JAX))
    assert not torch.equal(torch.ones(2, 3, device=JAX), torch.ones(3, 2, device=JAX))


@pytest.mark.usefixtures("no_fallback")
@pytest.mark.skipif(not dtypes._X86, reason="CPU PyTorch's conversion was measured (and is emulated) on x86")
def test_reductions_with_an_integer_dtype_convert_as_cpu():
    x = torch.tensor([[300.5, -1.0, 1e10], [70000.0, math.nan, -40000.0]], dtype=torch.complex128)
    for dt in (torch.int16, torch.uint8, torch.int32):
        on_both(lambda d, dt=dt: x.to(d).sum(dtype=dt))
        on_both(lambda d, dt=dt: x.to(d).sum(0, dtype=dt))
        on_both(lambda d, dt=dt: x.real.to(d).cumsum(1, dtype=dt))
    on_both(lambda d: torch.tensor(3e9, dtype=torch.float32, device=d).cumsum(-1, dtype=torch.int32))


# --- sum/prod out=, mul by a bool, masked_fill's scalar ------------------------------------------------


@pytest.mark.usefixtures("no_fallback")
@pytest.mark.parametrize(
    "fn",
    [
        lambda d: torch.sum(
            torch.ones(3, 2, device=d, dtype=torch.int32),
            1,
            dtype=torch.int8,
            out=torch.empty(3, dtype=torch.complex64, device=d),
        ),
        lambda d: torch.sum(torch.ones(3, 2, device=d), 1, dtype=torch.float64, out=torch.empty(3, device=d)),
        lambda d: torch.prod(torch.ones(3, 2, device=d), 1, dtype=torch.int8, out=torch.empty(3, device=d)),
        lambda d: torch.sum(torch.tensor(1 + 2j, device=d), 0, out=torch.empty(0, device=d)),
        lambda d: torch.sum(
            torch.full((2, 3), 100.7, dtype=torch.float16, device=d), 1, out=torch.empty((), dtype=torch.int8, device=d)
        ),
        lambda d: torch.prod(torch.full((2, 3), 1 + 1j, device=d), 1, out=torch.empty(2, device=d)),
        lambda d: torch.sum(torch.full((2, 3), 0.5, device=d), 1, out=torch.empty(2, dtype=torch.bool, device=d)),
    ],
)
def test_sum_and_prod_out_take_outs_dtype_and_check_dtype(fn):
    on_both(fn)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("keepdim", [False, True])
def test_a_traced_sum_over_flattened_rows_keeps_them_apart(dtype, keepdim):
    """Inside a traced program (fused eager's step, a compiled graph) a sum over dim 0 of a 2-D tensor
    that is all of an N-D array (the bias gradient of F.linear over [batch, seq, k]: autograd sums
    addmm's [batch * seq, k] gradient) sums that array over its leading dims: over the flattened rows
    XLA's TPU compiler copied the gradient into a row-major layout first (issue 37). Same bits."""
    import jax

    from jaxdev import tensor

    x = (torch.randn(2, 3, 4, generator=torch.Generator().manual_seed(0)) * 10).to(dtype).to(JAX)
    box = tensor.box_of(x)
    stored = box.array

    def run(a):
        box.array = a
        try:
            return tensor.read(x.view(6, 4).sum(0, keepdim=keepdim))
        finally:
            box.array = stored

    jaxpr = jax.make_jaxpr(run)(stored)
    sums = [e for e in jaxpr.jaxpr.eqns if "reduce_sum" in str(e)]
    assert sums and "[2,3,4]" in str(sums[0]) and "axes=(0, 1)" in str(sums[0])
    got = torch.tensor(jax.device_get(jax.jit(run)(stored)).astype("float32").tolist()).to(dtype)
    assert torch.equal(got, x.view(6, 4).sum(0, keepdim=keepdim).cpu())


@pytest.mark.tpu_fact("XLA's TPU pow is exp(e log x) with its exp and log (transcendentals.py's docstring)")
@pytest.mark.parametrize("ord", [2, 1, 3, 0.5, -1.5])
def test_vector_norm_takes_no_xla_pow_where_jaxdevs_functions_are_chosen(ord, tpu_policy, tpu_division, tpu_functions):
    """vector_norm's root was `** (1 / ord)`, XLA's pow, and a fractional order's power too: with XLA's
    functions 1,000 ulps off (tests/tpu_functions.py) torch.norm, F.normalize, cosine_similarity, dist
    were 1,000-2,000 ulps (normwise) from CPU here. Where jaxdev's functions are chosen the 2-norm's
    root is a square root and the 1-norm's none, as CPU's kernel has them, other orders jaxdev's pow."""
    x = torch.rand(50, 40, generator=torch.Generator().manual_seed(2)) * 6 - 3
    want = torch.linalg.vector_norm(x, ord, 1)
    got = torch.linalg.vector_norm(x.to(JAX), ord, 1).cpu()
    torch.testing.assert_close(got, want, rtol=4 * 2.0**-23, atol=0)
