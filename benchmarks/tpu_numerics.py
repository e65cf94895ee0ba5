"""float32 transcendentals on this platform against CPU PyTorch: XLA's own against jaxdev's
(jaxdev/ops/kit/transcendentals.py), in ulps and in time; then other XLA functions, float64 facts and the
user-facing torch ops on the jax device (JAXDEV_MATH as set: the default chooses by platform).

    python benchmarks/tpu_numerics.py [--n 100000] [--size 4194304] [--json numerics.json]

Per function: max and mean ulps from torch's CPU float32 result over --n values (uniform and
log-uniform over the function's domain, plus edge cases: 0, -0, +-inf, NaN, huge, tiny, exp's
overflow), leaving out subnormal inputs and results, which this platform may flush (counted apart as
`flushed`: a platform fact, XLA's CPU backend flushes them too); `xla/jaxdev` then `time` is jaxdev's
time over XLA's for one call on --size values. `own` is what the TPU gets by default. The lead runs it
on the TPU (scripts/tpu_probe.sh); on CPU it measures the cost there.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np
import torch

import jaxdev  # noqa: F401  (the device, and x64 as jaxdev runs it)
from jaxdev.ops.kit import transcendentals as tm

_TINY = {np.dtype(np.float32): np.float32(2.0**-126), np.dtype(np.float64): np.float64(2.0**-1022)}
_EDGES = [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45, -1e-45, 1e-38, 3.4e38, -3.4e38, 1.0, -1.0, 0.5, 2.0]
_EDGES += [88.72283, 88.7229, -87.3, -103.9, -104.0, 10.0, -10.0, 0.625, 0.84375, 1.25, 2.857, 9.5, 20.0, 1e-8]


def ulps(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """|a - b| in units in the last place of their dtype (NaN == NaN; NaN against a number: inf)."""
    bits = {4: np.int32, 8: np.int64}[a.dtype.itemsize]
    ia, ib = (x.view(bits).astype(np.int64) for x in (a, b))
    top = np.int64(np.iinfo(bits).max)
    ma, mb = ia & top, ib & top  # magnitudes, which order the values of one sign
    same = (ia < 0) == (ib < 0)
    d = np.where(same, np.abs(ma - mb).astype(np.float64), ma.astype(np.float64) + mb.astype(np.float64))
    d[np.isnan(a) & np.isnan(b)] = 0
    d[np.isnan(a) ^ np.isnan(b)] = np.inf
    return d


def draw(rng, lo: float, hi: float, n: int, dtype=np.float32) -> np.ndarray:
    """Uniform on [lo, hi], log-uniform magnitudes up to |lo| (negative, where lo < 0) and hi, edges."""
    sides = [(1.0, hi)] + ([(-1.0, -lo)] if lo < 0 else [])
    parts = [rng.uniform(lo, hi, n - n // 2)]
    for sign, top in sides:
        parts.append(sign * np.exp(rng.uniform(math.log(1e-30), math.log(top), n // 2 // len(sides))))
    parts.append(np.array(_EDGES))
    x = np.concatenate(parts).astype(dtype)
    return x if lo < 0 else np.abs(x)


def compare(got: np.ndarray, want: np.ndarray, x: np.ndarray, truth: np.ndarray | None = None) -> dict:
    """ulps of `got` from CPU's `want` where CPU is within 2 ulps of `truth` (the float64 result
    rounded; everywhere without one), and from `truth` everywhere (`exact`); subnormal inputs and
    results apart (`flushed`: how many differ there), zeros of the wrong sign counted (`zero_sign`)."""
    tiny = _TINY[want.dtype]
    sub = ((np.abs(x) < tiny) & (x != 0)) | ((np.abs(want) < tiny) & (want != 0))
    if truth is not None:
        sub |= (np.abs(truth) < tiny) & (truth != 0)
    kept = ~sub if truth is None else ~sub & (ulps(want, truth) <= 2)
    d = ulps(got[kept], want[kept])
    flushed = int(np.sum(sub & (got != want) & ~(np.isnan(got) & np.isnan(want))))
    zeros = ~sub & (want == 0) & (got == 0)
    row = {"max": float(d.max()), "mean": float(d.mean()), "flushed": flushed}
    row["zero_sign"] = int(np.sum(zeros & (np.signbit(want) != np.signbit(got))))
    if truth is not None:
        row["exact"] = float(ulps(got[~sub], truth[~sub]).max())
        row["cpu_exact"] = float(ulps(want[~sub], truth[~sub]).max())
    return row


def _gelu_exact(t):
    """gelu through erfc: torch's float64 gelu, through 1 + erf, is 0 from x = -8.3 on."""
    return 0.5 * t * torch.special.erfc(-t / math.sqrt(2))


