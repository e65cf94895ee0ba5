"""Drawing hostile-input fuzz cases (tests/fuzz_cases.py says what a case is and how it is judged).

`make_case(seed, index)` is a pure function of its arguments: case `index` of seed `seed` is the same
on every machine and whatever the number of cases drawn. The tests run the cases stored as data in
tests/data/fuzz_corpus.json (`cases(seed, n)` draws only a seed or a count the corpus does not hold).

    .venv/bin/python tests/fuzz_draw.py SEED INDEX                # rerun one case: print it, run it, the verdict
    .venv/bin/python tests/fuzz_draw.py SEED --cases 5000         # a long run, with a summary
    .venv/bin/python tests/fuzz_draw.py SEED --write-corpus 400   # draw the corpus anew (keeps its known cases)
"""

from __future__ import annotations

import collections
import math
import random
import sys
import time

import torch
from fuzz_cases import DEVICE, DTYPES, FLOATS, Case, Corpus, T, check_case, load_corpus, write_corpus

import jaxdev

# --- random arguments ---------------------------------------------------------------------------

EXTREME_SIZES = [-1, -2, -(2**40), 2**31, 2**32 + 1, 2**40, 2**62, 2**63 - 1]
SCALARS = [0, 1, -1, 2, 7, 0.5, -2.5, -0.0, math.nan, math.inf, -math.inf, True, False, 1 + 2j, 2**31, 2**63 - 1]
HUGE_SCALARS = [2**64, -(2**63) - 1, 1e308, 1e-320]


class Gen:
    def __init__(self, seed: int, index: int):
        self.r = random.Random(seed * 1_000_003 + index)
        self.index = index
        self.seed = seed
        self.n = 0

    def chance(self, p: float) -> bool:
        return self.r.random() < p

    def pick(self, seq):
        return seq[self.r.randrange(len(seq))]

    def size(self) -> int:
        return self.pick([0, 1, 1, 2, 2, 3, 3, 4, 5])

    def shape(self, lo: int = 0, hi: int = 3) -> tuple:
        return tuple(self.size() for _ in range(self.r.randint(lo, hi)))

    def hostile_shape(self, lo: int = 0, hi: int = 3) -> list:
        """A shape that may hold negative or huge sizes (with a product past 2**63, or one no memory
        holds); sizes between are left out: a real allocation of gigabytes would succeed on CPU."""
        shape = list(self.shape(lo, hi))
        if shape and self.chance(0.4):
            shape[self.r.randrange(len(shape))] = self.pick(EXTREME_SIZES)
            if self.chance(0.5):
                shape.append(self.pick([2**31, 2**40, 2**62]))
        if 0 not in shape and all(n > 0 for n in shape):
            total = math.prod(shape) * 16
            if (1 << 22) < total < (1 << 46):  # neither small nor surely impossible: make it small
                shape = [min(n, 5) for n in shape]
        return shape

    def dtype(self, pool=None):
        return self.pick(pool or DTYPES)

    def dim(self, ndim: int):
        """Usually a valid dim (negative ones too), sometimes out of range."""
        if self.chance(0.12):
            return self.pick([ndim, -ndim - 1, 64, -(2**40)])
        span = max(ndim, 1)
        return self.r.randint(-span, span - 1)

    def scalar(self):
        if self.chance(0.05):
            return self.pick(HUGE_SCALARS)
        return self.pick(SCALARS)

    def tensor(self, shape=None, dtype=None, view=True, mixed=True) -> T:
        self.n += 1
        shape = self.shape() if shape is None else tuple(shape)
        dtype = self.dtype() if dtype is None else dtype
        seed = (self.seed * 7919 + self.index * 131 + self.n) % (2**31)
        v = ()
        if view and self.chance(0.15) and len(shape) >= 1:
            choice = self.r.randrange(3)
            if choice == 0 and len(shape) >= 2:
                v = ("t",)
                shape = tuple(reversed(shape)) if len(shape) == 2 else (shape[-1], *shape[1:-1], shape[0])
            elif choice == 1:
                v = ("step",)
                shape = (shape[0] * 2,) + shape[1:]
            else:
                # overlapping windows of a flat storage: a read-only kind of input
                n = max(math.prod(shape), 1)
                v = ("as_strided", shape, tuple(self.pick([0, 1, 1, 2]) for _ in shape), 0)
                need = 1 + sum((a - 1) * s for a, s in zip(shape, v[2])) if 0 not in shape else 0
                shape = (max(n, need),)
        cpu = mixed and self.chance(0.04)
        return T(tuple(shape), dtype, seed, view=v, cpu=cpu)

    def idx(self, shape, n: int, dtype=torch.int64) -> T:
        """An index tensor into a dim of size n: usually in range, sometimes out of it."""
        self.n += 1
        seed = (self.seed * 7919 + self.index * 131 + self.n) % (2**31)
        lo, hi = (-n, max(n, 1)) if self.chance(0.8) else (-n - 3, n + 3)
        if n == 0:
            lo, hi = (0, 1) if self.chance(0.8) else (-2, 2)
        if self.chance(0.1):
            dtype = self.pick([torch.int32, torch.int16, torch.uint8, torch.float32, torch.bool])
        if dtype == torch.bool:
            lo, hi = 0, 2
        if dtype == torch.uint8:
            lo = max(lo, 0)
        return T(tuple(shape), dtype, seed, "index", lo, max(hi, lo + 1), cpu=self.chance(0.03))

    def out(self, shape, dtype) -> T:
        """An out= tensor: usually right, sometimes of another dtype or shape."""
        if self.chance(0.4):
            dtype = self.dtype()
        if self.chance(0.4):
            shape = self.shape()
        return self.tensor(shape, dtype, view=False)


