"""benchmarks/tpu_check.sh's table: the rows its processes wrote (JSON lines, in parts), merged by
(workload, implementation, mode) across the calls since the last `fresh`, with ratios to torchax's
jitted path and to hand-written `jax.jit`, and the checks that make the comparison fair: step 1's loss
on every side, greedy tokens and top-1 predictions against `jax.jit`'s, and the products each side's
programs lowered (dtype and precision). Rows a unit's time limit cut read "> N s (cut)".

    python benchmarks/tpu_report.py ROWS.jsonl [--run RUN] [--json results.json]
"""

from __future__ import annotations

import argparse
import json

ORDER = ["compiled", "compiled+fused", "model-compiled+fused", "fused", "op", "jitted", "hand-written"]
ORDER += ["foreach", "per tensor", "1 program", "eager", "donated"]
_RESET = ("first_s", "first_xla_s", "settle_s", "ms", "host_ms", "programs", "cut", "note", "error")


def _rank(mode: str) -> tuple:
    """A mode's place in the table: ORDER's, a math setting's variant ("fused [near]") after its mode."""
    base, _, math = mode.partition(" [")
    return (ORDER.index(base) if base in ORDER else 99, math)


def load(path: str) -> tuple[dict, dict, dict, list]:
    """(rows by key, meta by implementation, warnings by implementation, runs) from the rows file."""
    rows: dict[tuple, dict] = {}
    meta, warnings, units, runs = {}, {}, {}, []
    with open(path) as f:
        lines = [json.loads(line) for line in f if line.strip().startswith("{")]
    for part in lines:
        if part["run"] not in runs:
            runs.append(part["run"])
        event = part.get("event")
        if event == "meta":
            meta[part["impl"]] = part
        elif event == "warnings":
            warnings.setdefault(part["impl"], {}).update(part["warnings"])
        elif event == "unit-start":
            units[part["impl"]] = part
        elif event == "killed":
            _cut(rows, part, units.get(part["impl"]))
        elif "workload" in part:
            _merge(rows, part)
    return rows, meta, warnings, runs


def _merge(rows: dict, part: dict) -> None:
    k = (part["workload"], part["impl"], part["mode"])
    row = rows.setdefault(k, {"workload": k[0], "impl": k[1], "mode": k[2]})
    event = part.get("event")
    fields = {n: v for n, v in part.items() if n not in ("event", "t")}
    if event == "start":
        kind = part.get("first_kind")
        for n in [f"{kind}_s", f"{kind}_cut"] if kind else _RESET:
            row.pop(n, None)
        row["_started"] = (part["run"], part["t"], kind)
        return
    if event == "error":
        row["error"] = part.get("note")
    elif event == "skipped":
        row["note"] = "skipped: " + part.get("note", "")
    fields.pop("note", None)
    row.update(fields)
    if event == "done" or any(n in part for n in ("cold_s", "warm_s")):
        row.pop("_started", None)


def _cut(rows: dict, killed: dict, unit: dict | None) -> None:
    """The rows a killed process was measuring: how long they had run when the limit struck."""
    since = unit["t"] if unit else 0.0
    for row in rows.values():
        started = row.get("_started")
        if row["impl"] != killed["impl"] or not started or started[0] != killed["run"] or started[1] < since:
            continue
        _, t, kind = started
        seconds = killed["t"] - t
        if kind:
            row[f"{kind}_cut"] = seconds
        elif "first_s" not in row:
            row["cut"] = f"first step > {seconds:.0f} s (cut)"
        else:
            row["cut"] = "cut while timing"
        row.pop("_started", None)


def _reference(rows: dict, workload: str, impl: str) -> dict | None:
    for (w, i, _), row in rows.items():
        if w == workload and i == impl and row.get("ms"):
            return row
    return None


def _num(v, digits=2) -> str:
    if v is None:
        return "-"
    if abs(v) >= 100:
        return f"{v:.0f}"
    return f"{v:.{digits if abs(v) >= 1 else digits + 1}f}"


def _first(row: dict, kind: str) -> str:
    if f"{kind}_cut" in row:
        return f">{row[f'{kind}_cut']:.0f} cut"
    v = row.get(f"{kind}_s")
    if v is None:
        return "-"
    return _num(v, 1) + ("*" if kind == "first" and row.get("first_cache") == "reused" else "")


def _ratio(row: dict, ref: dict | None) -> str:
    if not row.get("ms") or not ref or ref is row:
        return "-"
    return _num(row["ms"] / ref["ms"]) + "x"


