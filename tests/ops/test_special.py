"""jaxdev/ops/special/: special functions, polygamma, zeta, i0e, against CPU PyTorch."""

from __future__ import annotations

import jax.numpy as jnp
import pytest
import torch
from jaxdev_testing import JAX, assert_same, check, like_cpu

from jaxdev import dtypes

pytestmark = pytest.mark.usefixtures("no_fallback")  # tests/conftest.py

aten = torch.ops.aten


# --- polygamma_: in place the arguments come the other way round ---------------------------------------------


@pytest.mark.parametrize("n", [0, 1, 2, 3])
def test_polygamma_inplace_like_cpu(n):
    x = torch.rand(20, generator=torch.Generator().manual_seed(n)) * 4 + 0.25

    def run(d):
        t = x.clone().to(d)
        r = t.polygamma_(n)
        assert r is t
        return t

    like_cpu(run, rtol=1e-5, atol=1e-6)
    like_cpu(lambda d: aten.polygamma_(x.to(torch.float64).to(d), n), rtol=1e-10, atol=1e-12)


def test_polygamma_inplace_errors_like_cpu():
    like_cpu(lambda d: torch.arange(3, device=d).polygamma_(1))  # float result into int64: RuntimeError
    x = torch.tensor([0.5, 1.5, 3.0])
    like_cpu(lambda d: x.clone().to(d).polygamma_(-1))
    like_cpu(lambda d: x.half().to(d).polygamma_(0), rtol=1e-3, atol=1e-3)


def _edges(dtype=torch.float32):
    """Ordinary values plus the ones special functions get wrong: poles, signed zeros, infinities, NaN."""
    return torch.cat(
        [
            torch.randn(12, dtype=dtype, generator=torch.Generator().manual_seed(0)) * 3,
            torch.tensor([0.0, -0.0, -1.0, -2.0, 1.0, 2.0, float("inf"), -float("inf"), float("nan")], dtype=dtype),
        ]
    )


SPECIAL = {
    "i0": torch.special.i0,
    "i0e": torch.special.i0e,
    "i1": torch.special.i1,
    "i1e": torch.special.i1e,
    "entr": torch.special.entr,
    "erfcx": torch.special.erfcx,
    "log_ndtr": torch.special.log_ndtr,
    "ndtri": lambda t: torch.special.ndtri(torch.sigmoid(t)),
    "digamma": torch.digamma,
    "lgamma": torch.lgamma,
    "sinc": torch.sinc,
    "mvlgamma": lambda t: torch.mvlgamma(t.abs() + 2, 3),
    "xlogy": lambda t: torch.xlogy(t, t.abs() + 0.5),
    "xlogy_scalar_self": lambda t: torch.xlogy(2.0, t.abs()),
    "xlog1py": lambda t: torch.special.xlog1py(t, t.abs()),
}


@pytest.mark.parametrize("name", list(SPECIAL))
def test_special_function_like_cpu(name):
    x = _edges()
    finite = x[x.isfinite()]
    # Forward on every edge value; gradients on finite ones only (CPU's own gradient at a pole is
    # whatever its formula yields, which is not what this test is about).
    check(SPECIAL[name], x, grad=False, rtol=1e-5, atol=1e-6)
    check(SPECIAL[name], finite[finite.abs() > 0.1], rtol=1e-4, atol=1e-5)