# --- the ops -------------------------------------------------------------------------------------
# name -> how to draw its arguments (how to call it and its flags: fuzz_cases.CALL and FLAGS).


def _g_factory_shape(g: Gen):
    return g.hostile_shape(0, 3)


OPS: dict[str, tuple] = {}


def op(name):
    def register(gen):
        OPS[name] = gen
        return gen

    return register


# factories ---------------------------------------------------------------------------------------


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


# views and reshapes --------------------------------------------------------------------------------


def _reshape_target(g: Gen, shape):
    n = math.prod(shape)
    choices = [[n], [-1], [n, 1], [1, -1], [-1, -1], [n + 1], [0, -1], [-2, 2], [2**62, 2**62], list(reversed(shape))]
    if n % 2 == 0 and n:
        choices.append([2, n // 2])
        choices.append([2, -1])
    return g.pick(choices)


@op("view")
def _(g: Gen):
    t = g.tensor()
    return (t, _reshape_target(g, t.shape if not t.view or t.view[0] != "as_strided" else t.view[1])), {}


@op("view_dtype")
def _(g: Gen):
    return (g.tensor(), g.dtype()), {}


@op("reshape")
def _(g: Gen):
    t = g.tensor()
    return (t, _reshape_target(g, t.shape if not t.view or t.view[0] != "as_strided" else t.view[1])), {}


@op("expand")
def _(g: Gen):
    t = g.tensor(g.shape(0, 3))
    shape = list(t.shape) if not t.view or t.view[0] != "as_strided" else list(t.view[1])
    target = [n if n != 1 or g.chance(0.5) else g.pick([3, -1, 2**62, 0]) for n in shape]
    if g.chance(0.5):
        target = [g.pick([2, -1, 2**40, 0, -2])] + target
    return (t, target), {}


@op("as_strided")
def _(g: Gen):
    t = g.tensor(g.shape(1, 2))
    size = g.hostile_shape(0, 3) if g.chance(0.3) else list(g.shape(0, 3))
    stride = [g.pick([0, 0, 1, 1, 2, 3, -1, 2**40, 2**62]) for _ in size]
    offset = g.pick([0, 0, 1, 2, -1, -(2**40), 2**62])
    return (t, size, stride, offset), {}


@op("narrow")
def _(g: Gen):
    t = g.tensor(g.shape(1, 3))
    n = t.shape[0] if t.shape else 0
    return (t, g.dim(len(t.shape)), g.pick([0, 1, -1, n, n + 1, -n - 1]), g.pick([0, 1, 2, -1, n, 2**62])), {}


@op("select")
def _(g: Gen):
    t = g.tensor(g.shape(0, 3))
    return (t, g.dim(len(t.shape)), g.pick([0, 1, -1, 3, 5, -6, 2**62])), {}


@op("unfold")
def _(g: Gen):
    t = g.tensor(g.shape(0, 3))
    return (t, g.dim(len(t.shape)), g.pick([0, 1, 2, 3, 6, -1]), g.pick([1, 1, 2, 0, -1])), {}


@op("permute")
def _(g: Gen):
    t = g.tensor(g.shape(0, 4))
    dims = list(range(len(t.shape)))
    g.r.shuffle(dims)
    if g.chance(0.3) and dims:
        dims[0] = g.pick([dims[-1], len(dims), -1])
    if g.chance(0.1):
        dims.append(0)
    return (t, dims), {}


@op("transpose")
def _(g: Gen):
    t = g.tensor()
    return (t, g.dim(len(t.shape)), g.dim(len(t.shape))), {}


@op("squeeze")
def _(g: Gen):
    t = g.tensor(g.shape(0, 4))
    if g.chance(0.2):
        return (t,), {}
    if g.chance(0.3):
        return (t, [g.dim(len(t.shape)) for _ in range(g.r.randint(0, 3))]), {}
    return (t, g.dim(len(t.shape))), {}


@op("unsqueeze")
def _(g: Gen):
    t = g.tensor()
    return (t, g.dim(len(t.shape) + 1)), {}


@op("flatten")
def _(g: Gen):
    t = g.tensor(g.shape(0, 4))
    return (t, g.dim(len(t.shape)), g.dim(len(t.shape))), {}


@op("split")
def _(g: Gen):
    t = g.tensor(g.shape(0, 3))
    n = t.shape[0] if t.shape else 0
    size = g.pick([0, 1, 2, -1, 5]) if g.chance(0.7) else [g.pick([0, 1, 2, n]) for _ in range(g.r.randint(0, 3))]
    return (t, size, g.dim(len(t.shape))), {}


@op("chunk")
def _(g: Gen):
    t = g.tensor(g.shape(0, 3))
    return (t, g.pick([0, 1, 2, 3, -1, 7]), g.dim(len(t.shape))), {}


# storage-changing ----------------------------------------------------------------------------------


@op("resize_")
def _(g: Gen):
    return (g.tensor(g.shape(0, 2), view=False), g.hostile_shape(0, 3)), {}


@op("set_")
def _(g: Gen):
    return (g.tensor(view=False), g.tensor()), {}


@op("set_storage")
def _(g: Gen):
    src = g.tensor(g.shape(1, 1), view=False)
    dst = g.tensor(view=False, dtype=src.dtype if g.chance(0.8) else None)
    size = g.hostile_shape(0, 2) if g.chance(0.3) else list(g.shape(0, 2))
    stride = [g.pick([0, 1, 2, -1, 2**62]) for _ in size]
    return (dst, src, g.pick([0, 1, 3, -1, 2**62]), size, stride), {}


# joining ------------------------------------------------------------------------------------------


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


# indexing -------------------------------------------------------------------------------------------


def _dim_size(shape, d):
    try:
        return shape[d] if shape else 1
    except IndexError:
        return 1


@op("index_select")
def _(g: Gen):
    t = g.tensor()
    d = g.dim(len(t.shape))
    idx = g.idx(g.shape(0, 1) if g.chance(0.9) else g.shape(2, 2), _dim_size(t.shape, d))
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
    idx = g.idx(shape, _dim_size(t.shape, d))
    kw = {}
    if g.chance(0.15):
        kw["out"] = g.out(shape, t.dtype)
    return (t, d, idx), kw


@op("scatter_")
def _(g: Gen):
    t = g.tensor(view=False)
    d = g.dim(len(t.shape))
    shape = [min(n, g.size()) if g.chance(0.8) else g.size() for n in t.shape]
    idx = g.idx(shape, _dim_size(t.shape, d))
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
        indices = tuple(g.idx(ishape, _dim_size(t.shape, d)) for d in range(k))
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


# reductions -------------------------------------------------------------------------------------------


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


# arithmetic -------------------------------------------------------------------------------------------


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
    n = _dim_size(t.shape, d)
    return (t, g.pick([0, 1, n, n + 1, -1, 2**62])), {"dim": d, "largest": g.chance(0.5)}


@op("cumsum")
def _(g: Gen):
    t = g.tensor()
    kw = {"dim": g.dim(len(t.shape))}
    if g.chance(0.2):
        kw["dtype"] = g.dtype()
    if g.chance(0.1):
        kw["out"] = g.out(t.shape, t.dtype)
    return (t,), kw


@op("where")
def _(g: Gen):
    shape = g.shape()
    cond = g.idx(shape if g.chance(0.8) else g.shape(), 2, torch.bool if g.chance(0.9) else torch.uint8)
    dt = g.dtype()
    a = _operand(g, shape, dt)
    b = _operand(g, shape, dt)
    return (cond, a, b), {}


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


@op("diag")
def _(g: Gen):
    t = g.tensor(g.shape(0, 3))
    return (t, g.pick([0, 0, 1, -1, 3, -5, 2**62])), {}


@op("diagonal")
def _(g: Gen):
    t = g.tensor(g.shape(0, 3))
    return (t, g.pick([0, 1, -1, 4, -(2**62)]), g.dim(len(t.shape)), g.dim(len(t.shape))), {}


@op("tril")
def _(g: Gen):
    t = g.tensor(g.shape(0, 3))
    return (t, g.pick([0, 1, -1, 5, -(2**62), 2**62])), {}


@op("triu")
def _(g: Gen):
    t = g.tensor(g.shape(0, 3))
    return (t, g.pick([0, 1, -1, 5, -(2**62), 2**62])), {}


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
