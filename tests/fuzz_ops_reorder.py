"""Fuzz ops, reorder: how `fuzz_draw` draws their arguments (how they are called: fuzz_calls.py).

Ops that order, move or repeat elements, pad, and take a matrix's triangles and diagonals.
"""

from __future__ import annotations

import math

import torch
from fuzz_args import Gen, dim_size, op
from fuzz_cases import DTYPES, FLOATS

# ordering ----------------------------------------------------------------------------------------


@op("sort")
def _(g: Gen):
    t = g.tensor(dtype=g.dtype([d for d in DTYPES if not d.is_complex] + [torch.complex64]))
    kw = {"dim": g.dim(len(t.shape)), "descending": g.chance(0.5)}
    if g.chance(0.5):
        kw["stable"] = True
    return (t,), kw


@op("topk")
def _(g: Gen):
    t = g.tensor(dtype=g.dtype([d for d in DTYPES if not d.is_complex] + [torch.complex64]))
    d = g.dim(len(t.shape))
    n = dim_size(t.shape, d)
    return (t, g.pick([0, 1, n, n + 1, -1, 2**62])), {"dim": d, "largest": g.chance(0.5)}


# moving and repeating elements -------------------------------------------------------------------


@op("roll")
def _(g: Gen):
    t = g.tensor()
    if g.chance(0.3):
        return (t, g.pick([0, 1, -7, 2**62])), {}
    k = g.r.randint(0, 2)
    return (t, [g.pick([1, -2, 5]) for _ in range(k)], [g.dim(len(t.shape)) for _ in range(g.r.randint(0, 2))]), {}


@op("flip")
def _(g: Gen):
    t = g.tensor()
    return (t, [g.dim(len(t.shape)) for _ in range(g.r.randint(0, 3))]), {}


@op("repeat")
def _(g: Gen):
    t = g.tensor(g.shape(0, 2))
    reps = [g.pick([0, 1, 2, 3, -1, 2**62]) for _ in range(g.r.randint(0, 3))]
    return (t, reps), {}


@op("tile")
def _(g: Gen):
    t = g.tensor(g.shape(0, 2))
    reps = [g.pick([0, 1, 2, 3, -1, 2**62]) for _ in range(g.r.randint(0, 3))]
    return (t, reps), {}


@op("pad")
def _(g: Gen):
    t = g.tensor(g.shape(1, 4), g.dtype(FLOATS + [torch.int64, torch.complex64]))
    pads = [g.pick([0, 1, 2, -1, -3, 5]) for _ in range(g.pick([0, 1, 2, 4, 6, 8]))]
    mode = g.pick(["constant", "constant", "reflect", "replicate", "circular"])
    kw = {"mode": mode}
    if mode == "constant" and g.chance(0.5):
        kw["value"] = g.pick([0.0, 1.5, -1, math.nan])
    return (t, pads), kw


# triangles and diagonals -------------------------------------------------------------------------


@op("diag")
def _(g: Gen):
    t = g.tensor(g.shape(0, 3))
    return (t, g.pick([0, 0, 1, -1, 3, -5, 2**62])), {}


@op("tril")
def _(g: Gen):
    t = g.tensor(g.shape(0, 3))
    return (t, g.pick([0, 1, -1, 5, -(2**62), 2**62])), {}


@op("triu")
def _(g: Gen):
    t = g.tensor(g.shape(0, 3))
    return (t, g.pick([0, 1, -1, 5, -(2**62), 2**62])), {}
