"""Fuzz ops, indexing: how `fuzz_draw` draws their arguments (how they are called: fuzz_calls.py).

Joining and indexing: cat and stack, index reads and writes with out-of-range and odd-dtype indices, masks, lookups.
"""

from __future__ import annotations

import math

import torch
from fuzz_args import Gen, dim_size, op
from fuzz_cases import FLOATS

# joining -----------------------------------------------------------------------------------------


def _similar(g: Gen, shape, dtype):
    shape = list(shape)
    if shape and g.chance(0.25):
        shape[g.r.randrange(len(shape))] = g.size()
    if g.chance(0.15):
        shape = list(g.shape())
    return g.tensor(shape, dtype if g.chance(0.7) else g.dtype())


@op("cat")
def _(g: Gen):
    first = g.tensor(g.shape(0, 3))
    ts = [first] + [_similar(g, first.shape, first.dtype) for _ in range(g.r.randint(0, 2))]
    kw = {}
    if g.chance(0.15):
        kw["out"] = g.out(first.shape, first.dtype)
    return (ts, g.dim(len(first.shape))), kw


@op("stack")
def _(g: Gen):
    first = g.tensor(g.shape(0, 3))
    ts = [first] + [_similar(g, first.shape, first.dtype) for _ in range(g.r.randint(0, 2))]
    if g.chance(0.05):
        ts = []
    kw = {}
    if g.chance(0.15):
        kw["out"] = g.out(first.shape, first.dtype)
    return (ts, g.dim(len(first.shape) + 1)), kw


# indexing ----------------------------------------------------------------------------------------


@op("index_select")
def _(g: Gen):
    t = g.tensor()
    d = g.dim(len(t.shape))
    idx = g.idx(g.shape(0, 1) if g.chance(0.9) else g.shape(2, 2), dim_size(t.shape, d))
    kw = {}
    if g.chance(0.15):
        kw["out"] = g.out(t.shape, t.dtype)
    return (t, d, idx), kw


@op("gather")
def _(g: Gen):
    t = g.tensor()
    d = g.dim(len(t.shape))
    shape = [min(n, g.size()) if g.chance(0.8) else g.size() for n in t.shape]
    if g.chance(0.1):
        shape = list(g.shape())
    idx = g.idx(shape, dim_size(t.shape, d))
    kw = {}
    if g.chance(0.15):
        kw["out"] = g.out(shape, t.dtype)
    return (t, d, idx), kw


@op("scatter_")
def _(g: Gen):
    t = g.tensor(view=False)
    d = g.dim(len(t.shape))
    shape = [min(n, g.size()) if g.chance(0.8) else g.size() for n in t.shape]
    idx = g.idx(shape, dim_size(t.shape, d))
    src = g.scalar() if g.chance(0.3) else g.tensor(t.shape, t.dtype if g.chance(0.8) else None, view=False)
    kw = {}
    if g.chance(0.2):
        kw["reduce"] = g.pick(["add", "multiply", "max"])
    return (t, d, idx, src), kw


@op("index_put_")
def _(g: Gen):
    t = g.tensor(g.shape(1, 3), view=False)
    k = g.r.randint(0, len(t.shape) + (1 if g.chance(0.1) else 0))
    ishape = g.shape(0, 2)
    if g.chance(0.15):
        mask = g.idx(t.shape[: max(k, 1)], 2, torch.bool)
        indices = (mask,)
        vshape = ()
    else:
        indices = tuple(g.idx(ishape, dim_size(t.shape, d)) for d in range(k))
        vshape = ishape if g.chance(0.7) else g.shape(0, 2)
    values = g.tensor(vshape, t.dtype if g.chance(0.8) else None, view=False)
    return (t, indices, values, g.chance(0.3)), {}


@op("masked_fill")
def _(g: Gen):
    t = g.tensor()
    mshape = t.shape if g.chance(0.7) else g.shape()
    mask = g.idx(mshape, 2, torch.bool if g.chance(0.9) else torch.uint8)
    value = g.scalar() if g.chance(0.7) else g.tensor(g.pick([(), (), (1,), (2,)]))
    return (t, mask, value), {}


@op("take")
def _(g: Gen):
    t = g.tensor()
    idx = g.idx(g.shape(0, 2), math.prod(t.shape))
    kw = {}
    if g.chance(0.15):
        kw["out"] = g.out(idx.shape, t.dtype)
    return (t, idx), kw


@op("nonzero")
def _(g: Gen):
    t = g.tensor()
    return (t,), ({"as_tuple": True} if g.chance(0.3) else {})


@op("one_hot")
def _(g: Gen):
    t = g.idx(g.shape(0, 2), g.pick([1, 3, 5]))
    return (t, g.pick([-1, -1, 0, 1, 3, 5, -2])), {}


@op("embedding")
def _(g: Gen):
    rows = g.pick([0, 1, 3, 5])
    w = g.tensor((rows, g.pick([0, 1, 3])), g.dtype(FLOATS + [torch.int64, torch.complex64]), view=False)
    ids = g.idx(g.shape(0, 2), rows)
    return (ids, w), {}
