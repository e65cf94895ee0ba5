"""Which kernels this platform's XLA refuses or crashes on: float64/complex128 linear algebra and FFT, the
dtype carriers (complex32 over uint32, the bit dtypes, float8, bool, complex64/128) and the raw JAX
programs behind them, each case tried in a worker process that a crash does not take the probe down with.

    python benchmarks/tpu_probe_kernels.py [--groups linalg,programs,dtypes] [--json kernels.json] [--budget 300]
    python benchmarks/tpu_probe_kernels.py --without-chip   # on CPU: XLA's TPU compiler, no chip

--without-chip runs the workers as stand-ins for a TPU (jaxdev/audit/deviceless.py: every program also
compiled by XLA's TPU compiler for a v5e, from libtpu, values from CPU): refusals and aborts are the
compiler's, differences from CPU are the TPU formulations' only (not the chip's rounding).

The parent never starts JAX (on a TPU one process may hold the chip): a worker runs the cases in order,
printing START before each and DONE with its outcome after; if the worker dies (XLA's TPU compiler
aborted: SIGABRT), the case it had started is recorded as `crash` with the signal, and a new worker goes
on after it (each start costs ~10-15 s on a TPU). Outcomes: ok (with the largest difference from CPU's
result, relative to its largest magnitude), raises (the error's first line), crash, timeout, not run
(past --budget). Linear algebra runs with jaxdev's platform gaps ignored (ops/kit/capabilities.py): the probe
asks what XLA itself refuses. The lead runs it on the TPU (scripts/tpu_probe.sh).
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time

GROUPS = ("linalg", "programs", "dtypes", "widened")
CASE_TIMEOUT_S = 150
HERE = os.path.dirname(os.path.abspath(__file__))

# --- the cases (built in the worker: they import torch and jaxdev) -----------------------------------

LINALG_DTYPES = ("float32", "float64", "complex64", "complex128")
LINALG = {
    "lu_factor": lambda a: torch.linalg.lu_factor(a),
    "inv": lambda a: torch.linalg.inv(a),
    "det": lambda a: torch.linalg.det(a),
    "slogdet": lambda a: torch.linalg.slogdet(a),
    "solve": lambda a: torch.linalg.solve(a, a[..., :2]),
    "cholesky": lambda a: torch.linalg.cholesky(a @ a.mH),
    "solve_triangular": lambda a: torch.linalg.solve_triangular(a.triu(), a, upper=True),
    "qr": lambda a: torch.linalg.qr(a),
    "householder_product": lambda a: torch.linalg.householder_product(*torch.geqrf(a)),
    "svd": lambda a: torch.linalg.svd(a),
    "svdvals": lambda a: torch.linalg.svdvals(a),
    "eigh": lambda a: torch.linalg.eigh(a + a.mH),
    "eig": lambda a: torch.linalg.eig(a),
    "lstsq": lambda a: torch.linalg.lstsq(a, a[..., :2]).solution,
    "ldl_factor": lambda a: torch.linalg.ldl_factor(a + a.mT),
    "matrix_exp": lambda a: torch.linalg.matrix_exp(a / 4),
    "fft": lambda a: torch.fft.fft(a),
    "rfft": lambda a: torch.fft.rfft(a.real if a.is_complex() else a),
    "irfft": lambda a: torch.fft.irfft(torch.fft.rfft(a.real if a.is_complex() else a)),
}

# float32/complex64 kernels that compute in float64/complex128 (for CPU's accuracy), which a TPU emulates
# or lacks: name -> (fn of a CPU tensor of positive values in (0.1, 3), its dtype)
WIDENED = {
    "sinh float32": (lambda t: torch.sinh(t), "float32"),
    "cosh float32": (lambda t: torch.cosh(t), "float32"),
    "exp2 float32": (lambda t: torch.exp2(t), "float32"),
    "erfinv float32": (lambda t: torch.erfinv(t / 4), "float32"),
    "lgamma float32": (lambda t: torch.lgamma(t), "float32"),
    "igamma float32": (lambda t: torch.special.gammainc(t, t.flip(0)), "float32"),
    "polygamma float32": (lambda t: torch.polygamma(2, t), "float32"),
    "zeta float32": (lambda t: torch.special.zeta(t + 1, t), "float32"),
    "i0e float32": (lambda t: torch.special.i0e(t), "float32"),
    "bessel_j0 float32": (lambda t: torch.special.bessel_j0(t), "float32"),
    "logcumsumexp float32": (lambda t: torch.logcumsumexp(t, 0), "float32"),
    "logcumsumexp complex64": (lambda t: torch.logcumsumexp(t, 0), "complex64"),
    "atanh complex64": (lambda t: torch.atanh(t / 4), "complex64"),
    "asin complex64": (lambda t: torch.asin(t), "complex64"),
    "atan complex64": (lambda t: torch.atan(t), "complex64"),
    "log complex64": (lambda t: torch.log(t), "complex64"),
    "exp complex64": (lambda t: torch.exp(t), "complex64"),
    "vector_norm float32": (lambda t: torch.linalg.vector_norm(t, 3), "float32"),
    "batch_norm float32": (
        lambda t: torch.nn.functional.batch_norm(t.reshape(2, 4, 2), None, None, training=True),
        "float32",
    ),
    "group_norm float32": (lambda t: torch.nn.functional.group_norm(t.reshape(2, 4, 2), 2), "float32"),
    "linspace float32": (lambda t: torch.linspace(0, 1, 16, device=t.device), "float32"),
    "histc float32": (lambda t: torch.histc(t, 5), "float32"),
    "grid_sample float32": (
        lambda t: torch.nn.functional.grid_sample(
            t.reshape(1, 1, 4, 4), t.reshape(1, 2, 4, 2) / 3 - 0.5, align_corners=False
        ),
        "float32",
    ),
    "interpolate float32": (
        lambda t: torch.nn.functional.interpolate(t.reshape(1, 1, 16), scale_factor=1.7),
        "float32",
    ),
    "pow float32": (lambda t: torch.pow(t, t.flip(0)), "float32"),
    "cumsum float32": (lambda t: torch.cumsum(t, 0), "float32"),
    "std float32": (lambda t: torch.std(t), "float32"),
}

# dtype carriers: (dtype name, ops to try on it); a CPU refusal is `raises` on both sides
_BITS = ["bits8", "bits16", "bits1x8", "bits2x4", "bits4x2", "float4_e2m1fn_x2"]  # held as raw bytes
_FLOAT8 = ["float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz", "float8_e8m0fnu"]
CARRIERS = ["complex32", "complex64", "complex128", "bool", *_FLOAT8, *_BITS, "uint16", "uint32", "uint64"]
CARRIER_OPS = {
    "empty": lambda dt: torch.empty(3, dtype=dt, device="jax"),
    "zeros": lambda dt: torch.zeros(3, dtype=dt, device="jax"),
    "scalar_tensor_1": lambda dt: torch.scalar_tensor(1, dtype=dt, device="jax"),
    "scalar_tensor_complex": lambda dt: torch.scalar_tensor(1 + 2j, dtype=dt, device="jax"),
    "full_complex": lambda dt: torch.full((3,), 5 + 6j, dtype=dt, device="jax"),
    "from_cpu": lambda dt: torch.zeros(4, dtype=dt).to("jax"),
    "clone": lambda dt: torch.zeros(4, dtype=dt).to("jax").clone(),
    "to_cpu": lambda dt: torch.zeros(4, dtype=dt).to("jax").cpu(),
    "view_uint8": lambda dt: torch.zeros(4, dtype=dt).to("jax").view(torch.uint8),
    "cat": lambda dt: torch.cat([torch.zeros(2, dtype=dt).to("jax")] * 2),
    "index": lambda dt: torch.zeros(4, dtype=dt).to("jax")[1:3].contiguous(),
    "setitem_complex": lambda dt: _setitem(torch.zeros(2, dtype=dt).to("jax"), 5 + 6j),
    "fill_1": lambda dt: torch.zeros(2, dtype=dt).to("jax").fill_(1),
    "to_float32": lambda dt: torch.zeros(2, dtype=dt).to("jax").to(torch.float32),
    "from_float32": lambda dt: torch.ones(2, device="jax").to(dt),
    "add": lambda dt: torch.ones(2, dtype=dt).to("jax") + torch.ones(2, dtype=dt).to("jax"),
    "mul_2": lambda dt: torch.ones(2, dtype=dt).to("jax").mul_(2),
    "neg": lambda dt: -torch.ones(2, dtype=dt).to("jax"),
    "conj_resolve": lambda dt: torch.ones(2, dtype=dt).to("jax").conj().resolve_conj(),
    "where": lambda dt: torch.where(
        torch.tensor([True, False], device="jax"), *[torch.ones(2, dtype=dt).to("jax")] * 2
    ),
    "sum": lambda dt: torch.ones(3, dtype=dt).to("jax").sum(),
    "eq": lambda dt: torch.ones(2, dtype=dt).to("jax") == torch.zeros(2, dtype=dt).to("jax"),
}


def _setitem(t, value):
    t[0] = value
    return t


def _conj_and_neg_views(device):
    """tests/ops/test_views.py::test_conj_and_neg_views, where pytest aborted on the TPU."""
    c = torch.tensor([1 + 2j, 3 - 4j], device=device)
    cj = c.conj()
    values = cj.clone(), cj.imag.clone(), cj.is_conj()
    cj[0] = 5 + 6j
    cj.mul_(2)
    return c, cj, cj.resolve_conj(), values


def _programs():
    """Raw JAX programs of the kinds jaxdev's kernels compile: 64-bit parameters and bitcasts, complex128,
    float8 and sub-byte integer converts."""
    import jax.numpy as jnp
    import ml_dtypes
    import numpy as np

    def jit(fn, *args):
        return lambda: jax.block_until_ready(jax.jit(fn)(*args))

    f64, c128 = np.float64(1.5), np.complex128(1 + 2j)
    cases = {
        "f64 parameter": jit(lambda v: v * 3 + 1, f64),
        "c128 parameter": jit(lambda v: v * 3 + 1, c128),
        "python complex into complex64": jit(lambda v: jnp.full((2,), v, jnp.complex64), 1 + 2j),
        "python float into float32": jit(lambda v: jnp.full((2,), v, jnp.float32), 1.5),
        "s64 parameter": jit(lambda v: v * 3 + 1, np.int64(5)),
        "u64 shifts": jit(lambda v: (v << 40) >> 3, np.uint64(5)),
        "f64 -> s64 bitcast": jit(lambda v: jax.lax.bitcast_convert_type(v, jnp.int64), f64),
        "s64 -> f64 bitcast": jit(lambda v: jax.lax.bitcast_convert_type(v, jnp.float64), np.int64(5)),
        "u32[2] -> f64 bitcast": jit(lambda v: jax.lax.bitcast_convert_type(v, jnp.float64), np.ones(2, np.uint32)),
        "f32 -> u32 bitcast": jit(lambda v: jax.lax.bitcast_convert_type(v, jnp.uint32), np.float32(1.5)),
        "f16 bits in u32": jit(
            lambda v: jax.lax.bitcast_convert_type((v >> 16).astype(jnp.uint16), jnp.float16), np.ones(3, np.uint32)
        ),
        "u8[4] -> u32 bitcast": jit(lambda v: jax.lax.bitcast_convert_type(v, jnp.uint32), np.ones((2, 4), np.uint8)),
        "c128 -> c64 convert": jit(lambda v: v.astype(jnp.complex64), np.ones(2, np.complex128)),
        "c64 multiply": jit(lambda v: v * v, np.ones(2, np.complex64)),
        "f64 exp": jit(jnp.exp, np.ones(2)),
        "f16 dot HIGHEST -> f32": jit(lambda a: _dot(a, "HIGHEST"), np.ones((8, 8), np.float16)),
        "bf16 dot DEFAULT -> f32": jit(lambda a: _dot(a, "DEFAULT"), np.ones((8, 8), ml_dtypes.bfloat16)),
        "f32 dot HIGHEST": jit(lambda a: _dot(a, "HIGHEST", None), np.ones((8, 8), np.float32)),
        "nextafter f64": jit(jnp.nextafter, np.ones(2), np.zeros(2)),
    }
    for name in (
        "float8_e4m3fn",
        "float8_e5m2",
        "float8_e4m3fnuz",
        "float8_e5m2fnuz",
        "float8_e8m0fnu",
        "int4",
        "uint4",
    ):
        dt = getattr(ml_dtypes, name, None)
        if dt is not None:
            cases[f"f32 -> {name}"] = jit(lambda v, dt=dt: v.astype(dt).astype(jnp.float32), np.ones(3, np.float32))
    return cases


def _dot(a, precision, accumulate="float32"):
    return jax.numpy.matmul(a, a, precision=getattr(jax.lax.Precision, precision), preferred_element_type=accumulate)


def build(groups):
    """{case name: a zero-argument function returning (result on jax, result on CPU) or a jax value}."""
    cases = {}
    if "linalg" in groups:
        for name, fn in LINALG.items():
            for dt in LINALG_DTYPES:
                cases[f"linalg {name} {dt}"] = (fn, getattr(torch, dt))
    if "programs" in groups:
        cases.update({f"program {k}": v for k, v in _programs().items()})
    if "widened" in groups:
        for name, (fn, dt) in WIDENED.items():
            cases["widened " + name] = (_on_positive(fn, getattr(torch, dt)), "compare")
    if "dtypes" in groups:
        cases["scenario test_conj_and_neg_views"] = lambda: _conj_and_neg_views("jax")
        for dt in CARRIERS:
            if hasattr(torch, dt):
                dtype = getattr(torch, dt)
                for op, fn in CARRIER_OPS.items():
                    cases[f"dtype {dt} {op}"] = functools.partial(fn, dtype), None
    return cases


def _on_positive(fn, dtype):
    """(fn on jax, fn on CPU) of 16 values in (0.1, 3) of `dtype` (complex: a rotated copy)."""

    def run():
        g = torch.Generator().manual_seed(0)
        t = torch.rand(16, generator=g, dtype=torch.float64) * 2.9 + 0.1
        t = (t * (1 + 0.5j) if dtype.is_complex else t).to(dtype)
        return fn(t.to("jax")), fn(t)

    return run


def _difference(got, want) -> float:
    pairs = [(g, w) for g, w in zip(_tensors(got), _tensors(want)) if w.numel()]
    worst = 0.0
    for g, w in pairs:
        g, w = g.cpu().to(torch.complex128), w.to(torch.complex128)
        worst = max(worst, float((g - w).abs().max() / w.abs().max().clamp_min(1e-300)))
    return worst


def _tensors(x):
    if isinstance(x, torch.Tensor):
        return [x]
    if isinstance(x, (tuple, list)):
        return [t for item in x for t in _tensors(item)]
    return [t for t in (getattr(x, k, None) for k in ("eigenvalues", "solution")) if isinstance(t, torch.Tensor)]


def run_case(case) -> dict:
    from jaxdev.ops.kit import capabilities

    try:
        if callable(case):
            case()
            return {"status": "ok"}
        fn, dtype = case
        if dtype is None:
            fn()
            return {"status": "ok"}
        if dtype == "compare":
            got, want = fn()
            return {"status": "ok", "difference": _difference(got, want)}
        g = torch.Generator().manual_seed(0)
        a = torch.randn(5, 5, generator=g, dtype=dtype) + 5 * torch.eye(5, dtype=dtype)
        try:
            want = fn(a)
        except Exception as e:
            return {"status": "cpu refuses", "detail": f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"}
        with capabilities.ignored():
            got = fn(a.to("jax"))
        return {"status": "ok", "difference": _difference(got, want)}
    except Exception as e:  # the outcome is the point: any error is recorded, not raised
        lines = str(e).strip().splitlines() or [""]
        return {"status": "raises", "detail": f"{type(e).__name__}: {lines[0][:300]}"}


def worker(groups, start: int) -> None:
    global torch, jax
    import warnings

    if os.environ.get("JAXDEV_TPU_COMPILE"):  # --without-chip: before jaxdev makes any choice
        from jaxdev.audit import deviceless

        deviceless.install()
    import jax
    import torch

    import jaxdev  # noqa: F401

    warnings.simplefilter("ignore")
    cases = build(groups)
    for name in list(cases)[start:]:
        print("START " + name, flush=True)
        print("DONE " + json.dumps([name, run_case(cases[name])]), flush=True)


# --- the parent: runs workers, survives their crashes ---------------------------------------------------


def _describe(code: int) -> str:
    if code < 0:
        return f"killed by {signal.Signals(-code).name}"
    return f"exit code {code}"


def _lines(stream, out: queue.Queue) -> None:
    for line in stream:
        out.put(line)
    out.put(None)


def _run_worker(groups, start: int, results: dict, deadline: float, env: dict):
    """One worker from case `start`: (the case it died in or None, its exit code, its stderr's tail)."""
    cmd = [
        sys.executable,
        "-X",
        "faulthandler",
        __file__,
        "--worker",
        "--from",
        str(start),
        "--groups",
        ",".join(groups),
    ]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    lines: queue.Queue = queue.Queue()
    threading.Thread(target=_lines, args=(proc.stdout, lines), daemon=True).start()
    current, last, timed_out = None, time.monotonic(), False
    while True:
        try:
            line = lines.get(timeout=5)
        except queue.Empty:
            line = ""
        if line is None:
            break
        if line.startswith("START "):
            current, last = line[6:].strip(), time.monotonic()
        elif line.startswith("DONE "):
            name, outcome = json.loads(line[5:])
            results[name], current = outcome, None
            print(f"{outcome['status']:8s} {name} {outcome.get('detail', outcome.get('difference', ''))}", flush=True)
        timed_out = current is not None and time.monotonic() - last > CASE_TIMEOUT_S
        if timed_out or time.monotonic() > deadline:
            proc.kill()
            break
    code = proc.wait()
    lines_err = [ln for ln in proc.stderr.read().splitlines() if ln.strip()]
    fatal = [ln for ln in lines_err if ln.startswith("F") and "] " in ln][-1:]  # XLA's fatal log line
    tail = fatal + lines_err[-6:]
    return current, code, tail, timed_out


def probe(groups, budget: float, env: dict) -> dict:
    results: dict = {}
    names = _case_names(groups)
    start, deadline = 0, time.monotonic() + budget
    while start < len(names) and time.monotonic() < deadline:
        current, code, tail, timed_out = _run_worker(groups, start, results, deadline, env)
        if current is None:
            if code != 0 and len(results) < len(names):
                print(f"worker failed outside a case ({_describe(code)}): {' | '.join(tail)}", flush=True)
            break
        status = "timeout" if timed_out else ("not run" if time.monotonic() > deadline else "crash")
        results[current] = {"status": status, "detail": _describe(code), "stderr": tail}
        print(f"{status:8s} {current} ({_describe(code)}): {' | '.join(tail[:1] + tail[-2:])}", flush=True)
        start = names.index(current) + 1
    for name in names:
        results.setdefault(name, {"status": "not run"})
    return results


def _case_names(groups) -> list:
    """The worker's case order, asked of a child that never starts JAX's backend."""
    code = f"import sys; sys.argv=['x']; sys.path.insert(0, {os.path.dirname(__file__)!r}); import tpu_probe_kernels as p, torch, jax; p.torch, p.jax = torch, jax; print('\\n'.join(p.build({list(groups)!r})))"
    env = dict(os.environ, JAX_PLATFORMS="cpu")
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env).stdout.splitlines()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--groups", default=",".join(GROUPS), help="comma-separated: " + ", ".join(GROUPS))
    parser.add_argument("--json", help="write the outcomes to this file")
    parser.add_argument("--budget", type=float, default=300, help="seconds before no new case starts")
    parser.add_argument("--without-chip", action="store_true", help="on CPU, through XLA's TPU compiler (no chip)")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--from", dest="start", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    groups = [g for g in args.groups.split(",") if g]
    if args.worker:
        worker(groups, args.start)
        return 0
    env = dict(os.environ)
    if args.without_chip:
        sys.path.insert(0, os.path.dirname(HERE))
        from jaxdev.audit import deviceless

        env = deviceless.environment(env)
    results = probe(groups, args.budget, env)
    counts: dict = {}
    for outcome in results.values():
        counts[outcome["status"]] = counts.get(outcome["status"], 0) + 1
    print("summary: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
    for status in ("crash", "timeout"):
        for name, outcome in results.items():
            if outcome["status"] == status:
                print(f"{status}: {name} ({outcome['detail']})")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
