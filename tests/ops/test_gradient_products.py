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

import jaxdev
from jaxdev.ops.kit import capabilities


def _linear_grads(x, w, g, where):
    """(input, weight) gradients of F.linear(x, w) against g, on `where`."""
    x, w = (t.detach().to(where).requires_grad_() for t in (x, w))
    torch.nn.functional.linear(x, w).backward(g.to(where))
    return [t.grad.cpu() for t in (x, w)]


def _cases():
    """A 3-D input (traced: its rows unflattened) and a 2-D one, of shapes of their own: a fused program
    seen before replays without asking its kernels again."""
    gen = torch.Generator().manual_seed(0)
    x3, w3, g3 = (torch.randn(*shape, generator=gen) for shape in ((2, 5, 8), (3, 8), (2, 5, 3)))
    x2, w2, g2 = (torch.randn(*shape, generator=gen) for shape in ((9, 6), (4, 6), (9, 4)))
    return [(x3, w3, g3), (x2, w2, g2)]


def _barriers(body, *shapes) -> int:
    arrays = [jnp.ones(shape, jnp.float32) for shape in shapes]
    return jax.jit(body).lower(*arrays).as_text().count("optimization_barrier")


def _asked(monkeypatch, fn, *args) -> tuple[list, object]:
    """(the (factory, static arguments) products' _body_for was asked for while fn(*args) ran, its result)."""
    from jaxdev.ops.linalg import products

    asked, body_for = [], products._body_for

    def spy(factory, dtype, *static):
        asked.append((factory.__name__, static))
        return body_for(factory, dtype, *static)

    monkeypatch.setattr(products, "_body_for", spy)
    result = fn(*args)
    monkeypatch.undo()
    return asked, result


@pytest.mark.tpu_fact("a weight gradient's product becomes its optimizer update's output fusion on a TPU")
def test_weight_gradient_products_wait_behind_a_barrier_in_fused_programs(tpu_policy, monkeypatch):
    """Fused eager's programs (their optimizer's numbers data) keep the weight's gradient apart; per-op
    eager and compiled graphs (numbers constant: XLA fused the update as jax.jit's) do not."""
    from jaxdev.ops.linalg import products

    for x, w, g in _cases():
        for mode, apart in (("fused", True), ("op", False)):
            with jaxdev.eager_mode(mode):
                asked, grads = _asked(monkeypatch, _linear_grads, x, w, g, JAX)
            # the weight's gradient: its rows unflattened (traced 3-D input) or plain rows, apart or not
            assert any(static[-1:] == (True,) for _, static in asked) == apart, (mode, asked)
            assert ("_product", ()) in asked  # the forward's product and the input's gradient: in the open
            torch.testing.assert_close(grads, _linear_grads(x, w, g, "cpu"))
    f32 = torch.float32
    assert _barriers(products._body_for(products._product, f32, True), (3, 10), (10, 8)) == 1
    assert _barriers(products._body_for(products._product_over_rows, f32, True), (2, 5, 3), (2, 5, 8)) == 1
    assert _barriers(products._body_for(products._product_over_rows, f32, False), (2, 5, 3), (2, 5, 8)) == 0
    assert _barriers(products._product_for(f32), (10, 8), (8, 3)) == 0


def test_weight_gradient_products_keep_their_bits_behind_the_barrier(tpu_policy, monkeypatch):
    """The barrier changes no bit: each gradient as the same fused program without it computes it."""
    runs = {}
    for apart in (True, False):
        with pytest.MonkeyPatch.context() as m:
            if not apart:
                m.setitem(capabilities.PROGRAM_FACTS, capabilities.platform(), {})
            jax.clear_caches()
            with jaxdev.eager_mode("fused"):
                runs[apart] = [_asked(monkeypatch, _linear_grads, *case, JAX) for case in _cases()]
    jax.clear_caches()
    for (asked, got), (plain, want) in zip(runs[True], runs[False]):
        assert any(static[-1:] == (True,) for _, static in asked) and not any(s[-1:] == (True,) for _, s in plain)
        assert all(torch.equal(u, v) for u, v in zip(got, want))


def test_weight_gradient_products_stay_in_the_open_elsewhere():
    from jaxdev import tracing
    from jaxdev.ops.kit import precision

    if capabilities.fact("gradient_products_fuse_updates"):
        pytest.skip("this platform keeps weight gradients' products apart")
    with tracing.eager_layouts(True):  # as fused eager traces
        assert not precision.gradients_kept_apart()
