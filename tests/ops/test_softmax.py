"""jaxdev/ops/softmax.py: log_softmax in half precision against CPU PyTorch."""

from __future__ import annotations

import pytest
import torch
from jaxdev_testing import on_both, seeded_randn

pytestmark = pytest.mark.usefixtures("no_fallback")  # tests/conftest.py

HALF = [torch.bfloat16, torch.float16]


# --- log_softmax over the last dim in half: CPU keeps the row's sum and its log in the half dtype ---


@pytest.mark.parametrize("dtype", HALF)
@pytest.mark.parametrize(
    "shape,dim", [((5, 5), 1), ((5, 5), 0), ((7, 40), -1), ((3, 100, 2), 1), ((2, 1000), 1), ((), 0)]
)
def test_log_softmax_half(dtype, shape, dim):
    x = seeded_randn(*shape, scale=4, dtype=dtype)
    on_both(lambda d: torch.log_softmax(x.to(d), dim))


# --- an empty dim: CPU's result is empty; jnp.max over it has no identity to start from ---


@pytest.mark.parametrize("dtype", HALF)
@pytest.mark.parametrize("fn", [torch.log_softmax, torch.softmax], ids=["log_softmax", "softmax"])
def test_half_softmax_over_an_empty_last_dim(fn, dtype):
    """The half last-dim log_softmax (CPU's lastdim kernel's roundings) raised jnp's ValueError."""
    on_both(lambda d: fn(torch.empty(3, 0, dtype=dtype, device=d), -1))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("shape,dim", [((3, 0), -1), ((0, 5), 0), ((2, 0, 3), 1), ((0, 4), -1)])
@pytest.mark.parametrize("fn", [torch.log_softmax, torch.softmax], ids=["log_softmax", "softmax"])
def test_own_softmax_over_an_empty_dim(fn, shape, dim, dtype, tpu_policy):
    """Where jaxdev's own functions are chosen (a TPU), softmax and log_softmax take the max of the dim
    themselves: an empty one raised jnp's ValueError (XLA's jax.nn.softmax starts from -inf)."""
    on_both(lambda d: fn(torch.empty(shape, dtype=dtype, device=d), dim))


# --- log_softmax's gradient computed once where its exp is jaxdev's own (a TPU) ---


def _barriers(fn, *arrays) -> int:
    import jax

    return jax.jit(fn).lower(*arrays).as_text().count("optimization_barrier")


def test_log_softmax_gradient_waits_behind_a_barrier_where_its_exp_is_jaxdevs(tpu_policy):
    """XLA's TPU compiler recomputed the gradient's own exp inside each product reading it (the LM
    head's two: 0.48 and 0.61 M estimated cycles, 0.28 and 0.32 M reading it); the barrier computes
    nothing, so the gradient keeps the bits it had without it, and CPU's tolerance."""
    import jax
    import jax.numpy as jnp

    from jaxdev.ops import softmax

    g, y = (jnp.asarray(seeded_randn(6, 40, seed=s).numpy()) for s in (1, 2))
    grad = jax.jit(lambda g, y: softmax._log_softmax_grad(g, y, 1, jnp.float32))
    assert _barriers(grad, g, y) == 1
    with_barrier = grad(g, y)
    open_grad = jax.jit(lambda g, y: (g - softmax.tm.exp(y) * jnp.sum(g, 1, keepdims=True)).astype(jnp.float32))
    assert _barriers(open_grad, g, y) == 0
    assert jnp.array_equal(with_barrier, open_grad(g, y))
    x = seeded_randn(6, 40, scale=4, dtype=torch.bfloat16)

    def input_grad(device):
        t = x.detach().to(device).requires_grad_()
        torch.log_softmax(t, -1)[:, 0].sum().backward()
        return t.grad

    on_both(input_grad, rtol=1.6e-2, atol=1e-2)  # bfloat16's: its own exp within an ulp of float32's


def test_log_softmax_gradient_stays_in_the_open_with_xlas_exp():
    import jax.numpy as jnp

    from jaxdev.ops import softmax

    if softmax.tm.own(jnp.float32):
        pytest.skip("this platform's exp is jaxdev's own")
    g = jnp.ones((3, 4), jnp.float32)
    assert _barriers(lambda g, y: softmax._log_softmax_grad(g, y, 1, jnp.float32), g, g) == 0
