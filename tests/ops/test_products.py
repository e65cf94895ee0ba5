"""jaxdev/ops/linalg/products.py: products at the device's precision and addr's evaluation order, against CPU
PyTorch."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import pytest
import torch
import torch.nn.functional as F
from half_programs import program_hazards
from jaxdev_testing import JAX, assert_same, on_both, seeded_randn

from jaxdev.ops.kit import capabilities, product_precision, widened_product_precision
from jaxdev.ops.linalg import products as linalg

pytestmark = pytest.mark.usefixtures("no_fallback")  # tests/conftest.py


# --- products at the device's precision: half inputs accumulate in float32 and round once (CUDA's
# contract), float32 follows torch.set_float32_matmul_precision, everything else is exact --------------

P = jax.lax.Precision


@pytest.fixture
def matmul_precision():
    before = torch.get_float32_matmul_precision()
    yield torch.set_float32_matmul_precision
    torch.set_float32_matmul_precision(before)


def test_float32_precision_follows_the_setting_at_call_time(matmul_precision):
    f32 = jnp.dtype(jnp.float32)
    assert product_precision(f32) == (P.HIGHEST, None)  # PyTorch's default, "highest"
    for setting, expected in (("high", P.HIGH), ("medium", P.DEFAULT), ("highest", P.HIGHEST)):
        matmul_precision(setting)
        assert product_precision(f32) == (expected, None)
        body = linalg._product(f32, *product_precision(f32))
        hlo = body.lower(jnp.ones((4, 4), f32), jnp.ones((4, 4), f32)).as_text()
        # the lowered product carries the precision (DEFAULT is the absence of a precision config)
        assert (f"precision = [{expected.name}, {expected.name}]" in hlo) or (
            expected is P.DEFAULT and "HIGH" not in hlo
        )
    assert product_precision(jnp.dtype(jnp.float64)) == (P.HIGHEST, None)  # never lowered


def test_half_products_accumulate_in_float32(matmul_precision):
    matmul_precision("medium")  # the float32 setting does not touch half products
    # bfloat16 in one pass (exact for bfloat16 operands on a TPU), float16 in float32's passes: a TPU's
    # one pass would round its 11-bit significands to 8
    assert product_precision(jnp.dtype(jnp.bfloat16)) == (P.DEFAULT, jnp.dtype(jnp.float32))
    assert product_precision(jnp.dtype(jnp.float16)) == (P.HIGHEST, jnp.dtype(jnp.float32))


def test_widened_products_are_float32_products(matmul_precision):
    """Kernels that widen half inputs to float32 (attention, the transformer's fused ops) multiply at
    float32's setting: at the half dtype's, a TPU rounds the float32 operands to bfloat16 (an
    attention's bfloat16 gradient was 118x the tolerance off there)."""
    for dt in (jnp.bfloat16, jnp.float16, jnp.float32):
        assert widened_product_precision(jnp.dtype(dt)) == (P.HIGHEST, None)
    matmul_precision("medium")
    assert widened_product_precision(jnp.dtype(jnp.bfloat16)) == (P.DEFAULT, None)
    assert widened_product_precision(jnp.dtype(jnp.float64)) == (P.HIGHEST, None)


CASES = {
    "linear": (lambda x, w, b: F.linear(x, w, b), [(32, 64), (48, 64), (48,)]),
    "addmm": (lambda s, a, b: torch.addmm(s, a, b, beta=0.5, alpha=2.0), [(32, 48), (32, 64), (64, 48)]),
    "baddbmm": (lambda s, a, b: torch.baddbmm(s, a, b, beta=0.25, alpha=1.5), [(3, 8, 16), (3, 8, 24), (3, 24, 16)]),
    "bmm": (lambda a, b: torch.bmm(a, b), [(3, 8, 24), (3, 24, 16)]),
    "conv2d": (lambda x, w, b: F.conv2d(x, w, b, padding=1), [(2, 8, 9, 9), (16, 8, 3, 3), (16,)]),
}


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("case", list(CASES))
def test_half_products_match_cpu(case, dtype):
    fn, shapes = CASES[case]
    torch.manual_seed(0)
    inputs = [torch.randn(s, dtype=dtype) for s in shapes]
    expected = fn(*inputs)
    on_jax = [t.to(JAX).requires_grad_() for t in inputs]
    got = fn(*on_jax)
    # bfloat16 products round exactly as CPU's here; float16 within one unit in the last place.
    tol = {"rtol": 0.0, "atol": 0.0} if dtype == torch.bfloat16 else {"rtol": 1e-3, "atol": 1e-2}
    assert_same(got, expected, **tol)
    got.float().sum().backward()
    assert all(t.grad.dtype == dtype for t in on_jax)


def test_integer_addmm_takes_beta_and_alpha_as_integers():
    s, a, b = (torch.full(shape, v, dtype=torch.int32) for shape, v in (((1, 2), 10), ((1, 1), 3), ((1, 2), 7)))
    for beta, alpha in ((0.2, 0.6), (2, 3), (0, 1)):
        expected = torch.addmm(s, a, b, beta=beta, alpha=alpha)
        assert_same(torch.addmm(s.to(JAX), a.to(JAX), b.to(JAX), beta=beta, alpha=alpha), expected)


HALF = [torch.bfloat16, torch.float16]


# --- addr: CPU evaluates beta*self + (alpha*vec1)*vec2 left to right, rounding each half step ----------


@pytest.mark.parametrize("dtype", HALF)
def test_addr_half_rounds_every_step(dtype):
    s, a, b = (
        seeded_randn(50, 60, dtype=dtype, scale=100),
        seeded_randn(50, dtype=dtype, seed=1),
        seeded_randn(60, dtype=dtype, seed=2),
    )
    on_both(lambda d: torch.addr(s.to(d), a.to(d), b.to(d), beta=0.6, alpha=0.2))
    on_both(lambda d: torch.addr(s.to(d), a.to(d), b.to(d), alpha=0.2))  # beta 1 still rounds alpha*vec1 first
    out = torch.empty(50, 60, dtype=dtype)
    on_both(lambda d: torch.addr(s.to(d), a.to(d), b.to(d), beta=0.3, alpha=3, out=out.to(d)))


@pytest.mark.parametrize("dtype", [jnp.float16, jnp.bfloat16])
def test_addr_half_program_states_its_rounding(dtype):
    """Issue 41: beta * self and alpha * vec1 round by reduce_precision, not by float16 round trips,
    which LLVM turns into float16 arithmetic that a CPU with native float16 fuses (beta * self + prod
    in one rounding): test_addr_half_rounds_every_step failed there. beta and alpha, already the half's
    values, enter as float32 (no float64 -> half convert)."""
    s, v1, v2 = jnp.ones((5, 6), dtype), jnp.ones(5, dtype), jnp.ones(6, dtype)
    for use_self in (True, False):
        assert program_hazards(linalg._outer_update(jnp.dtype(dtype), use_self), s, v1, v2, 0.5, 0.25) == []


def test_addr_scalars_and_dtypes():
    nan = torch.full((2, 2), float("nan"), dtype=torch.float16)
    one = torch.ones(2, dtype=torch.float16)
    on_both(lambda d: torch.addr(nan.to(d), one.to(d), one.to(d), beta=1e-10, alpha=2))  # beta rounds to 0: NaN ignored
    u = torch.full((2, 2), 3, dtype=torch.uint8)
    on_both(lambda d: torch.addr(u.to(d), u[0].to(d), u[0].to(d), alpha=-1))  # wraps like CPU
    on_both(lambda d: torch.addr(u.to(d), u[0].to(d), u[0].to(d), alpha=300), match="without overflow")
    i = torch.ones(2, 2, dtype=torch.int32)
    on_both(lambda d: torch.addr(i.to(d), one.float().to(d), one.float().to(d), beta=0.5))  # promotes to float32
    on_both(lambda d: torch.addr(i.to(d), i[0].to(d), i[0].to(d), beta=0.5), match="must not be a floating point")
    on_both(
        lambda d: torch.addr(i.float().to(d), one.float().to(d), one.float().to(d), beta=True), match="Boolean beta"
    )
    t = torch.tensor([True, False, True])
    bools = torch.ones(3, 4, dtype=torch.bool)
    on_both(lambda d: torch.addr(bools.to(d), t.to(d), bools[0].to(d), beta=False))
    on_both(lambda d: torch.addr(bools.to(d), t.to(d), bools[0].to(d), alpha=2))
    on_both(lambda d: torch.addr(torch.ones(3, 5, device=d), torch.ones(3, device=d), torch.ones(4, device=d)))
    on_both(lambda d: torch.addr(torch.ones(3, 4, device=d), torch.ones(3, 1, device=d), torch.ones(4, device=d)))


@pytest.mark.parametrize("with_bias", [False, True])
def test_a_traced_product_keeps_the_rows_it_flattens_apart(with_bias):
    """Inside a traced program (fused eager's step, a compiled graph) F.linear's [batch, seq, k] input,
    flattened to rows for addmm/mm, is multiplied as the N-D array it is (kit.unflattened): XLA's TPU
    layouts then need no transpose copy around a head split (issue 37). The bits are the rows' product's."""
    from jaxdev import tensor

    x = seeded_randn(2, 3, 4).to(JAX)
    w = seeded_randn(5, 4, seed=1).to(JAX)
    b = seeded_randn(5, seed=2).to(JAX)
    box = tensor.box_of(x)
    stored = box.array

    def run(a):
        box.array = a
        try:
            rows = x.view(6, 4)
            out = torch.addmm(b, rows, w.t()) if with_bias else torch.mm(rows, w.t())
            return tensor.read(out)
        finally:
            box.array = stored

    jaxpr = jax.make_jaxpr(run)(stored)
    dots = [e for e in jaxpr.eqns if "dot_general" in str(e)]
    assert dots and "f32[2,3,4]" in str(dots[0])
    got = torch.tensor(jax.device_get(jax.jit(run)(stored)).tolist())
    rows = x.view(6, 4)  # the same product run eagerly, over the rows
    assert torch.equal(got, (torch.addmm(b, rows, w.t()) if with_bias else rows @ w.t()).cpu())


def _traced(x, fn):
    """(jaxpr, values) of `fn()` read inside a traced program in which x's storage is traced."""
    from jaxdev import tensor

    box = tensor.box_of(x)
    stored = box.array

    def run(a):
        box.array = a
        try:
            return tensor.read(fn())
        finally:
            box.array = stored

    return jax.make_jaxpr(run)(stored), torch.tensor(jax.device_get(jax.jit(run)(stored)).tolist())


def test_a_traced_product_keeps_a_transposed_results_rows_apart():
    """Attention's output [batch, heads, seq, d] is laid out [batch, seq, heads, d] (a box holding the
    logical value); transposed back and reshaped to [batch, seq, heads * d] for the projection, its
    rows are multiplied as [batch, seq, heads * d] (kit.unflattened): the rows' product made XLA's TPU
    compiler copy it twice into a row-major [batch * seq, heads * d] (issue 37). The eager result's
    values: the same bits on an AVX512 machine, an ulp apart on 24 of 36 elements on an AVX2 one (XLA's
    CPU dot orders a 3-D product's sums by its vector width)."""
    x = seeded_randn(2, 3, 4, 5).to(JAX)  # [batch, seq, heads, d]
    w = seeded_randn(6, 20, seed=1).to(JAX)

    def proj():
        att = x.transpose(1, 2) * 2  # [batch, heads, seq, d], stored in x's order
        return F.linear(att.transpose(1, 2).reshape(2, 3, 20), w)

    jaxpr, got = _traced(x, proj)
    dots = [e for e in jaxpr.eqns if "dot_general" in str(e)]
    assert dots and "f32[2,3,20]" in str(dots[0])
    torch.testing.assert_close(got, proj().cpu())


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_a_traced_weight_gradient_contracts_the_rows_unflattened(dtype):
    """A linear layer's weight gradient, input rows transposed times output gradient rows (autograd's mm
    backward), is contracted over the leading [batch, seq] dims of both (kit.matmul_over_rows), as a
    hand-written jax.jit step's is: the flattened rows made XLA's TPU compiler copy the input into a
    [batch * seq, k] layout (issue 37). Same bits as the rows' product."""
    x = seeded_randn(2, 3, 9).to(dtype).to(JAX)  # [:, :, :4] the input, [:, :, 4:] the output gradient

    def weight_grad():
        inputs, grads = x[..., :4].contiguous(), x[..., 4:].contiguous()
        return grads.view(6, 5).t() @ inputs.view(6, 4)

    jaxpr, got = _traced(x, weight_grad)
    dots = [e for e in jaxpr.eqns if "dot_general" in str(e)]
    assert dots and "dimension_numbers=(([0, 1], [0, 1]), ([], []))" in str(dots[0])
    assert torch.equal(got.to(dtype), weight_grad().cpu())


def _multiplies(jaxpr) -> int:
    return sum(1 for line in str(jaxpr).splitlines() if " = mul " in line)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_addmm_by_unit_factors_multiplies_by_nothing(dtype):
    """F.linear's addmm (beta = alpha = 1, integers) multiplies its product and bias by no runtime scalar:
    a real number times the integer 1 is itself, and inside a traced program those multiplications kept
    XLA's TPU compiler from fusing the residual add's float32 convert into a linear layer's product (12
    unfused converts of [batch * seq, d] in the LM step, issue 37). Other factors are still applied."""
    x = seeded_randn(2, 3, 4).to(dtype).to(JAX)
    w, b = seeded_randn(5, 4, seed=1).to(dtype).to(JAX), seeded_randn(5, seed=2).to(dtype).to(JAX)
    jaxpr, got = _traced(x, lambda: F.linear(x, w, b))
    assert _multiplies(jaxpr) == 0
    assert torch.equal(got.to(dtype), F.linear(x, w, b).cpu())
    scaled = lambda: torch.addmm(b, x.view(6, 4), w.t(), beta=2, alpha=0.5)
    jaxpr, got = _traced(x, scaled)
    assert _multiplies(jaxpr) == 2
    assert torch.equal(got.to(dtype), scaled().cpu())


@pytest.mark.tpu_fact("a weight gradient's product fused its output gradient's producer in, tiled badly")
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_a_traced_weight_gradient_reads_its_output_gradient_behind_a_barrier_on_a_tpu(dtype, tpu_policy):
    """Where capabilities' `gradient_producers_fuse_into_products` holds, the output gradient waits
    behind an optimization barrier before the weight gradient's product (kit.matmul_over_rows): XLA's
    TPU compiler fused its producer, the qkv projection's concatenated q, k, v gradients, into the
    product with the AdamW update at kernel window 4 (0.204 M estimated cycles a layer, 0.061 M so;
    issue 37). The barrier computes nothing: the same bits as without it, and as CPU's."""
    x = seeded_randn(2, 3, 9).to(dtype).to(JAX)

    def weight_grad():  # the output gradient a concatenation, as attention's split gives it back
        q, k = x[..., :4].contiguous(), x[..., 4:].contiguous()
        return torch.cat([k, q], -1).view(6, 9).t() @ q.view(6, 4)

    jaxpr, got = _traced(x, weight_grad)
    barriers = [e for e in _eqns(jaxpr.jaxpr) if e.primitive.name == "optimization_barrier"]
    assert len(barriers) == 1 and barriers[0].outvars[0].aval.shape == (2, 3, 9)
    # the policy's own copy of the TPU's facts (put back after the test), without this one
    del capabilities.PROGRAM_FACTS[capabilities.platform()]["gradient_producers_fuse_into_products"]
    jax.clear_caches()
    jaxpr, open_grad = _traced(x, weight_grad)
    assert "optimization_barrier" not in str(jaxpr)
    assert torch.equal(got, open_grad)


def _eqns(jaxpr):
    """jaxpr's equations and those of the programs it calls (the kernels' jitted bodies)."""
    for e in jaxpr.eqns:
        yield e
        for sub in jax.core.jaxprs_in_params(e.params):
            yield from _eqns(sub)


def test_a_traced_weight_gradient_reads_its_output_gradient_in_the_open_elsewhere():
    if capabilities.fact("gradient_producers_fuse_into_products"):
        pytest.skip("this platform keeps the output gradient behind a barrier")
    x = seeded_randn(2, 3, 9).to(JAX)
    jaxpr, _ = _traced(x, lambda: x.view(6, 9).t() @ x.view(6, 9))
    assert "optimization_barrier" not in str(jaxpr)
