"""A pytest plugin that checks jaxdev/programs/exact_programs.py's claim on real programs: every program it
compiles with `xla_backend_optimization_level=0` is compiled a second time with XLA's default
optimization and run on the same arguments, and the two results must agree bit for bit.

    PYTHONPATH=benchmarks .venv/bin/pytest -p exact_compile_check tests/ops/test_views.py ...

Prints, at the end, how many programs were compiled and how many of them were checked, and every
program whose results differed (none is the claim). The executable cache is off while it runs, so
every program is compiled here.
"""

from __future__ import annotations

import os

import jax
import numpy as np

os.environ["JAXDEV_EXEC_CACHE"] = "off"

from jaxdev.programs import exact_programs, exec_cache

COUNTS = {"programs": 0, "checked": 0, "skipped (donated)": 0}
DIFFERENT: list[str] = []


def _checked(*args, **params):
    COUNTS["programs"] += 1
    out = _inner(*args, **params)
    if exact_programs.OPTION not in params["compiler_options_kvs"]:
        return out
    if any(params["donated_invars"]):
        COUNTS["skipped (donated)"] += 1
        return out
    default = dict(
        params, compiler_options_kvs=tuple(o for o in params["compiler_options_kvs"] if o != exact_programs.OPTION)
    )
    again = _inner(*args, **default)
    COUNTS["checked"] += 1
    for a, b in zip(out[0], again[0]):
        a, b = np.asarray(jax.device_get(a)), np.asarray(jax.device_get(b))
        if a.dtype != b.dtype or a.shape != b.shape or a.tobytes() != b.tobytes():
            DIFFERENT.append(str(params["jaxpr"])[:2000])
            break
    return out


_inner = exec_cache._ORIGINAL
exec_cache._ORIGINAL = _checked


def pytest_terminal_summary(terminalreporter):
    terminalreporter.write_line(f"exact_compile_check: {COUNTS}; results that differed: {len(DIFFERENT)}")
    for text in DIFFERENT[:20]:
        terminalreporter.write_line(text)