def test_special_function_float64_like_cpu():
    x = _edges(torch.float64)
    for name in ("i0", "i1e", "erfcx", "log_ndtr", "digamma", "lgamma", "entr"):
        check(SPECIAL[name], x, grad=False, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_hurwitz_zeta_and_polygamma_like_cpu(dtype):
    """Cephes' summation, negative q included (where JAX's own zeta is off or NaN)."""
    q = torch.tensor([-7.5, -5.0, -2.3, -0.0, 0.2, 1.0, 3.7, 50.0, -1000.5, float("inf"), float("nan")], dtype=dtype)
    x = torch.tensor([0.5, 1.0, 1.5, 2.0, 3.0, 4.5, 7.0, -1.0, 2.0, float("inf"), 3.0], dtype=dtype)
    tight = dict(rtol=1e-12, atol=1e-20) if dtype == torch.float64 else dict(rtol=2e-6, atol=0)
    check(torch.special.zeta, x[:, None], q[None, :], grad=False, **tight)
    check(lambda t: torch.special.zeta(3.0, t), q, grad=False, **tight)
    for n in range(5):
        check(lambda t, n=n: torch.polygamma(n, t), q, grad=False, **tight)
    # Gradients: digamma's is polygamma(1), polygamma(n)'s is polygamma(n + 1), zeta's is zeta(x + 1).
    smooth = torch.tensor([0.3, 1.7, 4.0, -2.5], dtype=dtype)
    check(lambda t: torch.polygamma(2, t), smooth, **tight)
    check(lambda t: torch.special.zeta(torch.full_like(t, 2.5), t), smooth.abs(), **tight)


def test_polygamma_negative_order_raises_like_cpu():
    with pytest.raises(RuntimeError, match="does not support negative n"):
        torch.polygamma(-1, torch.ones(2, device=JAX))


def test_digamma_signed_zero_poles():
    out = torch.digamma(torch.tensor([0.0, -0.0], device=JAX)).cpu()
    assert out.tolist() == [-float("inf"), float("inf")]


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


@pytest.mark.parametrize("dtype", HALF)
def test_i0e_half_program_states_its_rounding(dtype):
    """Issue 41: the scalar path rounds every step by reduce_precision, not by a float16 round trip,
    which LLVM turns into float16 arithmetic and a CPU with native float16 fuses (y * b1 - b2 in one
    rounding): 13 half i0e tests failed there."""
    from half_programs import program_hazards

    from jaxdev.ops.special import i0e

    x = jnp.ones((37, 70), dtypes.to_jax_dtype(dtype))
    for strides in ((70, 1), (1, 37)):
        assert program_hazards(i0e._i0e_half(dtype, (37, 70), strides, 1), x) == []


@pytest.mark.per_op_mode("fused mode traces the kernel into its program: the one-program sum, no rounds")
def test_zeta_with_a_far_negative_q_sums_only_its_own_terms_as_cpu(monkeypatch):
    """A q far below zero takes ~|q| direct terms (CPU's loop too); jax summed them over every element of
    the tensor (10-30x CPU's time, a timeout under the auditor's fast-compile flags). Eagerly, the rounds
    after the first gather the elements still summing; the values are the one-program sum's, bit for bit."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    from jaxdev.ops.special import zeta as module

    sizes = []
    original = module._round
    monkeypatch.setattr(module, "_round", lambda x, *rest: (sizes.append(x.shape[0]), original(x, *rest))[1])
    q = torch.linspace(0.5, 40.0, 64, dtype=torch.float64)
    q[5], q[40] = -30000.25, -12000.5
    x = torch.full_like(q, 3.0)
    summed = torch.special.zeta(x.to(JAX), q.to(JAX)).cpu()
    assert sizes[0] == 64 and set(sizes[1:]) <= {1, 2} and len(sizes) <= 6
    torch.testing.assert_close(summed, torch.special.zeta(x, q), rtol=1e-12, atol=0)
    in_one_program = jax.jit(module._hurwitz_zeta)(jnp.asarray(x.numpy()), jnp.asarray(q.numpy()))
    assert torch.equal(summed, torch.from_numpy(np.asarray(in_one_program)))  # what compiled programs run


@pytest.mark.parametrize("n", [2, 3, 5, 7, 10])
def test_polygamma_takes_n_factorial_as_cpu(n):
    """CPU's polygamma multiplies by std::exp(std::lgamma(n + 1)) (not exactly n!): JAX's gammaln put
    float64 results 1-3 ulps off CPU's."""
    x = torch.linspace(0.3, 7.7, 25, dtype=torch.float64)
    assert torch.equal(torch.polygamma(n, x.to(JAX)).cpu(), torch.polygamma(n, x))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_zeta_of_half_dtypes_is_refused_as_cpu(dtype):
    """CPU's zeta kernel serves float and double only (jax served half ones)."""
    for d in ("cpu", JAX):
        with pytest.raises(NotImplementedError, match=r"^\"zeta_cpu\" not implemented for '(Half|BFloat16)'$"):
            torch.special.zeta(torch.ones(2, dtype=dtype, device=d), 2.0)


def _pow_of_magnitude(usual, ctx, x, y, **params):
    """float64 pow as a TPU v5e's emulated one computed it: |x|^y, a negative base's sign lost
    (benchmarks/tpu_probe_zeta.py: (-1.5)^-3 came out +0.296)."""
    import jax.numpy as jnp
    import numpy as np
    from jax._src.interpreters import mlir

    if ctx.avals_out[0].dtype != np.float64:
        return usual(ctx, x, y, **params)
    aval = ctx.avals_in[0]
    (magnitude,) = mlir.lower_fun(jnp.abs, multiple_results=False)(
        ctx.replace(primitive=None, avals_in=[aval], avals_out=[aval]), x
    )
    return usual(ctx, magnitude, y, **params)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_polygamma_of_negative_x_needs_no_negative_base_pow(dtype):
    """polygamma(n >= 2) at a negative non-integer x: the zeta's direct terms (x + k)^-(n + 1) of a
    negative base are |x + k|^-(n + 1) signed, not pow's (a TPU's float64 pow lost the sign: OpInfo's
    polygamma_n_2 was 9.05 relative off on a v5e, 2,733 on the probe's inputs). Here pow is lowered
    as the TPU's was; on a TPU its own pow is under test (float64 there within 9.3e-11 of CPU's)."""
    import tpu_emulation
    from jax import lax

    x = torch.cat([torch.linspace(-8.5, 8.4, 60), torch.tensor([-0.5, -2.9999, -7.25, -1e-4])]).to(dtype)
    tolerance = dict(rtol=1e-9, atol=0) if dtype == torch.float64 else dict(rtol=2e-6, atol=0)
    with tpu_emulation._relowered({lax.pow_p: _pow_of_magnitude}):
        for n in (2, 3):
            torch.testing.assert_close(torch.polygamma(n, x.to(JAX)).cpu(), torch.polygamma(n, x), **tolerance)
