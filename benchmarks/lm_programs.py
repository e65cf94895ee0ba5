"""Issue 37: the GPT LM's bf16 training step as jaxdev lowers it (compiled under fused eager, or with
--mode the model compiled and the optimizer recorded, or fused eager alone: one XLA program per step) against the hand-written `jax.jit` step (benchmarks/tpu_gpt_jax.py), program
against program: where does jaxdev's program spend the device time jax.jit's does not?

Each implementation runs in its own process (jaxdev's x64 mode stays out of the JAX one) with XLA's
dump on; the step's program is the dump's largest optimized module. Printed, side by side:
* device ms per step (the profiler's device op events on a TPU; on CPU, wall ms per step);
* the entry computation's instructions: count, bytes of their outputs (the memory traffic a TPU
  pays: every fusion output is written to HBM and read back), converts, copies/transposes;
* products: count, flops, operand dtypes and precision, grouped by shape;
* the largest instructions by device time (TPU) or by output bytes (CPU), with what they compute;
* with the TPU cost model (--tpu, --hlo): its cycles by source line, and grouped by result shape on
  both sides, largest differences first.

    python benchmarks/lm_programs.py --size quick            # CPU rehearsal
    python benchmarks/lm_programs.py --size full --out $OUT  # on a TPU (PYTHONPATH as tpu_check.sh)
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import json
import os
import re
import subprocess
import sys
import tempfile
import time

import hlo_source

HERE = os.path.dirname(os.path.abspath(__file__))
_BYTES = {"pred": 1, "s8": 1, "u8": 1, "bf16": 2, "f16": 2, "s16": 2, "u16": 2, "f32": 4, "s32": 4, "u32": 4}
_SHAPE = re.compile(r"\b(pred|[a-z]+\d+)\[([\d,]*)\]")
_INSTR = re.compile(r"^\s*(?:ROOT )?%(\S+) = (.*?) ([a-z][a-z0-9_-]*)\((.*)$")
_CALLS = re.compile(r"calls=%([\w.\-]+)")
_SKIP = {"parameter", "get-tuple-element", "tuple", "bitcast", "constant"}


# --- the child: one implementation's step, run and profiled -----------------------------------------


def _jaxdev_step(size: str):
    """(call, wait, program): program() is (fn, avals) of the fused program the last call ran."""
    os.environ["TPUCHECK_SIZE"] = size
    import jax
    import numpy as np
    import torch
    import tpu_gpt
    import tpu_jaxdev  # the jax device, registered

    from jaxdev import rng, tracing
    from jaxdev.fused import program as fused

    seen, call_program = {}, fused._call

    def spy(spec, inputs, numbers):
        arrays = inputs.arrays()
        if numbers:
            arrays[-1] = np.asarray(numbers, np.float64)
        seen["last"] = spec, [jax.ShapeDtypeStruct(s, a.dtype) for a, s in zip(arrays, spec.array_shapes)]
        return call_program(spec, inputs, numbers)

    def program():
        spec, avals = seen["last"]

        def traced(arrays, base):  # as fused/program.py's _call traces it
            was, tracing.checks.eager_layouts = tracing.checks.eager_layouts, True
            try:
                return spec._trace(arrays, base)
            finally:
                tracing.checks.eager_layouts = was

        base = rng.traced_base()
        return traced, (avals, jax.ShapeDtypeStruct(base.shape, base.dtype))

    fused._call = spy
    mode = os.environ.get("LM_PROGRAMS_MODE", "compiled+fused")  # --mode, handed down to the child
    variant = tpu_jaxdev.lm_variant(tpu_gpt.Config(size), torch.bfloat16, mode)()
    return variant.call, variant.wait, program


def _jax_step(size: str):
    os.environ["TORCH_DEVICE_BACKEND_AUTOLOAD"] = "0"
    import jax
    import jax.numpy as jnp
    import numpy as np
    import tpu_gpt_jax

    step, update, state = tpu_gpt_jax.train_step(tpu_gpt_jax.Config(size), jnp.bfloat16)
    return step, jax.block_until_ready, lambda: (update, (state["p"], state["m"], state["v"], np.float32(1)))


def _op_name(event: str) -> str:
    """The instruction's name: JAX 0.10.2's profiler on the chip names an op event by the whole
    instruction text ('%fusion.1 = (bf16[...]) fusion(...)'), earlier ones by the name alone."""
    head = event.split(" = ", 1)[0]
    return head.lstrip("%")


def _device_ops(call, wait, steps: int) -> tuple[dict, float]:
    """({device op name: ns per step}, device ns per step from 'XLA Modules') over `steps` steps;
    empty where the profiler sees no device (CPU)."""
    import tpu_measure

    ops, modules = collections.Counter(), 0.0
    for plane in tpu_measure.profiled_planes(call, wait, steps):
        if not plane.name.startswith("/device:") or plane.name.endswith("CPU:0"):
            continue
        for line in plane.lines:
            if line.name == "XLA Ops":
                for e in line.events:
                    ops[_op_name(e.name)] += e.duration_ns / steps
            elif line.name == "XLA Modules":
                modules += sum(e.duration_ns for e in line.events) / steps
    return dict(ops), modules


def child(impl: str, size: str, steps: int, out: str, tpu: bool) -> None:
    sys.path.insert(0, HERE)
    call, wait, program = (_jaxdev_step if impl == "jaxdev" else _jax_step)(size)
    for _ in range(3):  # compile, learn, settle
        wait(call())
    t0 = time.perf_counter()
    for _ in range(steps):
        r = call()
    wait(r)
    wall = (time.perf_counter() - t0) / steps
    ops, device = _device_ops(call, wait, steps)
    result = {"wall_ms": wall * 1e3, "device_ms": device / 1e6, "ops_ns": ops}
    if tpu:  # the same program through a TPU v5e's compiler, no chip needed (tpu_aot.py)
        import tpu_aot

        fn, avals = program()
        began = time.perf_counter()
        with tpu_aot.as_tpu() if impl == "jaxdev" else contextlib.nullcontext():
            text, result["tpu_cost"] = tpu_aot.compile_for_tpu(fn, *avals)
        result["tpu_compile_s"] = time.perf_counter() - began  # trace, lower and the TPU compile
        with open(out + ".tpu.hlo.txt", "w") as f:
            f.write(text)
    with open(out, "w") as f:
        json.dump(result, f)


# --- reading an optimized HLO module ----------------------------------------------------------------


def nbytes(type_text: str) -> int:
    total = 0
    for dt, dims in _SHAPE.findall(type_text):
        n = 1
        for d in filter(None, dims.split(",")):
            n *= int(d)
        total += n * _BYTES.get(dt, 8 if dt.endswith("64") else 4)
    return total


def computations(text: str) -> dict[str, list]:
    """name -> [(instruction, type, opcode, rest)], 'ENTRY' for the entry computation."""
    comps, cur = {}, None
    for line in text.split("\n"):
        if line.startswith("ENTRY ") or (line.startswith("%") and line.rstrip().endswith("{")):
            name = "ENTRY" if line.startswith("ENTRY ") else line.split()[0].lstrip("%")
            cur = comps.setdefault(name, [])
        elif line.startswith("}"):
            cur = None
        elif cur is not None and (m := _INSTR.match(line)):
            cur.append(m.groups())
    return comps


def _products(comps, name, seen=None) -> list[tuple]:
    """The dots and convolutions computation `name` runs, called computations included:
    (result type, operand types, precision, flops)."""
    seen = set() if seen is None else seen
    found = []
    types = {i[0]: i[1] for i in comps.get(name, ())}
    for _, typ, op, rest in comps.get(name, ()):
        if op in ("dot", "convolution"):
            operands = re.findall(r"%([\w.\-]+)", rest.split(")")[0])
            otypes = [types.get(o, "?").split("{")[0] for o in operands]
            prec = re.search(r"operand_precision=\{([^}]*)\}", rest)
            found.append(
                (typ.split("{")[0], tuple(otypes), prec.group(1) if prec else "default", _flops(typ, otypes, rest))
            )
        for callee in _CALLS.findall(rest) + re.findall(r"to_apply=%([\w.\-]+)", rest):
            if callee not in seen:
                seen.add(callee)
                found += _products(comps, callee, seen)
    return found


def _dims(type_text: str) -> list[int]:
    m = _SHAPE.search(type_text)
    return [int(d) for d in m.group(2).split(",") if d] if m else []


def _flops(typ: str, otypes: list, rest: str) -> int:
    out = 1
    for d in _dims(typ):
        out *= d
    contract = re.search(r"lhs_contracting_dims=\{([\d,]*)\}", rest)
    lhs = _dims(otypes[0]) if otypes else []
    k = 1
    if contract and lhs:
        for d in filter(None, contract.group(1).split(",")):
            k *= lhs[int(d)]
    return 2 * out * k


def _kind(comps, op: str, rest: str) -> str:
    """A short description of an entry instruction: the opcode, or a fusion's opcodes inside."""
    if op != "fusion":
        return op
    callee = _CALLS.search(rest)
    inner = collections.Counter(i[2] for i in comps.get(callee.group(1), ()) if i[2] not in _SKIP) if callee else {}
    return "fusion[" + ",".join(f"{o}{f'x{c}' if c > 1 else ''}" for o, c in inner.most_common(4)) + "]"