# functions whose float64 evaluation by torch is not their exact value: the one to use instead
_TRUTH = {torch.nn.functional.gelu: _gelu_exact}


def on_cpu(fn, x: np.ndarray):
    """(fn on CPU in x's dtype, fn in float64 rounded back: the reference and the exact value)."""
    t = torch.from_numpy(x)
    with np.errstate(over="ignore"):
        return fn(t).numpy(), _TRUTH.get(fn, fn)(t.double()).numpy().astype(x.dtype)


def seconds(fn, x, repeat: int = 10) -> float:
    fn(x).block_until_ready()
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn(x).block_until_ready()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def compiled(fn, mode: str):
    """`fn` jitted with its transcendentals chosen by JAXDEV_MATH=`mode` (fixed at trace time)."""
    jitted = jax.jit(lambda x: fn(x))  # a function of its own: jit's cache is keyed by the function

    def run(x):
        with tm.forced(mode):
            return jitted(x)

    return run


# name: (jaxdev's kit function, the torch CPU reference, domain)
KIT = {
    "exp": (tm.exp, torch.exp, (-110, 90)),
    "expm1": (tm.expm1, torch.expm1, (-20, 90)),
    "log": (tm.log, torch.log, (0, 3e38)),
    "log1p": (tm.log1p, torch.log1p, (-1, 1e6)),
    "log2": (tm.log2, torch.log2, (0, 3e38)),
    "log10": (tm.log10, torch.log10, (0, 3e38)),
    "tanh": (tm.tanh, torch.tanh, (-12, 12)),
    "sigmoid": (tm.sigmoid, torch.sigmoid, (-110, 110)),
    "erf": (tm.erf, torch.erf, (-5, 5)),
    "erfc": (tm.erfc, torch.erfc, (-5, 11)),
    "softplus": (tm.softplus, torch.nn.functional.softplus, (-30, 30)),
    "gelu": (lambda x: tm.gelu(x, False), torch.nn.functional.gelu, (-5, 12)),
    "gelu_tanh": (lambda x: tm.gelu(x, True), lambda t: torch.nn.functional.gelu(t, approximate="tanh"), (-5, 12)),
}


def kit_rows(rng, n: int, size: int) -> dict:
    rows = {}
    big = jnp.asarray(rng.uniform(-5, 5, size).astype(np.float32))
    for name, (fn, ref, (lo, hi)) in KIT.items():
        x = draw(rng, lo, hi, n)
        want, truth = on_cpu(ref, x)
        xla, own = compiled(fn, "fast"), compiled(fn, "own")
        row = {
            "xla": compare(np.asarray(xla(x)), want, x, truth),
            "jaxdev": compare(np.asarray(own(x)), want, x, truth),
        }
        probe = jnp.abs(big) + 1e-3 if lo >= 0 else big
        row["time"] = seconds(own, probe) / seconds(xla, probe)
        rows[name] = row
        print(
            f"{name:10s} xla max {row['xla']['max']:9.0f} mean {row['xla']['mean']:8.2f} | jaxdev max "
            f"{row['jaxdev']['max']:6.0f} mean {row['jaxdev']['mean']:6.3f} exact {row['jaxdev']['exact']:5.0f} "
            f"(cpu {row['jaxdev']['cpu_exact']:5.0f}) flushed {row['jaxdev']['flushed']:4d} "
            f"| time jaxdev/xla {row['time']:5.2f}",
            flush=True,
        )
    return rows


