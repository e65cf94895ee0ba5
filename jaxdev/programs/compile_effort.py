"""How hard XLA optimizes the small programs per-op eager compiles, by choice (issue 37 item 5).

Per-op eager compiles one program per op signature, and on a TPU each costs far more to compile than
to run: the LM's cold per-op first training step took 66 s on a TPU v5e where fused eager's took 32.
XLA's `exec_time_optimization_effort` (-1..1, 0 by default) trades a program's speed for its compile
time. Measured with XLA's TPU compiler run without the chip (jaxdev/audit/deviceless.py, libtpu
0.0.42.1, this CPU): at -1 a 4096x512 @ 512x2048 bfloat16 product compiled in 55 ms instead of 301, a
float32 softmax over 16x8x256x256 in 134 instead of 398, a layer norm in 77-98 instead of 270-385,
an add in 37 instead of 44; XLA's CPU compiler ignores the option (the same optimized program).

The TPU compiler's lower effort picks other tilings and prefetches, and may fuse otherwise, so a
float program's bits may change (a reduction's order, a half intermediate kept wider): the option is
the user's choice, off by default, until the chip has compared bits op by op
(benchmarks/tpu_effort_check.py). It applies to what per-op eager compiles only: fused eager's
segments and torch.compile's graphs (whole_program()) compile at XLA's default, as their speed is the
step's: the LM's fused bf16 training step (batch 16) compiled without the chip at -1 took 16 s instead of
165 but the TPU cost model's estimate of its run grew 14.9 -> 84.5 M cycles (5.7x); at -0.5 34 s and
38.6 M (2.6x).

    JAXDEV_COMPILE_EFFORT=low     per-op programs at XLA's lowest effort (-1)
    JAXDEV_COMPILE_EFFORT=-0.5    any value in -1..1
    JAXDEV_COMPILE_EFFORT=default XLA's own (the default)
"""

from __future__ import annotations

import contextlib
import functools
import os
import threading

ENV = "JAXDEV_COMPILE_EFFORT"
OPTION = "exec_time_optimization_effort"

_local = threading.local()


class CompileEffortError(ValueError):
    """JAXDEV_COMPILE_EFFORT holds something other than default, low or a number in -1..1."""


@contextlib.contextmanager
def whole_program():
    """Programs compiled inside are a whole step's (fused eager's segments, compiled graphs): XLA's
    default effort, whatever JAXDEV_COMPILE_EFFORT says."""
    was = enter_whole()
    try:
        yield
    finally:
        exit_whole(was)


def enter_whole() -> bool:
    """whole_program() without a generator, for a compiled graph's every call (a few us a call less):
    returns what `exit_whole` restores."""
    was = getattr(_local, "whole", False)
    _local.whole = True
    return was


def exit_whole(was: bool) -> None:
    _local.whole = was


@functools.cache
def _effort(setting: str) -> float | None:
    setting = setting.strip().lower()
    if setting in ("", "default", "0", "off"):
        return None
    if setting == "low":
        return -1.0
    try:
        value = float(setting)
    except ValueError:
        value = None
    if value is None or not -1.0 <= value <= 1.0:
        raise CompileEffortError(f"jaxdev: {ENV}={setting!r} is not one of default, low, or a number from -1 to 1")
    return value


def option(options: tuple) -> tuple | None:
    """The (name, value) to add to a new per-op program's compiler options, or None: none chosen, a
    whole program, or the call's own options already say it."""
    effort = _effort(os.environ.get(ENV, "default"))
    if effort is None or getattr(_local, "whole", False) or any(k == OPTION for k, _ in options):
        return None
    return (OPTION, effort)