def summarize(path: str, ops_ns: dict) -> dict:
    with open(path) as f:
        text = f.read()
    comps = computations(text)
    entry = comps["ENTRY"]
    types = {i[0]: i[1] for i in entry}
    rows, hist, scalars = [], collections.Counter(), 0
    for name, typ, op, rest in entry:
        if op in _SKIP:
            continue
        scalars += bool(re.fullmatch(r"[a-z]+\d*\[\]", typ.split("{")[0]))
        inputs = sum(nbytes(types[o]) for o in re.findall(r"%([\w.\-]+)", rest.split("calls=")[0]) if o in types)
        kind = _kind(comps, op, rest)
        hist[op] += 1
        row = dict(name=name, type=typ.split("{")[0][:70], kind=kind[:90], out=nbytes(typ), inp=inputs)
        ns = ops_ns.get(name, ops_ns.get(_op_name(name), 0.0))
        rows.append(dict(row, ns=ns, cycles=hlo_source.cycles(rest)))
    products = _products(comps, "ENTRY")
    converts = sum(1 for c in comps.values() for i in c if i[2] == "convert")
    sources = hlo_source.by_source(text, entry)
    return dict(
        rows=rows,
        hist=hist,
        scalars=scalars,
        products=products,
        converts=converts,
        ns=sum(ops_ns.values()),
        sources=sources,
    )