def table(rows: dict) -> list[str]:
    head = f"{'workload / implementation':<46} {'ms':>8} {'host ms':>8} {'progs':>6} {'first s':>9} {'xla s':>6} {'settle s':>8} {'cold s':>8} {'warm s':>8} {'/torchax':>8} {'/jax.jit':>8}"
    out = [head, "-" * len(head)]
    workloads = list(dict.fromkeys(k[0] for k in rows))
    for w in workloads:
        out.append(w)
        tx, jx = _reference(rows, w, "torchax"), _reference(rows, w, "jax.jit")
        keyed = sorted((k for k in rows if k[0] == w), key=lambda k: (k[1] != "jaxdev", _rank(k[2])))
        for k in keyed:
            row = rows[k]
            ms = row.get("ms")
            line = f"  {k[1] + ' ' + k[2]:<44} {_num(ms):>8} {_num(row.get('host_ms')):>8} {_num(row.get('programs'), 0):>6} "
            line += f"{_first(row, 'first'):>9} {_num(row.get('first_xla_s'), 1):>6} {_first(row, 'settle'):>8} {_first(row, 'cold'):>8} {_first(row, 'warm'):>8} {_ratio(row, tx):>8} {_ratio(row, jx):>8}"
            notes = [row[n] for n in ("cut", "error", "note") if row.get(n)]
            out.append(line + ("  " + "; ".join(str(n)[:90] for n in notes) if notes else ""))
    return out


def checks(rows: dict) -> dict:
    """Step 1's loss, tokens and top-1 predictions against jax.jit's; products lowered per side."""
    found: dict = {"loss1": {}, "agreement": {}, "products": {}}
    for (w, impl, mode), row in rows.items():
        ref = rows.get((w, "jax.jit", "hand-written"), {})
        if "loss1" in row:
            entry = {"loss1": row["loss1"]}
            if "loss1" in ref:
                delta = abs(row["loss1"] - ref["loss1"])
                # bf16 holds 8 significant bits: one unit in the last place of a loss near 9 is 2^-7 * 8
                tol = abs(ref["loss1"]) * (2**-7 if "bf16" in w else 1e-4)
                entry.update(delta=delta, within=delta <= tol, tolerance=tol)
            found["loss1"].setdefault(w, {})[f"{impl} {mode}"] = entry
        for name in ("tokens", "top1"):
            if name in row and name in ref and row[name]:
                same = sum(a == b for a, b in zip(row[name], ref[name])) / len(ref[name])
                found["agreement"].setdefault(w, {})[f"{impl} {mode}"] = f"{name} {same:.0%} as jax.jit's"
        if row.get("dots") is not None:
            found["products"].setdefault(w, {})[f"{impl} {mode}"] = (
                row["dots"] or "none lowered here (loaded from a cache)"
            )
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("rows")
    parser.add_argument("--run", default=None, help="this call's id (rows of earlier calls are marked)")
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    rows, meta, warnings, runs = load(args.rows)
    for impl, m in meta.items():
        # JAXDEV_MATH is a row's (its mode names a setting other than auto), not the last process's
        env = {k: v for k, v in m.get("env", {}).items() if k not in ("JAXDEV_CACHE_DIR", "JAXDEV_MATH")}
        print(
            f"{impl}: {m.get('device')} ({m.get('platform')}), jax {m.get('jax')}, torch {m.get('torch')}"
            + (f", torchax {m['torchax']}" if "torchax" in m else "")
            + (f", {env}" if env else "")
        )
    print("\n".join(table(rows)))
    print("ms: median of interleaved rounds (per token for decode); host ms: until the call returns; progs: XLA")
    print("executions per step counted by JAX's profiler; first s: first step in the measuring process (* its")
    print("compile cache held earlier runs' programs); xla s: of it, seconds in XLA's compiler (the rest: the")
    print("host's tracing, recording, lowering); settle s: the steps after it until one compiles nothing;")
    print("cold/warm: fresh processes over empty / the cold run's caches")
    found = checks(rows)
    for w, entries in found["loss1"].items():
        print(
            f"step-1 loss, {w}: "
            + ", ".join(
                f"{n} {e['loss1']:.5f}" + ("" if e.get("within", True) else " (OFF)") for n, e in entries.items()
            )
        )
        compared = [e["within"] for e in entries.values() if "within" in e]
        print(
            f"  all within tolerance of jax.jit's: {all(compared)}"
            if compared
            else "  (no jax.jit loss to compare with)"
        )
    for w, entries in found["agreement"].items():
        print(f"{w}: " + "; ".join(f"{n}: {v}" for n, v in entries.items()))
    for w, entries in found["products"].items():
        for n, dots in entries.items():
            kinds = "; ".join(dots) if isinstance(dots, dict) else dots
            print(f"products lowered, {w}, {n}: {kinds}")
    earlier = sorted({r["run"] for r in rows.values() if "run" in r and r["run"] != args.run})
    if earlier:
        print(f"rows measured by earlier calls ({', '.join(earlier)}) included")
    if args.json:
        clean = [{k: v for k, v in r.items() if not k.startswith("_")} for r in rows.values()]
        with open(args.json, "w") as f:
            json.dump(
                {"runs": runs, "meta": meta, "rows": clean, "checks": found, "warnings": warnings},
                f,
                indent=1,
                default=str,
            )


if __name__ == "__main__":
    main()
