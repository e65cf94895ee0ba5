"""Fuzz ops, views: how `fuzz_draw` draws their arguments (how they are called: fuzz_calls.py).

View ops and reshapes (strides and storage offsets compared), and the ops that change a tensor's storage.
"""

from __future__ import annotations

import math

from fuzz_args import Gen, op

# views and reshapes ------------------------------------------------------------------------------


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


@op("diagonal")
def _(g: Gen):
    t = g.tensor(g.shape(0, 3))
    return (t, g.pick([0, 1, -1, 4, -(2**62)]), g.dim(len(t.shape)), g.dim(len(t.shape))), {}


# storage-changing --------------------------------------------------------------------------------


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