# --- the parent: both children, then the comparison --------------------------------------------------


def _largest_module(dump: str) -> str:
    files = [f for f in os.listdir(dump) if f.endswith("after_optimizations.txt")]
    return os.path.join(dump, max(files, key=lambda f: os.path.getsize(os.path.join(dump, f))))


def run_child(impl: str, size: str, steps: int, work: str, tpu: bool) -> tuple[dict, str]:
    dump, out = os.path.join(work, impl), os.path.join(work, impl + ".json")
    env = dict(os.environ, XLA_FLAGS=f"{os.environ.get('XLA_FLAGS', '')} --xla_dump_to={dump}".strip())
    env.setdefault("JAXDEV_CACHE_DIR", "off")
    env["JAX_ENABLE_COMPILATION_CACHE"] = "false"  # a program loaded from a cache is not dumped
    cmd = [
        sys.executable,
        os.path.abspath(__file__),
        "--child",
        impl,
        "--size",
        size,
        "--steps",
        str(steps),
        "--json",
        out,
    ]
    subprocess.run(cmd + (["--tpu"] if tpu else []), env=env, check=True)
    return json.load(open(out)), (out + ".tpu.hlo.txt" if tpu else _largest_module(dump))


def _print_products(label: str, products: list) -> None:
    groups = collections.Counter((p[0], p[1], p[2]) for p in products)
    flops = sum(p[3] for p in products)
    print(f"  {label}: {len(products)} products, {flops / 1e9:.1f} GFLOP")
    for (typ, ops, prec), n in sorted(groups.items(), key=lambda kv: -kv[1]):
        print(f"    {n:3d} x {typ} <- {' x '.join(ops)} precision {prec}")


