"""Fuzz ops, math: how `fuzz_draw` draws their arguments (how they are called: fuzz_calls.py).

Reductions, scans and arithmetic: sums and means over bad dims and dtypes, products, pointwise ops with scalars and broadcasting, fills and copies.
"""

from __future__ import annotations

import math

import torch
from fuzz_args import Gen, op
from fuzz_cases import T

# reductions and scans ----------------------------------------------------------------------------


def _reduce_args(g: Gen, out_dtype=True):
    t = g.tensor()
    kw = {}
    if g.chance(0.8):
        d = g.dim(len(t.shape))
        if g.chance(0.3):
            d = [d, g.dim(len(t.shape))]
        kw["dim"] = d
        if g.chance(0.3):
            kw["keepdim"] = True
    return t, kw


@op("sum")
def _(g: Gen):
    t, kw = _reduce_args(g)
    if g.chance(0.2):
        kw["dtype"] = g.dtype()
    if "dim" in kw and g.chance(0.1):
        kw["out"] = g.out(g.shape(), t.dtype)
    return (t,), kw


@op("mean")
def _(g: Gen):
    t, kw = _reduce_args(g)
    if g.chance(0.2):
        kw["dtype"] = g.dtype()
    return (t,), kw


@op("amax")
def _(g: Gen):
    t, kw = _reduce_args(g)
    return (t,), kw


@op("cumsum")
def _(g: Gen):
    t = g.tensor()
    kw = {"dim": g.dim(len(t.shape))}
    if g.chance(0.2):
        kw["dtype"] = g.dtype()
    if g.chance(0.1):
        kw["out"] = g.out(t.shape, t.dtype)
    return (t,), kw


# arithmetic --------------------------------------------------------------------------------------


def _operand(g: Gen, shape, dtype):
    if g.chance(0.25):
        return g.scalar()
    shape = list(shape)
    if g.chance(0.3):
        shape = list(g.shape())
    elif shape and g.chance(0.3):
        shape[g.r.randrange(len(shape))] = 1
    return g.tensor(shape, dtype if g.chance(0.5) else g.dtype())


@op("matmul")
def _(g: Gen):
    m, k, n = g.size(), g.size(), g.size()
    dt = g.dtype([torch.float32, torch.float64, torch.int64, torch.complex64, torch.float16, torch.bool])
    batch = g.shape(0, 1)
    a_shape = (*batch, m, k)[g.r.randint(0, len(batch) + 1) :]
    k2 = k if g.chance(0.75) else g.size()
    b_shape = (*g.shape(0, 1), k2, n)[g.r.randint(0, 1) :]
    a = g.tensor(a_shape, dt)
    b = g.tensor(b_shape, dt if g.chance(0.85) else g.dtype())
    kw = {}
    if g.chance(0.1):
        kw["out"] = g.out((m, n), dt)
    return (a, b), kw


@op("add")
def _(g: Gen):
    a = g.tensor()
    b = _operand(g, a.shape, a.dtype)
    kw = {}
    if g.chance(0.2):
        kw["alpha"] = g.pick([2, 0.5, True, 1j, -1])
    if g.chance(0.15):
        kw["out"] = g.out(a.shape, a.dtype)
    return (a, b), kw


@op("mul")
def _(g: Gen):
    a = g.tensor() if g.chance(0.9) else g.scalar()
    b = _operand(g, a.shape if isinstance(a, T) else (), a.dtype if isinstance(a, T) else torch.float32)
    if not isinstance(a, T) and not isinstance(b, T):
        b = g.tensor()
    kw = {}
    if g.chance(0.15):
        kw["out"] = g.out(a.shape if isinstance(a, T) else (), torch.float32)
    return (a, b), kw


@op("copy_")
def _(g: Gen):
    a = g.tensor(view=False)
    b = _operand(g, a.shape, a.dtype)
    if not isinstance(b, T):
        b = g.tensor(a.shape)
    return (a, b), {}


@op("fill_")
def _(g: Gen):
    t = g.tensor(view=False)
    v = g.scalar() if g.chance(0.7) else g.tensor(g.pick([(), (), (1,), (2,)]))
    return (t, v), {}


@op("clamp")
def _(g: Gen):
    t = g.tensor()
    lo = g.pick([None, 0, -1, 1, 2.5, math.nan, -math.inf]) if g.chance(0.7) else _operand(g, t.shape, t.dtype)
    hi = g.pick([None, 0, -1, 1, 0.5, math.nan, math.inf]) if g.chance(0.7) else _operand(g, t.shape, t.dtype)
    kw = {}
    if g.chance(0.1):
        kw["out"] = g.out(t.shape, t.dtype)
    return (t, lo, hi), kw


@op("where")
def _(g: Gen):
    shape = g.shape()
    cond = g.idx(shape if g.chance(0.8) else g.shape(), 2, torch.bool if g.chance(0.9) else torch.uint8)
    dt = g.dtype()
    a = _operand(g, shape, dt)
    b = _operand(g, shape, dt)
    return (cond, a, b), {}
