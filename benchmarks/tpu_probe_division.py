"""float32 division and reciprocal on this platform against IEEE's (NumPy on the host), as the platform
divides and through cpu_numerics.divide; float64 values through `.to("jax").cpu()`; and igamma float32
against CPU PyTorch on tests/ops/test_program_facts.py's inputs, with its intermediate quantities; and
float32 lgamma and pow, jaxdev's own against XLA's (ulps from CPU torch's, ms).

    python benchmarks/tpu_probe_division.py [--n 200000] [--json division.json]

Division rows: max and mean ulps from the correctly rounded quotient, and the share above 2 ulps, over
normal-range operands (|a|, |b| in 2**-40..2**40) and apart over operands near float32's limits (|a| or
|b| within 2**12 of the largest or smallest normal), subnormal and non-finite results left out (a
platform may flush them). Rehearse here: JAX_PLATFORMS=cpu .venv/bin/python benchmarks/tpu_probe_division.py
"""

from __future__ import annotations

import argparse
import json
import time

import jax
import jax.numpy as jnp
import numpy as np
import torch

import jaxdev  # noqa: F401  (the device, and x64 as jaxdev runs it)
from jaxdev.ops.kit import capabilities, cpu_numerics
from jaxdev.ops.kit import transcendentals as tm
from jaxdev.ops.kit import transcendentals_gamma as tg
from jaxdev.ops.special import igamma