def _print_top(label: str, s: dict, top: int) -> None:
    key = "ns" if s["ns"] > 0 else "cycles" if any(r["cycles"] for r in s["rows"]) else "out"
    rows = sorted(s["rows"], key=lambda r: -r[key])[:top]
    print(f"  {label}: top {top} by {dict(ns='device time', cycles='estimated cycles', out='output bytes')[key]}")
    for r in rows:
        t = f"{r['ns'] / 1e3:8.1f} us " if key == "ns" else f"{r['cycles'] / 1e3:8.1f} kcyc " if key == "cycles" else ""
        print(f"    {t}{r['out'] / 1e6:7.2f} MB out {r['inp'] / 1e6:7.2f} MB in  {r['type']:<40} {r['kind']}")


def _print_sources(sums: dict, top: int) -> None:
    """The TPU cost model's cycles by source line, each implementation's largest first."""
    for impl, s in sums.items():
        total = sum(s["sources"].values())
        if not total:
            continue
        print(f"  {impl}: estimated cycles {total / 1e6:.2f} M by source line")
        for where, c in s["sources"].most_common(top):
            print(f"    {c / 1e6:7.3f} M  {where}")


def _print_shape_differences(sums: dict, top: int) -> None:
    """The entry's estimated cycles grouped by (first result shape, product or opcode), jaxdev's less
    jax.jit's, largest differences first: where the two programs part, whatever the fusions are named."""
    (a, sa), (b, sb) = list(sums.items())[:2]
    if not any(r["cycles"] for r in sa["rows"]):
        return
    groups = collections.defaultdict(dict)
    for impl, s in ((a, sa), (b, sb)):
        for r in s["rows"]:
            kind = "product" if re.search(r"dot|convolution", r["kind"]) else r["kind"].split("[")[0]
            shape = _SHAPE.search(r["type"])
            sides = groups[(shape.group(0) if shape else r["type"], kind)]
            cycles, count = sides.get(impl, (0, 0))
            sides[impl] = (cycles + r["cycles"], count + 1)
    print(f"  estimated cycles by result shape, {a} less {b} (k cycles / instructions each side)")
    key = lambda kv: -abs(kv[1].get(a, (0, 0))[0] - kv[1].get(b, (0, 0))[0])
    for (shape, kind), sides in sorted(groups.items(), key=key)[:top]:
        (ca, na), (cb, nb) = sides.get(a, (0, 0)), sides.get(b, (0, 0))
        print(f"    {(ca - cb) / 1e3:+9.1f}k  {ca / 1e3:8.1f}k/{na:<4d} {cb / 1e3:8.1f}k/{nb:<4d} {shape} {kind}")


def _by_kind(s: dict) -> collections.Counter:
    c = collections.Counter()
    weight = "ns" if s["ns"] else "cycles" if any(r["cycles"] for r in s["rows"]) else "out"
    for r in s["rows"]:
        k = "product" if re.search(r"dot|convolution", r["kind"]) else r["kind"].split("[")[0]
        if "convert" in r["kind"] and k == "fusion" and len(r["kind"]) < 40:
            k = "convert-only fusion"
        c[k] += r[weight]
    return c


def _print_matching(ops_ns: dict, rows: list) -> None:
    """How much of the profiler's device op time found its instruction in the module: on the chip on
    2026-12-07 every instruction showed 0 us, so say what the events are named when they miss."""
    if not ops_ns:
        return
    names = {_op_name(r["name"]) for r in rows}
    missed = {k: v for k, v in ops_ns.items() if _op_name(k) not in names}
    total = sum(ops_ns.values())
    print(
        f"  profiler: {len(ops_ns)} op names, {total / 1e6:.2f} ms/step; {len(ops_ns) - len(missed)} found in the "
        f"module ({(total - sum(missed.values())) / 1e6:.2f} ms)"
    )
    if missed:
        largest = sorted(missed.items(), key=lambda kv: -kv[1])[:6]
        print("    not found, largest: " + "; ".join(f"{k!r} {v / 1e3:.0f} us" for k, v in largest))