# XLA functions jaxdev does not replace (yet): name -> (jnp function, torch reference, domain, arity)
OTHERS = {
    "sin": (jnp.sin, torch.sin, (-100, 100), 1),
    "cos": (jnp.cos, torch.cos, (-100, 100), 1),
    "tan": (jnp.tan, torch.tan, (-10, 10), 1),
    "asin": (jnp.arcsin, torch.asin, (-1, 1), 1),
    "atan": (jnp.arctan, torch.atan, (-1e4, 1e4), 1),
    "sinh": (jnp.sinh, torch.sinh, (-80, 80), 1),
    "cosh": (jnp.cosh, torch.cosh, (-80, 80), 1),
    "asinh": (jnp.arcsinh, torch.asinh, (-1e4, 1e4), 1),
    "atanh": (jnp.arctanh, torch.atanh, (-1, 1), 1),
    "exp2": (jnp.exp2, torch.exp2, (-140, 120), 1),
    "sqrt": (jnp.sqrt, torch.sqrt, (0, 3e38), 1),
    "rsqrt": (jax.lax.rsqrt, torch.rsqrt, (0, 3e38), 1),
    "reciprocal": (jnp.reciprocal, torch.reciprocal, (-3e38, 3e38), 1),
    "lgamma": (jax.lax.lgamma, torch.lgamma, (0, 1e3), 1),
    "digamma": (jax.lax.digamma, torch.digamma, (0, 1e3), 1),
    "divide": (jnp.divide, torch.div, (-1e30, 1e30), 2),
    "pow": (jnp.power, torch.pow, (0, 100), 2),
    "atan2": (jnp.arctan2, torch.atan2, (-1e3, 1e3), 2),
}


def other_rows(rng, n: int, dtype) -> dict:
    rows = {}
    for name, (fn, ref, (lo, hi), arity) in OTHERS.items():
        args = [draw(rng, lo, hi, n, dtype) for _ in range(arity)]
        if name == "pow":
            args[1] = np.fmod(args[1], 20).astype(dtype) - 10
        want = ref(*(torch.from_numpy(a) for a in args)).numpy()
        truth = None
        if dtype == np.float32:
            truth = ref(*(torch.from_numpy(a).double() for a in args)).numpy().astype(dtype)
        got = np.asarray(jax.jit(fn)(*args))
        rows[name] = compare(got, want, args[0], truth)
        print(
            f"{np.dtype(dtype).name} {name:10s} xla max {rows[name]['max']:12.0f} mean {rows[name]['mean']:10.2f}",
            flush=True,
        )
    return rows


def float64_facts() -> dict:
    """Whether float64 keeps its range and precision here (a TPU emulates it with float32 pairs)."""
    values = np.array([1e300, -1e300, 1e-300, 5e-324, 1e-310, 1 / 3, 1 + 2.0**-52, 2.0**1000], np.float64)
    back = np.asarray(jax.jit(lambda v: v * 1.0 + 0.0)(values))
    third = float(np.asarray(jax.jit(lambda a, b: a / b)(np.float64(1), np.float64(3))))
    facts = {
        "kept": {repr(v): repr(b) for v, b in zip(values, back)},
        "one_third_ulps": float(ulps(np.array([third]), np.array([1 / 3]))[0]),
    }
    print(f"float64 round trip: {facts['kept']}; 1/3 off by {facts['one_third_ulps']} ulps", flush=True)
    return facts


def float32_facts() -> dict:
    """Subnormal flushing of float32 products and inputs on this platform."""
    product = float(np.asarray(jax.jit(lambda a, b: a * b)(np.float32(1e-30), np.float32(1e-10))))
    kept = float(np.asarray(jax.jit(lambda a: a + 0)(np.float32(1e-40))))
    facts = {"1e-30*1e-10": product, "1e-40+0": kept}
    print(f"float32 subnormals: 1e-30 * 1e-10 = {product!r}, 1e-40 + 0 = {kept!r} (CPU: 1e-40 both)", flush=True)
    return facts


