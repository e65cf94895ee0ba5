"""What fuzz cases are drawn from (tests/fuzz_draw.py): `Gen`, the random source of one case (shapes,
hostile sizes, dims, scalars, tensors, indices, out= tensors), and `OPS`, the op table (name -> how
to draw its arguments), which the fuzz_ops_* modules fill by op family with `@op(name)`.
"""

from __future__ import annotations

import math
import random

import torch
from fuzz_cases import DTYPES, T

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


# --- the op table --------------------------------------------------------------------------------
# name -> how to draw its arguments (how to call it and its flags: fuzz_calls.CALL and FLAGS).


OPS: dict[str, tuple] = {}


def op(name):
    def register(gen):
        OPS[name] = gen
        return gen

    return register


def dim_size(shape, d):
    try:
        return shape[d] if shape else 1
    except IndexError:
        return 1
