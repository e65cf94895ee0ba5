"""Fuzz ops, factories: how `fuzz_draw` draws their arguments (how they are called: fuzz_calls.py).

Factories: empty, zeros, full, arange, linspace, empty_strided, eye, with hostile sizes, steps and dtypes.
"""

from __future__ import annotations

import math

from fuzz_args import Gen, op
from fuzz_cases import DEVICE

# factories ---------------------------------------------------------------------------------------


def _g_factory_shape(g: Gen):
    return g.hostile_shape(0, 3)


@op("empty")
def _(g: Gen):
    return (_g_factory_shape(g),), {"dtype": g.dtype(), "device": DEVICE}


@op("zeros")
def _(g: Gen):
    return (_g_factory_shape(g),), {"dtype": g.dtype(), "device": DEVICE}


@op("full")
def _(g: Gen):
    kw = {"device": DEVICE}
    if g.chance(0.6):
        kw["dtype"] = g.dtype()
    return (_g_factory_shape(g), g.scalar()), kw


@op("arange")
def _(g: Gen):
    ends = [0, 1, 5, 7.5, -3, 2**50, 2**62, 2**63 - 1, math.inf, math.nan]
    start = g.pick([0, 0, 1, -2, 0.5, math.nan])
    end = g.pick(ends)
    step = g.pick([1, 1, 2, -1, 0, 0.25, -0.5, math.inf, math.nan, 2**62])
    kw = {"device": DEVICE}
    if g.chance(0.5):
        kw["dtype"] = g.dtype()
    # a range of between a few thousand and 2**45 elements is a real allocation: keep it small
    try:
        n = math.ceil((end - start) / step)
        if 1000 < n < 2**45:
            end = start + 7 * step
    except (ZeroDivisionError, ValueError, OverflowError):
        pass
    return (start, end, step), kw


@op("linspace")
def _(g: Gen):
    steps = g.pick([0, 1, 2, 5, -1, -(2**40), 2**50, 2**62])
    kw = {"device": DEVICE}
    if g.chance(0.5):
        kw["dtype"] = g.dtype()
    return (g.pick([0, -1, 2.5, math.nan, math.inf]), g.pick([1, 10, -3.5, math.inf]), steps), kw


@op("empty_strided")
def _(g: Gen):
    shape = g.hostile_shape(0, 3)
    stride = [g.pick([0, 1, 2, 5, -1, 2**40, 2**62]) for _ in shape]
    if g.chance(0.1):
        stride.append(1)
    return (shape, stride), {"dtype": g.dtype(), "device": DEVICE}


@op("eye")
def _(g: Gen):
    n = g.pick([0, 1, 3, -1, -(2**40), 2**40, 2**62])
    args = (n,) if g.chance(0.5) else (n, g.pick([0, 2, 4, -1, 2**62]))
    return args, {"dtype": g.dtype(), "device": DEVICE}
