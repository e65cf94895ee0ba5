"""A weight gradient's product kept apart from what consumes it where XLA's TPU compiler makes the
optimizer's update its output fusion (capabilities' `gradient_products_fuse_updates`, issue 37: the LM
step's tied embedding, 1.37 M estimated cycles in one fusion against jax.jit's 0.30 + 0.17 M). The
barrier computes nothing, so the values stay the bits the product had without it. The `tpu_policy`
fixture: tests/ops/conftest.py."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import pytest
import torch
from jaxdev_testing import JAX

from jaxdev.ops.kit import capabilities


def _linear_grads(x, w, g, where):
    """(input, weight) gradients of F.linear(x, w) against g, on `where`."""
    x, w = (t.detach().to(where).requires_grad_() for t in (x, w))
    torch.nn.functional.linear(x, w).backward(g.to(where))
    return [t.grad.cpu() for t in (x, w)]


def _cases():
    gen = torch.Generator().manual_seed(0)
    w = torch.randn(3, 8, generator=gen)
    x3, g3 = torch.randn(2, 5, 8, generator=gen), torch.randn(2, 5, 3, generator=gen)
    return [(x3, w, g3), (x3.reshape(10, 8), w, g3.reshape(10, 3))]  # rows unflattened, and plain rows


def _barriers(body, *shapes) -> int:
    arrays = [jnp.ones(shape, jnp.float32) for shape in shapes]
    return jax.jit(body).lower(*arrays).as_text().count("optimization_barrier")


@pytest.mark.tpu_fact("a weight gradient's product becomes its optimizer update's output fusion on a TPU")
def test_weight_gradient_products_wait_behind_a_barrier(tpu_policy, monkeypatch):
    from jaxdev.ops.linalg import products

    asked, body_for = [], products._body_for

    def spy(factory, dtype, *static):
        asked.append((factory.__name__, static))
        return body_for(factory, dtype, *static)

    monkeypatch.setattr(products, "_body_for", spy)
    for x, w, g in _cases():
        asked.clear()
        got = _linear_grads(x, w, g, JAX)
        # the forward's product and the input's gradient in the open, the weight's gradient apart
        assert asked == [("_product", ()), ("_product", (True,)), ("_product", ())]
        torch.testing.assert_close(got, _linear_grads(x, w, g, "cpu"))
    f32 = torch.float32
    assert _barriers(body_for(products._product, f32, True), (3, 10), (10, 8)) == 1
    assert _barriers(body_for(products._product_over_rows, f32), (2, 5, 3), (2, 5, 8)) == 1
    assert _barriers(body_for(products._product, f32), (10, 8), (8, 3)) == 0


def test_weight_gradient_products_keep_their_bits_behind_the_barrier(tpu_policy):
    """The barrier changes no bit: each gradient as the same program without it computes it."""
    from jaxdev.ops.kit import precision

    got = [_linear_grads(*case, JAX) for case in _cases()]
    with pytest.MonkeyPatch.context() as m:
        m.setitem(capabilities.PROGRAM_FACTS, capabilities.platform(), {})
        jax.clear_caches()
        want = [_linear_grads(*case, JAX) for case in _cases()]
        assert "optimization_barrier" not in jax.jit(precision.gradient_apart).lower(jnp.ones(3)).as_text()
    jax.clear_caches()
    for a, b in zip(got, want):
        assert all(torch.equal(u, v) for u, v in zip(a, b))


def test_weight_gradient_products_stay_in_the_open_elsewhere():
    from jaxdev.ops.kit import precision

    if capabilities.fact("gradient_products_fuse_updates"):
        pytest.skip("this platform keeps weight gradients' products apart")
    assert "optimization_barrier" not in jax.jit(precision.gradient_apart).lower(jnp.ones(3)).as_text()
