"""Why polygamma(n >= 2) was up to 9.05 relative off on a TPU v5e (OpInfo's x in [-8.5, 8.4], float32,
bfloat16 and float64 alike) while CPU and XLA's CPU backend were right: the pieces of its float64 Hurwitz
zeta (jaxdev/ops/special/zeta.py: direct terms (q + k)^-x, then an Euler-Maclaurin tail), each on JAX's
default backend against NumPy float64 on the host, and jaxdev's polygamma against CPU PyTorch.

    python benchmarks/tpu_probe_zeta.py          # on the chip (scripts/tpu_env.sh sets the Python up)
    JAX_PLATFORMS=cpu .venv/bin/python benchmarks/tpu_probe_zeta.py   # here: everything agrees

One line a piece: its max relative error (non-finite results compared for equality: `nonfinite_off`
counts the places where one side is finite and the other not, or NaN against inf). On CPU every float64
piece is ~1e-16 and polygamma's against CPU's 0 (float64) / ~1e-7 (float32).

On a TPU v5e (JAX 0.10.2, 2026-12-07): float64 power of a negative base by an odd integer came out
positive (|a|^e: max_rel 2.0; float32's and even exponents' right), so the zeta's direct terms
(x + k)^-3 lost their sign at negative x: polygamma n=2 2.7e3 relative off (n=3, even exponent 4,
1.2e-10). With zeta.py's _term (|a|^-x signed) n=2 was 1.1e-7 (float32) / 9.3e-11 (float64). Emulated
float64 also overflows past float32's range: small base, x=40 gave 346 infinities where NumPy's are finite.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import torch

import jaxdev  # noqa: F401  (the device "jax", and x64 on as jaxdev runs it)
from jaxdev.ops.special import zeta as zeta_module

EXPONENTS = (-2.0, -3.0, -4.0, -5.0)


def _rel(got, want) -> tuple[float, int]:
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    finite = np.isfinite(got) & np.isfinite(want)
    same_nonfinite = (got == want) | (np.isnan(got) & np.isnan(want))
    off = int(np.sum(~finite & ~same_nonfinite))
    err = np.abs(got[finite] - want[finite]) / np.maximum(np.abs(want[finite]), np.finfo(np.float64).tiny)
    return (float(err.max()) if err.size else 0.0), off


def _line(name: str, got, want) -> None:
    err, off = _rel(got, want)
    print(f"{name:<44} max_rel {err:9.3e}  nonfinite_off {off}")


def _bases(sign: float) -> np.ndarray:
    rng = np.random.default_rng(0)
    return sign * np.concatenate([rng.uniform(0.05, 10.0, 2000), [0.5, 1.5, 2.5, 7.5, 8.5, 1e-3, 1e3]])


def probe_pow() -> None:
    """jnp.power(a, e) for integer-valued float exponents, negative and positive bases, float64 and float32."""
    for dt in (np.float64, np.float32):
        for sign, label in ((-1.0, "neg"), (1.0, "pos")):
            a = _bases(sign).astype(dt)
            worst, off = 0.0, 0
            for e in EXPONENTS:
                got = np.asarray(jax.jit(jnp.power)(jnp.asarray(a), jnp.asarray(e, dt)))
                err, o = _rel(got, np.power(a.astype(np.float64), e))
                worst, off = max(worst, err), off + o
            print(
                f"{f'power {np.dtype(dt).name} {label} base, e=-2..-5':<44} max_rel {worst:9.3e}  nonfinite_off {off}"
            )


def probe_zeta_spelling() -> None:
    """`a ** -x` exactly as zeta.py's _begin/_direct spell it (x a float64 array of n + 1), jitted."""
    spelled = jax.jit(lambda a, x: a**-x)
    for sign, label in ((-1.0, "neg"), (1.0, "pos")):
        a = _bases(sign)
        for x in (3.0, 4.0):
            xs = np.full_like(a, x)
            _line(f"a**-x float64 {label} base, x={x:g}", spelled(jnp.asarray(a), jnp.asarray(xs)), a**-xs)
    a = _bases(1.0)  # the Euler-Maclaurin tail's b / w, and small bases with large exponents
    b = a**-3.0
    _line("b / w float64", jax.jit(jnp.divide)(jnp.asarray(b), jnp.asarray(a)), b / a)
    small, big = np.geomspace(1e-3, 0.9, 500), np.full(500, 40.0)
    _line("a**-x float64 small base, x=40", spelled(jnp.asarray(small), jnp.asarray(big)), small**-big)


def probe_zeta() -> None:
    """jaxdev's _hurwitz_zeta (one jitted program) against SciPy's zeta for q > 0 (no negative base
    arises), and against the same program on XLA's CPU backend for every q."""
    try:
        from scipy.special import zeta as scipy_zeta
    except ImportError:
        return
    q = np.linspace(0.05, 8.4, 200)
    for x in (3.0, 4.0):
        got = jax.jit(zeta_module._hurwitz_zeta)(jnp.full_like(jnp.asarray(q), x), jnp.asarray(q))
        _line(f"hurwitz_zeta({x:g}, q>0) vs scipy", got, scipy_zeta(x, q))
    q = _inputs(torch.float64).numpy()  # negative q too: the same program on XLA's CPU backend
    cpu = jax.devices("cpu")[0]
    for x in (3.0, 4.0):
        xs = np.full_like(q, x)
        got = jax.jit(zeta_module._hurwitz_zeta)(jnp.asarray(xs), jnp.asarray(q))
        want = jax.jit(zeta_module._hurwitz_zeta)(jax.device_put(xs, cpu), jax.device_put(q, cpu))
        _line(f"hurwitz_zeta({x:g}, any q) vs XLA CPU backend", got, want)


def _inputs(dtype: torch.dtype) -> torch.Tensor:
    near_poles = torch.tensor([-3.0001, -2.9999, -1e-4, 1e-4, -5.5, -0.5, -7.25, -1.75], dtype=torch.float64)
    return torch.cat([torch.linspace(-8.5, 8.4, 200, dtype=torch.float64), near_poles]).to(dtype)


def probe_polygamma() -> None:
    for dtype in (torch.float32, torch.float64):
        x = _inputs(dtype)
        for n in (2, 3):
            want = torch.polygamma(n, x).double().numpy()
            got = torch.polygamma(n, x.to("jax")).cpu().double().numpy()
            _line(f"polygamma n={n} {str(dtype)[6:]} vs torch CPU", got, want)
            if n == 2:
                neg = x.double().numpy() < 0
                _line(f"  of which x < 0 ({int(neg.sum())} values)", got[neg], want[neg])


def main() -> None:
    print(f"backend {jax.default_backend()}: {jax.devices()[0].device_kind}, jax {jax.__version__}")
    probe_pow()
    probe_zeta_spelling()
    probe_zeta()
    probe_polygamma()


if __name__ == "__main__":
    main()
