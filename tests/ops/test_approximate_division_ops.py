"""Ops whose float32 divisions are division.divide's (IEEE's where the platform's is not) or products
by exact powers of two, measured against CPU under a TPU's division as tests/tpu_emulation.py emulates
it (tests/ops/conftest.py's `tpu_policy` and `tpu_division`: every float32 division 2 ulps off, 200
past 2^100). Each bound is under what the op gave with the platform's division (the `was` numbers,
benchmarks/tpu_emulated_ulps.py's inputs: max ulps from CPU, gradients of sum()); on CPU the programs
are unchanged (a divide there is the platform's division)."""

from __future__ import annotations

import math

import jax
import numpy as np
import pytest
import torch
import tpu_emulation
from jaxdev_testing import JAX

F = torch.nn.functional
DIVISION = "float32 division is not IEEE's on a TPU"


def _draw(lo: float, hi: float, n: int = 20_000, seed: int = 0) -> torch.Tensor:
    """Half uniform on [lo, hi], half log-uniform magnitudes from 1e-30 (or lo) to the bounds."""
    rng = np.random.default_rng(seed)
    sides = [(1.0, hi)] if hi > 0 else []
    sides += [(-1.0, -lo)] if lo < 0 else []
    floor = lo if lo > 0 else 1e-30
    parts = [rng.uniform(lo, hi, n // 2)]
    for sign, top in sides:
        parts.append(sign * np.exp(rng.uniform(math.log(floor), math.log(top), n // 2 // len(sides))))
    return torch.from_numpy(np.clip(np.concatenate(parts), lo, hi).astype(np.float32))


def _ulps(got: torch.Tensor, want: torch.Tensor) -> float:
    """Max ulps between float32 results (NaN equal to NaN), subnormal CPU results left out (a TPU
    flushes them)."""
    a, b = got.detach().cpu().numpy().ravel(), want.detach().numpy().ravel()
    keep = ~((np.abs(b) < np.finfo(np.float32).tiny) & (b != 0))
    ia, ib = (v[keep].view(np.int32).astype(np.int64) for v in (a, b))
    ma, mb = ia & 0x7FFFFFFF, ib & 0x7FFFFFFF
    d = np.where((ia < 0) == (ib < 0), np.abs(ma - mb), ma + mb).astype(np.float64)
    nan_a, nan_b = np.isnan(a[keep]), np.isnan(b[keep])
    d[nan_a & nan_b] = 0
    d[nan_a ^ nan_b] = np.inf
    return float(d.max(initial=0))


def _both(fn, *args: torch.Tensor, grad: bool = True) -> tuple[float, float]:
    """(forward, input gradient of sum()) max ulps of fn on the jax device against CPU."""
    cpu = [a.clone().requires_grad_(grad) for a in args]
    dev = [a.to(JAX).requires_grad_(grad) for a in args]
    want, got = fn(*cpu), fn(*dev)
    if not grad:
        return _ulps(got, want), 0.0
    want.sum().backward()
    got.sum().backward()
    return _ulps(got, want), max(_ulps(d.grad, c.grad) for d, c in zip(dev, cpu))


_BESSEL = {  # name: (domain, bound, was)
    "bessel_j0": ((-50, 50), 8, 128),
    "bessel_j1": ((-50, 50), 8, 1010),
    "bessel_y0": ((0, 50), 48, 1332),  # near its zeros: the own sin and cos's last bits, not the divisions
    "bessel_y1": ((0, 50), 200, 18138),
    "modified_bessel_i0": ((-50, 50), 4, 6),
    "modified_bessel_i1": ((-50, 50), 6, 13),
    "modified_bessel_k0": ((0, 50), 8, 12),
    "modified_bessel_k1": ((0, 50), 8, 18),
    "scaled_modified_bessel_k0": ((0, 50), 10, 12),
    "scaled_modified_bessel_k1": ((0, 50), 6, 11),
    "spherical_bessel_j0": ((-50, 50), 4, 6),
    "airy_ai": ((-10, 10), 4, 549_380),
}


@pytest.mark.tpu_fact(DIVISION)
@pytest.mark.parametrize("name", list(_BESSEL))
def test_bessel_and_airy_where_division_is_approximate(name, tpu_policy, tpu_division):
    """Cephes' rational and Chebyshev forms divide several times an element; next to a zero of J, Y or
    Ai the quotients' ulps become many of the result's (Ai's sine takes 2 |x|^1.5 / 3 as its
    argument for x < -2.09)."""
    (lo, hi), bound, _was = _BESSEL[name]
    fwd, _ = _both(getattr(torch.special, name), _draw(lo, hi), grad=False)
    assert fwd <= bound, (name, fwd)


@pytest.mark.tpu_fact(DIVISION)
def test_i0e_where_division_is_approximate(tpu_policy, tpu_division):
    """i0e's 32 / x and / sqrt(x) (was 7 ulps); its gradient i1e - sgn(x) i0e cancels (was 384)."""
    fwd, grad = _both(torch.special.i0e, _draw(-50, 50))
    assert fwd <= 1 and grad <= 64, (fwd, grad)


_GAMMA = {  # name: (fn, domain, forward bound, gradient bound, was (forward, gradient))
    "digamma": (torch.digamma, (0.01, 1e3), 64, 8, (15_987, 12)),  # its zero at 1.4616 magnifies
    "lgamma": (torch.lgamma, (0, 1e3), 1, 256, (1, 4289)),  # the gradient is digamma
    "polygamma(1)": (lambda t: torch.polygamma(1, t), (0.01, 100), 8, 2, (14, 1)),
    "mvlgamma(3)": (lambda t: torch.mvlgamma(t, 3), (1.01, 100), 4, 8192, (50, 8192)),  # j / 2 exactly
}


@pytest.mark.tpu_fact(DIVISION)
@pytest.mark.parametrize("name", list(_GAMMA))
def test_gamma_family_where_division_is_approximate(name, tpu_policy, tpu_division):
    """digamma's 1 / x steps and 0.5 / x, trigamma's 1 / x^2 steps, mvlgamma's halves (j / 2 was a
    division the emulation perturbs; a product by 0.5 is exact everywhere)."""
    fn, (lo, hi), fwd_bound, grad_bound, _was = _GAMMA[name]
    fwd, grad = _both(fn, _draw(lo, hi))
    assert fwd <= fwd_bound and grad <= grad_bound, (name, fwd, grad)


_ELEMENTWISE = {  # name: (fn, domain, bound, was (forward, gradient))
    "tan": (torch.tan, (-10, 10), 4, (6, 11)),  # sin / cos
    "sinh": (torch.sinh, (-88, 88), 2, (7, 6)),  # (e - 1 / e) / 2, (u + u / (u + 1)) / 2
    "cosh": (torch.cosh, (-88, 88), 2, (6, 7)),
    "softplus": (F.softplus, (-30, 30), 2, (5, 4)),  # log1p(exp(x beta)) / beta: beta is not a constant
    "softplus(beta=2)": (lambda t: F.softplus(t, 2.0, 10.0), (-30, 30), 2, (5, 4)),
}


@pytest.mark.tpu_fact(DIVISION)
@pytest.mark.parametrize("name", list(_ELEMENTWISE))
def test_elementwise_where_division_is_approximate(name, tpu_policy, tpu_division):
    fn, (lo, hi), bound, _was = _ELEMENTWISE[name]
    x = torch.cat([_draw(lo, hi), torch.tensor([0.0, -0.0, math.inf, -math.inf, math.nan])])
    fwd, grad = _both(fn, x)
    assert max(fwd, grad) <= bound, (name, fwd, grad)


@pytest.mark.tpu_fact(DIVISION)
def test_mish_gradient_where_division_is_approximate(tpu_policy, tpu_division):
    """mish's gradient (CPU's composite: softplus, tanh, sigmoid) cancels near x = -1.19; softplus's
    division by beta had it 1,281 ulps from CPU's there (499 with IEEE's: the own functions' last bits,
    plain CPU 345)."""
    _, grad = _both(F.mish, _draw(-30, 30))
    assert grad <= 600, grad


def _softmax_errors(fn, x: torch.Tensor, w: torch.Tensor) -> tuple[float, float]:
    """fn's forward max ulps from CPU's, and its weighted gradient's largest error relative to CPU's."""
    fwd, _ = _both(lambda t: fn(t, -1), x, grad=False)
    cpu, dev = x.clone().requires_grad_(), x.to(JAX).requires_grad_()
    (fn(cpu, -1) * w).sum().backward()
    (fn(dev, -1) * w.to(JAX)).sum().backward()
    return fwd, float((dev.grad.cpu().double() - cpu.grad.double()).abs().max() / cpu.grad.abs().max())


@pytest.mark.tpu_fact(DIVISION)
@pytest.mark.parametrize("fn", [torch.softmax, F.softmin], ids=["softmax", "softmin"])
def test_softmax_where_division_is_approximate(fn):
    """exp(x - max) times the row sum's corrected reciprocal: 3 ulps from CPU's and the gradient 6.0
    (softmin 9.8) eps relative, as plain CPU's programs on an AVX512 machine; with the platform's
    division 6 ulps (softmin 7) and 15.9 (19.6). On CPU the bounds are at least what this platform's
    own programs give against torch here: torch's softmax follows its vector ISA (its exp, its sum's
    order), 6 ulps from XLA's on an AVX2 machine, plain and emulated alike."""
    x = _draw(-30, 30).reshape(200, 100)
    w = torch.from_numpy(np.random.default_rng(7).uniform(0.5, 1.5, (200, 100)).astype(np.float32))
    fwd_bound, grad_bound = 4.0, 12 * torch.finfo(torch.float32).eps
    if jax.default_backend() == "cpu":
        plain = _softmax_errors(fn, x, w)
        fwd_bound, grad_bound = max(fwd_bound, plain[0]), max(grad_bound, plain[1])
    with tpu_emulation.policy(), tpu_emulation.division():
        fwd, err = _softmax_errors(fn, x, w)
    assert fwd <= fwd_bound and err <= grad_bound, (fwd, err, fwd_bound, grad_bound)
