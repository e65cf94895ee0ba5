"""Floats lifted out of a recorded op into its program's data.

An optimizer's step sizes change every step: Adam's `param.addcdiv_(exp_avg, denom, value=-step_size)`
and `exp_avg_sq.sqrt() / bias_correction2_sqrt` (single-tensor), its foreach calls' scalar lists, any
`alpha=-lr` under a schedule. Kept in the op's key and baked into the program as constants, each step
would be a new program. So where the op's kernel reads a number as program data (registry's
DYNAMIC_NUMBERS: positions and keyword names), the recorder puts a float there as a `Number`: its key
part is `(Number,)` whatever the value, the value goes to `Segment.numbers`, which the program takes
as a float64 input (program._numbers), and its kernel gets it traced (weakly typed, as jit gives a
Python float to the kernel's body in per-op mode: the same arithmetic, the same bits).

A float is lifted only
* beside tensors of half, bfloat16, float32 or float64 alone: there a float operand makes no other
  result dtype and no other arithmetic (an integer tensor's `value=1.9` is truncated to 1 in Python,
  a complex tensor's alpha becomes a Python complex; those stay in the key);
* within float16's range (|v| <= 65504): a kernel checks in Python that a number fits the result's
  dtype (c10's checked conversion: a half's `add_(y, alpha=1e5)` raises), which a traced number would
  skip; within that range no check can fail, so the first call's check (learn.py evaluates it) holds
  for every later value. A larger float (or NaN, inf) stays in the key, as it was.
The native replay guard (jaxdev/csrc/fused.cpp) lifts by the same rule.
"""

from __future__ import annotations

import torch

LARGEST = 65504.0  # float16's largest finite value
_FLOATING = frozenset((torch.float16, torch.bfloat16, torch.float32, torch.float64))


class Number:
    """A float argument passed to the program as data (registry.DYNAMIC_NUMBERS): `seg.numbers[index]`."""

    __slots__ = ("index",)

    def __init__(self, index: int):
        self.index = index


def where(registered, args: tuple, kwargs: dict):
    """The positions and keyword names of the op's floats to lift in this call (`registered`, its
    DYNAMIC_NUMBERS entry), or None: some tensor argument is not of a floating dtype above."""
    if registered is None or not _floating(args) or (kwargs and not _floating(kwargs.values())):
        return None
    return registered


def _floating(values) -> bool:
    for a in values:
        if isinstance(a, torch.Tensor):
            if a.dtype not in _FLOATING:
                return False
        elif (type(a) is list or type(a) is tuple) and not _floating(a):
            return False
    return True


def lift(numbers: list, args: tuple, kwargs: dict, lifted: tuple) -> tuple[tuple, dict]:
    """`args` and `kwargs` with the floats at the positions and names `lifted` as Numbers, their values
    appended to `numbers` in the order of the arguments (the replay guard's walk: positions, then the
    keywords as given)."""
    args = tuple(_lifted(numbers, a) if i in lifted else a for i, a in enumerate(args))
    if kwargs:
        kwargs = {k: _lifted(numbers, v) if k in lifted else v for k, v in kwargs.items()}
    return args, kwargs


def _lifted(numbers: list, v):
    if type(v) is float:
        if not -LARGEST <= v <= LARGEST:
            return v
        numbers.append(v)
        return Number(len(numbers) - 1)
    if (type(v) is list or type(v) is tuple) and all(type(x) is float and -LARGEST <= x <= LARGEST for x in v):
        return type(v)(_lifted(numbers, x) for x in v)
    return v
