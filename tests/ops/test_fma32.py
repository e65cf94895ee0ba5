"""cpu_numerics.fma32: the fused multiply-add of norms' float32 kernels, in float64 where the platform
has it and in float32 alone where float64 is emulated (a TPU: issue 37, the GPT step's layer-norm
gradients ran float64 emulated there). Both paths are checked on CPU, the emulated one forced."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch

from jaxdev.ops.kit import cpu_numerics


@pytest.fixture
def emulated(monkeypatch):
    monkeypatch.setattr(cpu_numerics, "float64_native", lambda: False)
    jax.clear_caches()
    yield
    jax.clear_caches()


def _exact(a, b, c):
    return (a.astype(np.float64) * b.astype(np.float64) + c.astype(np.float64)).astype(np.float32)


def _cases(n=20000):
    rng = np.random.default_rng(37)
    a = (rng.standard_normal(n) * 10.0 ** rng.integers(-6, 6, n)).astype(np.float32)
    b = (rng.standard_normal(n) * 10.0 ** rng.integers(-6, 6, n)).astype(np.float32)
    c = (rng.standard_normal(n) * 10.0 ** rng.integers(-6, 6, n)).astype(np.float32)
    c[:2000] = -(a[:2000] * b[:2000])  # cancellation: the product's rounding error is the answer
    return a, b, c


def test_native_path_is_float64():
    a, b, c = _cases()
    got = np.asarray(jax.jit(cpu_numerics.fma32)(a, b, c))
    np.testing.assert_array_equal(got, _exact(a, b, c))


def test_emulated_path_matches_one_rounding(emulated):
    a, b, c = _cases()
    fn = jax.jit(cpu_numerics.fma32)
    assert "f64" not in fn.lower(a, b, c).as_text()
    got, want = np.asarray(fn(a, b, c)), _exact(a, b, c)
    np.testing.assert_array_equal(got[:2000], want[:2000])  # cancellations exactly
    ulp = np.spacing(np.abs(want))
    assert np.all(np.abs(got.astype(np.float64) - want) <= ulp)
    assert np.mean(got == want) > 0.999


def test_layer_norm_backward_without_float64(emulated):
    """The layer-norm gradient's program has no float64 where it is emulated, and its weight gradient
    (the fused multiply-add's user) stays the CPU's to a float32 ulp."""
    from jaxdev.ops import normalization

    torch.manual_seed(0)
    x = torch.randn(64, 32)
    w, b = torch.randn(32, requires_grad=True), torch.randn(32, requires_grad=True)
    xj = x.to("jax").requires_grad_()
    wj, bj = (t.detach().to("jax").requires_grad_() for t in (w, b))
    torch.nn.functional.layer_norm(xj, (32,), wj, bj).pow(2).sum().backward()
    xc = x.clone().requires_grad_()
    torch.nn.functional.layer_norm(xc, (32,), w, b).pow(2).sum().backward()
    torch.testing.assert_close(wj.grad.cpu(), w.grad, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(xj.grad.cpu(), xc.grad, rtol=1e-5, atol=1e-5)
    f32 = jnp.float32
    args = [jnp.ones(s, f32) for s in ((4, 8), (4, 8), (4, 1), (4, 1), (8,), (8,))]
    fn = jax.jit(lambda *a: normalization._layer_norm_grad(*a, (1,), (True, True, True)))
    assert "f64" not in fn.lower(*args).as_text()
