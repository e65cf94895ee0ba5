"""PyTorch's own test suites on jax and on CPU, compared (issue 27 items 3 and 4). Not part of CI:
a whole suite runs for hours on two cores. See README.md beside this file.

    .venv/bin/python benchmarks/pytorch_suites --pytorch-git ~/src/pytorch \\
        [--suite view_ops --suite ops ...] [--subset N] [-k EXPR] [--time-limit S] [--cache both|cold|warm]
"""

from __future__ import annotations

import argparse
import datetime
import os
import random
import shutil
import sys

from rich.console import Console
from suites_merge import merge
from suites_report import print_report, save_summary
from suites_results import compare, read_outcomes
from suites_run import PassResult, collect, run_pass
from suites_source import SUITES, SourceError, prepare

DEFAULT_WORK = os.path.join(os.path.expanduser("~"), ".cache", "jaxdev", "pytorch_suites")


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="benchmarks/pytorch_suites", description=__doc__.split("\n\n")[0])
    p.add_argument("--pytorch-git", help="a git copy of PyTorch's repository (a clone, or a bare mirror)")
    p.add_argument("--rev", help="the PyTorch commit to take the test files from (default: the installed torch's)")
    p.add_argument("--tests-dir", help="a folder that already holds the test files (instead of --pytorch-git)")
    p.add_argument("--suite", action="append", choices=sorted(SUITES), help="repeatable; default: all four")
    p.add_argument("--subset", type=int, help="a seeded uniform sample of this many tests per suite (from CPU's list)")
    p.add_argument("--seed", type=int, default=0, help="the sample's seed (default 0)")
    p.add_argument("--select", help="a file of the tests to run (neutral keys, one a line: a run's *-subset.txt)")
    p.add_argument("-k", dest="k", help="pytest's -k expression, for both devices")
    p.add_argument("--time-limit", type=float, default=3600, help="seconds per suite and pass (default 3600)")
    p.add_argument(
        "--cache", choices=("both", "cold", "warm"), default="both",
        help="jax's compilation caches: both = a cold pass (empty cache dir) then a warm one (default); "
        "cold = one cold pass; warm = one pass over --cache-dir as it is",
    )  # fmt: skip
    p.add_argument("--cache-dir", help="JAXDEV_CACHE_DIR for --cache warm (default: the work dir's xla-cache)")
    p.add_argument("--work-dir", default=DEFAULT_WORK, help=f"extracted files and results (default {DEFAULT_WORK})")
    p.add_argument(
        "--report", nargs="+", metavar="RUN_DIR", help="print the report of saved runs (merged), run nothing"
    )
    p.add_argument("--top", type=int, default=15, help="causes shown per suite (default 15)")
    return p.parse_args(argv)


class Options:
    def __init__(self, args, run_dir: str, select_file: str | None):
        self.k, self.time_limit, self.select_file = args.k, args.time_limit, select_file
        self.cold_dir = os.path.join(run_dir, "xla-cache-cold")
        self.warm_dir = args.cache_dir or os.path.join(args.work_dir, "xla-cache")
        self.mode = args.cache

    def cache_dir_for(self, result: PassResult) -> str | None:
        if result.device == "cpu":
            return None
        return self.warm_dir if self.mode == "warm" else self.cold_dir

    def jax_labels(self) -> list[str]:
        return {"both": ["jax cold", "jax warm"], "cold": ["jax cold"], "warm": ["jax warm"]}[self.mode]


def _select(suite, files_dir, run_dir, args) -> str | None:
    if args.select:
        return os.path.abspath(args.select)
    if not args.subset:
        return None
    keys = collect(suite, files_dir, os.path.join(run_dir, f"{suite.name}-all.txt"), args.k)
    chosen = sorted(random.Random(args.seed).sample(keys, min(args.subset, len(keys))))
    path = os.path.join(run_dir, f"{suite.name}-subset.txt")
    with open(path, "w") as f:
        f.writelines(key + "\n" for key in chosen)
    print(f"{suite.name}: {len(chosen)} of {len(keys)} tests (seed {args.seed})", flush=True)
    return path


def _read(path: str):
    if not os.path.exists(path):
        return {}
    with open(path) as f:
        return read_outcomes(f)


def run_suite(suite, files_dir, run_dir, args):
    opts = Options(args, run_dir, _select(suite, files_dir, run_dir, args))
    shutil.rmtree(opts.cold_dir, ignore_errors=True)
    passes = []
    for device, label in [("cpu", "cpu"), *(("jax", lab) for lab in opts.jax_labels())]:
        results = os.path.join(run_dir, f"{suite.name}-{label.replace(' ', '-')}.jsonl")
        print(f"{suite.name}: {label} ...", flush=True)
        done = run_pass(suite, files_dir, run_dir, PassResult(device, label, results), opts)
        counts, outcomes = {}, _read(results).values()
        for outcome in outcomes:
            counts[outcome.outcome] = counts.get(outcome.outcome, 0) + 1
        done.tests_s = sum(o.duration for o in outcomes)
        cut = ", cut by the time limit" if done.stopped_by_time else ""
        print(
            f"{suite.name}: {label} {done.wall_s:.0f} s ({done.tests_s:.0f} s in tests), {counts}, {done.restarts} restarts{cut}",
            flush=True,
        )
        passes.append(done)
    cpu, jax_runs = _read(passes[0].results), [_read(p.results) for p in passes[1:]]
    if len(jax_runs) == 2:
        differ = [k for k, o in jax_runs[1].items() if k in jax_runs[0] and jax_runs[0][k].outcome != o.outcome]
        if differ:
            print(f"{suite.name}: {len(differ)} tests changed outcome between the cold and warm jax passes")
    return suite.title, compare(suite.title, cpu, jax_runs[-1]), passes


def main(argv=None) -> int:
    args = parse_args(argv)
    suites = [SUITES[name] for name in (args.suite or list(SUITES))]
    if args.report:
        try:
            origin, rows = merge(args.report, suites)
        except (OSError, ValueError) as e:
            print(f"pytorch_suites: {e}", file=sys.stderr)
            return 2
        print(f"{origin}\nruns: {', '.join(args.report)}")
        print_report(rows, args.top, Console(width=200))
        return 0
    try:
        files_dir, origin = prepare(args, suites)
    except SourceError as e:
        print(f"pytorch_suites: {e}", file=sys.stderr)
        return 2
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%d-%H%M%S")
    run_dir = os.path.join(args.work_dir, "runs", stamp)
    os.makedirs(run_dir, exist_ok=True)
    print(f"{origin}\nresults and logs: {run_dir}", flush=True)
    try:
        rows = [run_suite(suite, files_dir, run_dir, args) for suite in suites]
    except SourceError as e:  # a suite's file that pytest cannot collect (a missing test dependency)
        print(f"pytorch_suites: {e}", file=sys.stderr)
        return 2
    print_report(rows, args.top, Console(width=200))
    header = {"source": origin, "subset": args.subset, "seed": args.seed, "k": args.k, "cache": args.cache}
    save_summary(os.path.join(run_dir, "summary.json"), header, rows)
    print(f"summary: {os.path.join(run_dir, 'summary.json')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