def compare(results: dict, top: int) -> None:
    sums = {impl: summarize(path, res["ops_ns"]) for impl, (res, path) in results.items()}
    for impl, (res, path) in results.items():
        s = sums[impl]
        print(
            f"{impl}: wall {res['wall_ms']:.2f} ms/step, device {res['device_ms']:.2f} ms/step; {os.path.basename(path)}"
        )
        if "tpu_cost" in res:
            c = res["tpu_cost"]
            print(
                f"  TPU v5e compiler's estimate: {c.get('flops', 0) / 1e9:.1f} GFLOP, {c.get('bytes accessed', 0) / 1e6:.1f} MB accessed, "
                f"{c.get('transcendentals', 0) / 1e6:.1f} M transcendentals"
            )
        out = sum(r["out"] for r in s["rows"]) / 1e6
        inp = sum(r["inp"] for r in s["rows"]) / 1e6
        print(
            f"  entry instructions {sum(s['hist'].values())} ({s['scalars']} of 0-dim results): "
            f"{dict(s['hist'].most_common(8))}"
        )
        if "tpu_compile_s" in res:
            print(f"  TPU compile (deviceless, trace included): {res['tpu_compile_s']:.1f} s")
        print(f"  bytes: outputs {out:.1f} MB, operands read {inp:.1f} MB; converts (all computations) {s['converts']}")
        _print_matching(res["ops_ns"], s["rows"])
        cyc = sum(r["cycles"] for r in s["rows"])
        if cyc:
            print(f"  TPU cost model: {cyc / 1e6:.2f} M estimated cycles in the entry's instructions")
        unit = "us device" if s["ns"] else "M cycles" if cyc else "MB out"
        scale = 1e3 if s["ns"] else 1e6
        print(f"  by kind ({unit}): " + ", ".join(f"{k} {v / scale:.0f}" for k, v in _by_kind(s).most_common(8)))
        _print_products("products", s["products"])
    for impl in results:
        _print_top(impl, sums[impl], top)
    _print_sources(sums, top)
    _print_shape_differences(sums, top)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--size", default="quick", choices=("quick", "full"))
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--top", type=int, default=25)
    p.add_argument("--out", help="folder to keep the dumps' step modules and the profiles in")
    p.add_argument(
        "--tpu", action="store_true", help="compare the programs as a TPU v5e's compiler makes them (tpu_aot.py)"
    )
    p.add_argument(
        "--hlo",
        nargs=2,
        metavar=("JAXDEV", "JAXJIT"),
        help="compare two saved step modules (--out's *_step.hlo.txt) without running",
    )
    p.add_argument(
        "--mode",
        default="compiled+fused",
        choices=("compiled+fused", "model-compiled+fused", "fused"),
        help="jaxdev's mode whose one program a step is compared (fused: fused eager's recorded step)",
    )
    p.add_argument("--child", help=argparse.SUPPRESS)
    p.add_argument("--json", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:  # its mode is the parent's, in LM_PROGRAMS_MODE
        return child(args.child, args.size, args.steps, args.json, args.tpu)
    os.environ["LM_PROGRAMS_MODE"] = args.mode
    if args.hlo:
        none = {"wall_ms": 0.0, "device_ms": 0.0, "ops_ns": {}}
        return compare({"jaxdev": (none, args.hlo[0]), "jax.jit": (none, args.hlo[1])}, args.top)
    work = tempfile.mkdtemp(prefix="lm_programs_")
    results = {impl: run_child(impl, args.size, args.steps, work, args.tpu) for impl in ("jaxdev", "jax.jit")}
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        for impl, (res, path) in results.items():
            tag = impl.replace(".", "")
            subprocess.run(["cp", path, os.path.join(args.out, f"{tag}_step.hlo.txt")], check=True)
            with open(os.path.join(args.out, f"{tag}_profile.json"), "w") as f:
                json.dump(res, f)
    compare(results, args.top)


if __name__ == "__main__":
    main()
