"""The platform's float32 arithmetic against IEEE's, and jaxdev's corrections of it (issue 38): whether a
multiply-add is contracted into one rounding, how far sqrt, rsqrt, division and rem are from correctly
rounded, and what division.divide / division.sqrt / division.fmod / cpu_arithmetic.fma make of them.

    python benchmarks/tpu_arithmetic.py [--n 100000] [--json arithmetic.json] [--emulate]

--emulate (a CPU rehearsal): the chip's facts and its division, rem and sqrt as tests/tpu_emulation.py
emulates them; with XLA_FLAGS=--xla_cpu_max_isa=AVX the multiply-add is not contracted either.

Each row is one jitted program on this process's default device (a TPU on the chip, XLA's CPU here),
over --n float32 values (normal, log-uniform over 2^-60..2^60 unless a row says otherwise), against the
exact result rounded once (numpy in float64, which holds every float32 product and sum exactly). Columns:
the share of elements off IEEE's result, the largest distance in ulps; for the multiply-add also the
share equal to two roundings (fl(fl(x*y) + z)) where that differs from one: 100 % contracted means the
platform fuses it as CPU's compiler does (XLA's CPU backend does; a TPU did not on 2026-12-07).
On this CPU machine every jaxdev row is the platform's own operation (its facts say it is IEEE's).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys

import jax
import jax.numpy as jnp
import numpy as np

import jaxdev  # noqa: F401  (x64 on, as jaxdev runs)
from jaxdev.ops.kit import cpu_arithmetic, division, formulas


def _log_uniform(rng, n, lo=-60, hi=60) -> np.ndarray:
    sign = np.where(rng.random(n) < 0.5, -1.0, 1.0)
    return (sign * 2.0 ** rng.uniform(lo, hi, n)).astype(np.float32)


def _ulps(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    """Distance in float32 ulps (ordered integers), NaN where both are NaN counted 0."""

    def ordered(v):
        i = v.astype(np.float32).view(np.int32).astype(np.int64)
        return np.where(i < 0, -(2**31) - i, i)

    both_nan = np.isnan(got) & np.isnan(want)
    return np.where(both_nan, 0, np.abs(ordered(got) - ordered(want)))


def _row(name: str, got, want: np.ndarray, extra: dict | None = None) -> dict:
    got = np.asarray(got, np.float32)
    u = _ulps(got, want)
    row = {"name": name, "off": float(np.mean(u > 0)), "max_ulps": int(u.max()), **(extra or {})}
    print(f"{name:38s} {100 * row['off']:7.2f} % off IEEE   max {row['max_ulps']:>10d} ulps", end="")
    print("".join(f"   {k} {v}" for k, v in (extra or {}).items()))
    return row


def multiply_add(rng, n) -> list[dict]:
    x, y, z = (rng.standard_normal(n).astype(np.float32) for _ in range(3))
    exact = (x.astype(np.float64) * y + z).astype(np.float32)
    twice = (x * y).astype(np.float32) + z
    differ = exact != twice
    rows = []
    for name, fn in (("x * y + z (XLA)", lambda a, b, c: a * b + c), ("cpu_arithmetic.fma", cpu_arithmetic.fma)):
        got = np.asarray(jax.jit(fn)(x, y, z))
        contracted = float(np.mean(got[differ] == exact[differ])) if differ.any() else float("nan")
        rows.append(_row(name, got, exact, {"contracted": f"{100 * contracted:.1f} %"}))
    return rows


def roots(rng, n) -> list[dict]:
    x = np.abs(_log_uniform(rng, n))
    exact = np.sqrt(x.astype(np.float64)).astype(np.float32)
    recip = (1.0 / np.sqrt(x.astype(np.float64))).astype(np.float32)
    torch_rsqrt = (1.0 / exact.astype(np.float64)).astype(np.float32)  # CPU's kernel: 1 / sqrt, each rounded
    return [
        _row("sqrt (XLA)", jax.jit(jnp.sqrt)(x), exact),
        _row("division.sqrt", jax.jit(division.sqrt)(x), exact),
        _row("rsqrt (XLA) vs 1/sqrt exact", jax.jit(jax.lax.rsqrt)(x), recip),
        _row("formulas.rsqrt vs torch's 1/sqrt", jax.jit(formulas.rsqrt)(x), torch_rsqrt),
    ]


def quotients(rng, n) -> list[dict]:
    a, b = _log_uniform(rng, n), _log_uniform(rng, n)
    exact = (a.astype(np.float64) / b).astype(np.float32)
    wide_a, wide_b = _log_uniform(rng, n, -126, 127), _log_uniform(rng, n, -126, 127)
    with np.errstate(over="ignore", under="ignore"):
        wide = (wide_a.astype(np.float64) / wide_b).astype(np.float32)
    ok = np.isfinite(wide) & (np.abs(wide) >= np.finfo(np.float32).tiny)  # a flushed subnormal is a platform fact
    return [
        _row("a / b (XLA)", jax.jit(jnp.divide)(a, b), exact),
        _row("division.divide", jax.jit(division.divide)(a, b), exact),
        _row("a / b (XLA), 2^-126..2^127", np.asarray(jax.jit(jnp.divide)(wide_a, wide_b))[ok], wide[ok]),
        _row("division.divide, 2^-126..2^127", np.asarray(jax.jit(division.divide)(wide_a, wide_b))[ok], wide[ok]),
    ]


def remainders(rng, n) -> list[dict]:
    b = _log_uniform(rng, n, -20, 20)
    k = rng.integers(1, 1 << 20, n).astype(np.float32)
    multiples = (k * b).astype(np.float32)
    a = _log_uniform(rng, n, -20, 40)
    rows = []
    for label, x in (("exact multiples k*b", multiples), ("random pairs", a)):
        want = np.fmod(x, b)
        rows.append(_row(f"fmod (XLA rem), {label}", jax.jit(jnp.fmod)(x, b), want))
        rows.append(_row(f"division.fmod, {label}", jax.jit(division.fmod)(x, b), want))
    return rows


@contextlib.contextmanager
def _emulated():
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests"))
    import tpu_emulation

    with tpu_emulation.policy(), tpu_emulation.division(), tpu_emulation.sqrt():
        print("emulated: the TPU's facts, division, rem and sqrt (tests/tpu_emulation.py)")
        yield


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--json", help="write the rows here")
    parser.add_argument("--emulate", action="store_true", help="the chip's arithmetic emulated here")
    args = parser.parse_args()
    device = jax.devices()[0]
    print(f"jax {jax.__version__} on {device.platform} ({device.device_kind}); {args.n} float32 values a row")
    rng = np.random.default_rng(0)
    rows = []
    with _emulated() if args.emulate else contextlib.nullcontext():
        for section in (multiply_add, roots, quotients, remainders):
            rows += section(rng, args.n)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"platform": device.platform, "kind": device.device_kind, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    sys.exit(main())