def torch_rows(rng, n: int) -> dict:
    """The torch ops users call, on the jax device with this process's JAXDEV_MATH, against CPU."""
    F = torch.nn.functional
    ops = {
        "torch.exp": (torch.exp, (-100, 88)),
        "torch.log": (torch.log, (0, 1e30)),
        "torch.tanh": (torch.tanh, (-12, 12)),
        "torch.sigmoid": (torch.sigmoid, (-90, 90)),
        "F.softmax": (lambda t: F.softmax(t.reshape(-1, 100), -1).reshape(-1), (-30, 30)),
        "F.log_softmax": (lambda t: F.log_softmax(t.reshape(-1, 100), -1).reshape(-1), (-30, 30)),
        "F.gelu": (F.gelu, (-5, 12)),  # past -5 CPU's own erf (A&S 7.1.26) is far from exact
        "F.silu": (F.silu, (-80, 80)),  # past -87 the sigmoid is subnormal, which XLA flushes
        "F.mish": (F.mish, (-30, 30)),
        "F.elu": (F.elu, (-30, 30)),
        "F.logsigmoid": (F.logsigmoid, (-90, 90)),
        "torch.erf": (torch.erf, (-5, 5)),
        "torch.erfc": (torch.erfc, (-5, 11)),
        "torch.expm1": (torch.expm1, (-20, 88)),
        "torch.log1p": (torch.log1p, (-1, 1e6)),
        "torch.sinh": (torch.sinh, (-80, 80)),
        "torch.exp2": (torch.exp2, (-140, 120)),
        "torch.logcumsumexp": (lambda t: torch.logcumsumexp(t.reshape(-1, 100), -1).reshape(-1), (-30, 30)),
        "torch.special.entr": (torch.special.entr, (0, 1e3)),
        "torch.special.ndtri": (torch.special.ndtri, (0, 1)),
        "torch.special.log_ndtr": (torch.special.log_ndtr, (-30, 30)),
        "torch.special.i0": (torch.special.i0, (-80, 80)),
        "torch.special.i1": (torch.special.i1, (-80, 80)),
        "torch.special.erfcx": (torch.special.erfcx, (-9, 1e4)),
        "torch.logit": (torch.logit, (0, 1)),
        "torch.asinh": (torch.asinh, (-1e4, 1e4)),
        "torch.atanh": (torch.atanh, (-1, 1)),
        "torch.acosh": (torch.acosh, (1, 1e4)),
        "torch.lgamma": (torch.lgamma, (0, 1e3)),
    }
    rows = {}
    for name, (fn, (lo, hi)) in ops.items():
        x = draw(rng, lo, hi, n - n % 100 - len(_EDGES))
        x = np.concatenate([x, np.zeros(-len(x) % 100, np.float32)])
        want, truth = on_cpu(fn, x)
        got = fn(torch.from_numpy(x).to("jax")).cpu().numpy()
        rows[name] = compare(got, want, x, truth)
        row = rows[name]
        print(
            f"{name:22s} jax max {row['max']:9.0f} mean {row['mean']:8.3f} exact {row['exact']:9.0f} (cpu {row['cpu_exact']:9.0f})",
            flush=True,
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100_000, help="values per function (default 100,000)")
    parser.add_argument("--size", type=int, default=1 << 22, help="values per timed call (default 4M)")
    parser.add_argument("--json", help="also write the numbers to this file")
    parser.add_argument("--skip", default="", help="comma-separated sections to skip: kit,others,float64,torch")
    args = parser.parse_args()
    skip = set(filter(None, args.skip.split(",")))
    device = jax.devices()[0]
    print(f"{device.platform} ({device.device_kind}); jax {jax.__version__}; JAXDEV_MATH={tm.mode()}", flush=True)
    rng = np.random.default_rng(0)
    out = {"platform": device.platform, "device_kind": device.device_kind, "float32": float32_facts()}
    sections = {
        "kit": lambda: kit_rows(rng, args.n, args.size),
        "others": lambda: other_rows(rng, args.n, np.float32),
        "float64": float64_facts,
        "others_float64": lambda: other_rows(rng, args.n // 10, np.float64),
        "torch": lambda: torch_rows(rng, args.n),
    }
    for name, section in sections.items():
        if name.removeprefix("others_") in skip or name in skip:
            continue
        out[name] = section()
        if args.json:  # after each section: a run cut short by its time limit keeps what it measured
            with open(args.json, "w") as f:
                json.dump(out, f, indent=1)


if __name__ == "__main__":
    sys.exit(main())
