"""Why float32 logcumsumexp was 6x the OpInfo tolerance from float64 on a TPU v5e (max abs err 6.8e-5, max
rel 9.3e-5: ~780 ulps; CPU 0.033x) at d6a9523, while XLA's CPU backend, and the chip emulated on CPU
(tests/tpu_emulation.py: its facts, own functions and inexact division), stay at CPU's 0.033x: each piece
of jaxdev/ops/scans.py's float32 path on JAX's default backend, against NumPy float64 on the host.

The path where jaxdev's own functions are chosen: an associative scan of float pairs (hi, lo) whose
log-add-exp (scans._log_add_exp_pairs) keeps the running value's rounding error in `lo` through
error-free sums (trig.two_sum), with jaxdev's exp and log1p. Pieces, one line each with its max error:
* two_sum: s + e == a + b exactly (in float64) for random float32 pairs, and s == fl(a + b);
* exp and log1p (jaxdev's own) in ulps of float32 against float64;
* one log-add-exp of pairs against float64;
* the whole logcumsumexp (OpInfo's [5, 5, 5] samples and a long row) in multiples of OpInfo's tolerance
  (atol 1e-5, rtol 1.3e-6) from float64, beside CPU PyTorch's.

    python benchmarks/tpu_probe_logcumsumexp.py          # on the chip (scripts/tpu_env.sh sets it up)
    JAX_PLATFORMS=cpu .venv/bin/python benchmarks/tpu_probe_logcumsumexp.py   # here: CPU's numbers
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import torch

import jaxdev  # noqa: F401  (the device "jax")
from jaxdev.ops import scans
from jaxdev.ops.kit import transcendentals as tm
from jaxdev.ops.kit import transcendentals_trig as trig


def _ulps32(got: np.ndarray, want: np.ndarray) -> float:
    want32 = want.astype(np.float32)
    spacing = np.abs(np.spacing(want32)).astype(np.float64)
    ok = np.isfinite(want) & (spacing > 0)
    return float((np.abs(got.astype(np.float64) - want)[ok] / spacing[ok]).max())


def probe_two_sum(rng) -> None:
    a = (rng.standard_normal(1 << 16) * np.exp(rng.uniform(-20, 20, 1 << 16))).astype(np.float32)
    b = (rng.standard_normal(1 << 16) * np.exp(rng.uniform(-20, 20, 1 << 16))).astype(np.float32)
    s, e = jax.jit(trig.two_sum)(a, b)
    s, e = np.asarray(s, np.float64), np.asarray(e, np.float64)
    exact = a.astype(np.float64) + b.astype(np.float64)
    print(
        f"two_sum: s + e - (a + b) max {np.abs(s + e - exact).max():.3e}; s != fl(a + b) at {int((s != (a + b)).sum())}"
    )


def probe_functions(rng) -> None:
    x = rng.uniform(-80, 0, 1 << 16).astype(np.float32)
    got = np.asarray(jax.jit(tm.exp)(x))
    print(f"own exp on [-80, 0]: max {_ulps32(got, np.exp(x.astype(np.float64))):.1f} ulps")
    y = np.exp(x.astype(np.float64)).astype(np.float32)
    got = np.asarray(jax.jit(tm.log1p)(y))
    print(f"own log1p on exp([-80, 0]): max {_ulps32(got, np.log1p(y.astype(np.float64))):.1f} ulps")


def probe_pairs(rng) -> None:
    a = rng.uniform(-10, 10, 1 << 16).astype(np.float32)
    b = rng.uniform(-10, 10, 1 << 16).astype(np.float32)
    zero = np.zeros_like(a)
    hi, lo = jax.jit(scans._log_add_exp_pairs)((a, zero), (b, zero))
    got = np.asarray(hi, np.float64) + np.asarray(lo, np.float64)
    want = np.logaddexp(a.astype(np.float64), b.astype(np.float64))
    print(f"log-add-exp of pairs: hi + lo max {np.abs(got - want).max():.3e} abs from float64")


def probe_op() -> None:
    torch.manual_seed(0)
    cases = [(torch.randn(5, 5, 5) * 3, d) for d in (0, 1, 2)] + [(torch.randn(4, 4096) * 3, 1)]
    for x, dim in cases:
        ref = torch.logcumsumexp(x.double(), dim)
        tol = 1e-5 + 1.3e-6 * ref.abs()
        jaxdev_out = torch.logcumsumexp(x.to("jax"), dim).cpu().double()
        cpu_out = torch.logcumsumexp(x, dim).double()
        worst_j = ((jaxdev_out - ref).abs() / tol).max().item()
        worst_c = ((cpu_out - ref).abs() / tol).max().item()
        print(f"logcumsumexp {tuple(x.shape)} dim {dim}: jaxdev {worst_j:.3f}x tolerance, CPU {worst_c:.3f}x")


def main() -> None:
    print(f"backend {jax.default_backend()}: {jax.devices()[0].device_kind}, jax {jax.__version__}")
    print(f"own functions chosen: {tm.own(jnp.float32)}")
    rng = np.random.default_rng(0)
    probe_two_sum(rng)
    probe_functions(rng)
    probe_pairs(rng)
    probe_op()


if __name__ == "__main__":
    main()