def _ulps(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    ia, ib = (v.astype(np.float32).view(np.int32).astype(np.int64) for v in (got, want))
    ia, ib = (np.where(i < 0, -(i & 0x7FFFFFFF), i) for i in (ia, ib))  # ordered as the reals
    return np.abs(ia - ib).astype(np.float64)


def _operands(rng, n, near_limits: bool):
    def magnitudes(lo, hi):
        return 2.0 ** rng.uniform(lo, hi, n) * rng.choice([-1.0, 1.0], n)

    if not near_limits:
        return magnitudes(-40, 40).astype(np.float32), magnitudes(-40, 40).astype(np.float32)
    edge = rng.choice([-126.0, 115.0], n)  # the smallest normal's, or within 2**12 of the largest
    big = (2.0 ** (edge + rng.uniform(0, 12, n)) * rng.choice([-1.0, 1.0], n)).astype(np.float32)
    return big, magnitudes(-8, 8).astype(np.float32)


def division_rows(n: int) -> list[dict]:
    rng, rows = np.random.default_rng(0), []
    plain = jax.jit(lambda a, b: a / b)
    recip = jax.jit(lambda b: 1 / b)
    corrected = jax.jit(cpu_numerics.divide)
    for near in (False, True):
        a, b = _operands(rng, n, near)
        for name, fn, args, want in [
            ("a / b", plain, (a, b), a / b),
            ("b / a", plain, (b, a), b / a),
            ("1 / b", recip, (b,), np.float32(1) / b),
            ("divide(a, b)", corrected, (a, b), a / b),
            ("divide(b, a)", corrected, (b, a), b / a),
        ]:
            got = np.asarray(fn(*(jnp.asarray(v) for v in args)))
            kept = np.isfinite(want) & (np.abs(want) >= np.float32(2.0**-126))
            u = _ulps(got[kept], want[kept])
            rows.append(
                {
                    "operands": "near limits" if near else "normal range",
                    "op": name,
                    "max_ulps": float(u.max()),
                    "mean_ulps": float(u.mean()),
                    "share_above_2": float((u > 2).mean()),
                    "left_out": int((~kept).sum()),
                }
            )
    return rows


def round_trip_rows() -> list[dict]:
    """float64 values through jaxdev (`.to("jax").cpu()`, `.item()`) and through the platform's own
    read-back (np.asarray of a jax array), bits in and out."""
    rows = []
    for value in (-0.0, 1e-310, 1e300, 1 / 3):
        t = torch.tensor([value], dtype=torch.float64)
        on = t.to("jax")
        back = on.cpu()
        platform = np.asarray(jnp.asarray(np.array([value])))
        rows.append(
            {
                "value": repr(value),
                "bits_in": hex(t.view(torch.int64).item() & (2**64 - 1)),
                "jaxdev_cpu": repr(back.item()),
                "jaxdev_bits": hex(back.view(torch.int64).item() & (2**64 - 1)),
                "item": repr(on.item()),
                "platform_read_back": repr(float(platform[0])),
                "platform_bits": hex(int(platform.view(np.int64)[0]) & (2**64 - 1)),
            }
        )
    return rows


def _test_inputs():
    """test_float32_kernels_without_float64_stay_close_to_cpu's a and x (its generator's draws)."""
    g = torch.Generator().manual_seed(0)
    for _ in range(4):  # sinh, cosh, exp2 and erfinv's points first
        torch.rand(20000, generator=g), torch.randn(5000, generator=g)
    a = torch.cat([torch.rand(3000, generator=g) * 50 + 0.01, torch.rand(500, generator=g) * 1000 + 50])
    return a, torch.rand(len(a), generator=g) * 3 * a


def _off(got, want64, cpu32=None) -> dict:
    got = np.asarray(got, np.float64)
    kept = (np.abs(want64) > 1e-30) & (np.abs(want64) < 3e38)  # where float32 holds it, not tiny
    rel = np.abs(got[kept] - want64[kept]) / np.abs(want64[kept])
    out = {"max_rel_from_float64": float(np.nanmax(rel))}
    if cpu32 is not None:
        out["max_ulps_from_cpu"] = float(np.nanmax(_ulps(np.asarray(got, np.float32), cpu32)))
    return out


def igamma_rows() -> list[dict]:
    a, x = _test_inputs()
    rows = []
    for fn in (torch.special.gammainc, torch.special.gammaincc):
        got, want = fn(a.to("jax"), x.to("jax")).cpu().double(), fn(a, x).double()
        d = (got - want).abs()
        bad = d > 1e-5 + 1.3e-6 * want.abs()
        rows.append({"quantity": fn.__name__, "max_abs_from_cpu": d.max().item(), "past_tolerance": int(bad.sum())})
    ja, jx = jnp.asarray(a.numpy()), jnp.asarray(x.numpy())
    a64, x64 = a.double(), x.double()
    fac = (a64 * x64.log() - x64 - torch.lgamma(a64)).exp().numpy()
    run = jax.jit
    parts = {
        "lgamma(a)": (run(igamma._lgamma)(ja), torch.lgamma(a64).numpy(), torch.lgamma(a).numpy()),
        "log(x)": (run(tm.log)(jx), x64.log().numpy(), x.log().numpy()),
        "x / (a + g - 0.5)": (run(lambda u, v: cpu_numerics.divide(v, u + igamma._LANCZOS_G - 0.5))(ja, jx),
                              (x64 / (a64 + igamma._LANCZOS_G - 0.5)).numpy(), None),
        "pow(x / a, a)": (run(lambda u, v: jnp.power(v / u, u))(ja, jx), ((x64 / a64) ** a64).numpy(), None),
        "own pow(x / a, a)": (run(lambda u, v: tg.pow(v / u, u))(ja, jx), ((x64 / a64) ** a64).numpy(), None),
        "x^a e^-x / Gamma(a)": (run(igamma._fac)(ja, jx), fac, None),
    }  # fmt: skip
    for name, (got, want64, cpu32) in parts.items():
        rows.append({"quantity": name, **_off(got, want64, cpu32)})
    return rows


def _ms(fn, *args) -> float:
    """Median ms of one jitted call on this platform (after a warm-up)."""
    fn(*args).block_until_ready()
    times = []
    for _ in range(7):
        start = time.perf_counter()
        fn(*args).block_until_ready()
        times.append(time.perf_counter() - start)
    return 1e3 * float(np.median(times))


def gamma_rows(n: int) -> list[dict]:
    """lgamma and pow in float32, jaxdev's own (transcendentals_gamma.py) and XLA's: ulps from CPU torch's
    (glibc's lgammaf, powf) and ms for n elements. lgamma over (0, 50), log-uniform to 1e30 and
    (-50, -0.25); pow over bases in (1e-6, 1e6), exponents up to 1e3 in magnitude, normal results."""
    rng = np.random.default_rng(0)
    k = n // 3
    x = np.concatenate([rng.uniform(0, 50, k), np.exp(rng.uniform(-69, 69, k)), rng.uniform(-50, -0.25, n - 2 * k)])
    x = x.astype(np.float32)
    b = np.exp(rng.uniform(np.log(1e-6), np.log(1e6), n)).astype(np.float32)
    e = (rng.uniform(-1, 1, n) * 10.0 ** rng.uniform(-3, 3, n)).astype(np.float32)
    lg_cpu = torch.lgamma(torch.from_numpy(x)).numpy()
    pw_cpu = torch.pow(torch.from_numpy(b), torch.from_numpy(e)).numpy()
    normal = np.abs(pw_cpu) >= 2.0**-126
    jx, jb, je = jnp.asarray(x), jnp.asarray(b), jnp.asarray(e)
    rows = []
    for name, own_fn, xla_fn, args, want, kept in [
        ("lgamma", tg.lgamma, jax.scipy.special.gammaln, (jx,), lg_cpu, x > 0),
        ("pow", tg.pow, jnp.power, (jb, je), pw_cpu, normal),
    ]:
        for side, fn in (("own", own_fn), ("xla", xla_fn)):
            with tm.forced("own" if side == "own" else "fast"):
                jitted = jax.jit(fn)
                got = np.asarray(jitted(*args))
                ms = _ms(jitted, *args)
            d = _ulps(got, want)
            row = {"quantity": f"{name} {side}", "max_ulps_from_cpu": float(np.nanmax(d[kept]))}
            if name == "lgamma":  # x < -1/4: reflection, ulps of the larger of its two terms
                scale = np.maximum(np.abs(want), np.abs(torch.lgamma(torch.from_numpy(-x)).numpy()))
                off = np.abs(got.astype(np.float64) - want) / np.spacing(scale)
                row["negative_x_ulps_of_term"] = float(np.nanmax(off[x < 0]))
            rows.append({**row, "ms": ms})
    return rows


def _table(rows: list[dict]) -> str:
    keys = list(dict.fromkeys(k for r in rows for k in r))  # every row's keys, in their first order
    cells = [[f"{r[k]:.3g}" if isinstance(r.get(k), float) else str(r.get(k, "")) for k in keys] for r in rows]
    widths = [max(len(k), *(len(c[i]) for c in cells)) for i, k in enumerate(keys)]
    lines = ["  ".join(k.ljust(w) for k, w in zip(keys, widths))]
    lines += ["  ".join(c.ljust(w) for c, w in zip(row, widths)) for row in cells]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=200000, help="operand pairs per division row")
    parser.add_argument("--json", help="also write the numbers to this file")
    args = parser.parse_args()
    facts = sorted(capabilities.PROGRAM_FACTS.get(capabilities.platform(), {}))
    report = {
        "platform": capabilities.platform(),
        "facts": facts,
        "division": division_rows(args.n),
        "float64_round_trip": round_trip_rows(),
        "igamma_float32": igamma_rows(),
        "lgamma_pow_float32": gamma_rows(args.n),
    }
    print(f"platform {report['platform']}; facts: {', '.join(facts) or 'none'}")
    for key in ("division", "float64_round_trip", "igamma_float32", "lgamma_pow_float32"):
        print(f"\n{key}\n{_table(report[key])}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1)


if __name__ == "__main__":
    main()
