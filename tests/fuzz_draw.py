"""Drawing hostile-input fuzz cases (tests/fuzz_cases.py says what a case is and how it is judged).

The op table is filled by op family: fuzz_ops_factories, fuzz_ops_views, fuzz_ops_indexing, fuzz_ops_math and
fuzz_ops_reorder (how each op's arguments are drawn), from fuzz_args (`Gen`, the random source of a case).

`make_case(seed, index)` is a pure function of its arguments: case `index` of seed `seed` is the same
on every machine and whatever the number of cases drawn. The tests run the cases stored as data in
tests/data/fuzz_corpus.json (`cases(seed, n)` draws only a seed or a count the corpus does not hold).

    .venv/bin/python tests/fuzz_draw.py SEED INDEX                # rerun one case: print it, run it, the verdict
    .venv/bin/python tests/fuzz_draw.py SEED --cases 5000         # a long run, with a summary
    .venv/bin/python tests/fuzz_draw.py SEED --write-corpus 400   # draw the corpus anew (keeps its known cases)
"""

from __future__ import annotations

import collections
import sys
import time

import fuzz_ops_factories
import fuzz_ops_indexing
import fuzz_ops_math
import fuzz_ops_reorder
import fuzz_ops_views
from fuzz_args import OPS, Gen
from fuzz_cases import Case, Corpus, check_case, load_corpus, write_corpus

import jaxdev

FAMILIES = (fuzz_ops_factories, fuzz_ops_views, fuzz_ops_indexing, fuzz_ops_math, fuzz_ops_reorder)  # they fill OPS

OP_NAMES = sorted(OPS)


def make_case(seed: int, index: int) -> Case:
    g = Gen(seed, index)
    name = OP_NAMES[g.r.randrange(len(OP_NAMES))]
    args, kwargs = OPS[name](g)
    return Case(seed, index, name, args, kwargs)


def cases(seed: int, n: int) -> list[Case]:
    """Cases 0..n-1 of `seed`: the corpus's (data) where it holds them, else drawn."""
    corpus = load_corpus()
    if seed == corpus.seed and n <= len(corpus.cases):
        return corpus.cases[:n]
    return [make_case(seed, i) for i in range(n)]


# --- the command line: a long offline run --------------------------------------------------------


def main(argv) -> int:
    import argparse
    import os

    os.environ.setdefault("JAXDEV_FALLBACK", "silent")
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("seed", type=int)
    p.add_argument("index", type=int, nargs="?")
    p.add_argument("--cases", type=int, default=0)
    p.add_argument("--start", type=int, default=0)
    p.add_argument("--safe-only", action="store_true", help="skip cases with sizes past int32")
    p.add_argument("--ops", default="", help="only these ops (comma-separated)")
    p.add_argument("--write-corpus", type=int, metavar="N", help="write cases 0..N-1 to tests/data/fuzz_corpus.json")
    a = p.parse_args(argv)
    if a.write_corpus is not None:
        write_corpus(Corpus(a.seed, [make_case(a.seed, i) for i in range(a.write_corpus)], load_corpus().known))
        return 0
    if a.index is not None:
        case = make_case(a.seed, a.index)
        print(case)
        v = check_case(case)
        print(v)
        return 0 if v.ok else 1
    jaxdev.reset_fallback_counts()
    by_op = collections.Counter()
    bad_by_op = collections.defaultdict(list)
    sims = []
    t0 = time.time()
    for i in range(a.start, a.start + a.cases):
        case = make_case(a.seed, i)
        if (a.safe_only and case.risky) or (a.ops and case.op not in a.ops.split(",")):
            continue
        by_op[case.op] += 1
        v = check_case(case)
        if v.similarity is not None:
            sims.append(v.similarity)
        if not v.ok:
            bad_by_op[case.op].append(f"{case.repro()}\n      -> {v.reason}")
            print(f"MISMATCH {case.repro()}\n      -> {v.reason}", flush=True)
    n = sum(by_op.values())
    bad = sum(len(v) for v in bad_by_op.values())
    print(f"\n{n} cases in {time.time() - t0:.0f} s, {bad} mismatches in {len(bad_by_op)} ops: {sorted(bad_by_op)}")
    if sims:
        exact = sum(s == 1.0 for s in sims)
        print(f"both raised: {len(sims)}; identical messages {exact}; mean similarity {sum(sims) / len(sims):.2f}")
    print("fallbacks:", jaxdev.fallback_counts())
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
