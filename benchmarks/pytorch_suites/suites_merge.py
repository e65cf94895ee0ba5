"""The report again from saved runs (`--report DIR [DIR ...]`), merged: a suite run in parts (a
sample, then its complement with --select) reads as one. A pass (cpu, jax cold, jax warm) counts
only where every run has it, and its times are the runs' sums."""

from __future__ import annotations

import json
import os

from suites_results import compare, read_outcomes
from suites_run import PassResult

LABELS = (("cpu", "cpu"), ("jax", "jax cold"), ("jax", "jax warm"))


def _summary(run_dir: str) -> dict:
    path = os.path.join(run_dir, "summary.json")
    if not os.path.exists(path):
        raise ValueError(f"{run_dir} has no summary.json (not a finished run of the suites runner).")
    with open(path) as f:
        return json.load(f)


def merge(run_dirs: list[str], suites) -> tuple[str, list]:
    """The merged rows for print_report, and the runs' source lines."""
    summaries = [_summary(d) for d in run_dirs]
    rows = []
    for suite in suites:
        entries = [next((s for s in summ["suites"] if s["suite"] == suite.title), None) for summ in summaries]
        if any(e is None for e in entries):
            continue
        passes, outcomes = [], {}
        for device, label in LABELS:
            timed = [next((p for p in e["passes"] if p["label"] == label), None) for e in entries]
            if any(t is None for t in timed):
                continue
            merged = {}
            for run_dir in run_dirs:
                path = os.path.join(run_dir, f"{suite.name}-{label.replace(' ', '-')}.jsonl")
                with open(path) as f:
                    merged.update(read_outcomes(f))
            result = PassResult(device, label, "", sum(t["wall_s"] for t in timed))
            result.tests_s = sum(t.get("tests_s", 0.0) for t in timed)
            passes.append(result)
            outcomes[label] = merged
        jax_label = next((p.label for p in reversed(passes) if p.device == "jax"), None)
        if "cpu" in outcomes and jax_label:
            rows.append((suite.title, compare(suite.title, outcomes["cpu"], outcomes[jax_label]), passes))
    sources = sorted({s["source"] for s in summaries})
    return "; ".join(sources), rows
