"""A pytest plugin that checks jaxdev/programs/program_keys.py's keys for collisions on real programs: every
program a test compiles is keyed and also lowered to StableHLO, and two programs with one key must
lower to the same module text (module and function names aside).

    PYTHONPATH=benchmarks JAXDEV_CACHE_DIR=off .venv/bin/pytest -p exec_key_check tests/ops/test_views.py ...

Prints, at the end, how many programs and distinct keys it saw, how many were unkeyable, and every key
two different modules shared (none is the claim); each such key is also appended at once to
$EXEC_KEY_CHECK_OUT (default ./exec_key_check.txt).
"""

from __future__ import annotations

import hashlib
import os
import re

from jax._src import pjit

from jaxdev.programs import exec_cache, program_keys

SEEN: dict = {}
COUNTS = {"programs": 0, "unkeyable": 0}
SHARED: list = []
_NAMES = re.compile(r"(module @|func\.func (public |private )?@|call @)[\w.$-]+")


def _checked(*args, **params):
    COUNTS["programs"] += 1
    try:
        key = program_keys.program_key(args, params)
    except Exception:
        COUNTS["unkeyable"] += 1
        return _inner(*args, **params)
    arg_types = [pjit.convert_to_metaty(a) for a in args]
    lowered = pjit._resolve_and_lower(
        arg_types, lowering_platforms=None, lowering_parameters=pjit.mlir.LoweringParameters(), pgle_profiler=None,
        **{k: v for k, v in params.items()},
    )  # fmt: skip
    text = _NAMES.sub(r"\1NAME", lowered.as_text())
    digest = hashlib.sha256(text.encode()).hexdigest()
    first = SEEN.setdefault(key, (digest, text))
    if first[0] != digest:
        SHARED.append((key, first[1][:3000], text[:3000]))
        with open(os.environ.get("EXEC_KEY_CHECK_OUT", "exec_key_check.txt"), "a") as f:  # at once: a run cut short
            f.write(f"--- {key}\n{first[1][:3000]}\n+++\n{text[:3000]}\n")
    return _inner(*args, **params)


_inner = exec_cache._ORIGINAL
exec_cache._ORIGINAL = None  # the hook below replaces exec_cache's (no entries are read or written)
pjit._pjit_call_impl_python = _checked


def pytest_terminal_summary(terminalreporter):
    line = f"exec_key_check: {COUNTS}, {len(SEEN)} distinct keys; keys shared by different modules: {len(SHARED)}"
    terminalreporter.write_line(line)
    for key, a, b in SHARED[:10]:
        terminalreporter.write_line(f"--- {key}\n{a}\n+++\n{b}")
