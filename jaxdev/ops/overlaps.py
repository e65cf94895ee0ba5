"""CPU's overlap checks between a written tensor (self of an in-place op, out=) and the op's arguments.

Every op checks a partial overlap (PyTorch's assert_no_partial_overlap: TensorIterator's rule) unless
listed here. These are CPU's other rules, from its kernels (TensorAdvancedIndexing.cpp) and checked
against CPU PyTorch:
  FULL       arguments CPU checks with assert_no_overlap, which refuses a full overlap too: the written
             tensor passed as its own index or source (`t.index_add_(0, i, t)`, `t.scatter_(0, t, v)`)
  UNCHECKED  arguments CPU reads as a number (`.item()`) before writing, and never checks
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch._ops import OpOverload

from jaxdev import tensor

FULL: dict[str, frozenset[str]] = {
    "index_add": frozenset({"index", "source"}),
    "index_copy": frozenset({"index", "source"}),
    "index_reduce": frozenset({"index", "source"}),
    "index_fill": frozenset({"index"}),
    "scatter": frozenset({"index", "src"}),
    "scatter_add": frozenset({"index", "src"}),
    "scatter_reduce": frozenset({"index", "src"}),
    "put": frozenset({"index", "source"}),
    "index_put": frozenset({"indices", "values"}),
    "_index_put_impl": frozenset({"indices", "values"}),
    "index_select": frozenset({"self", "index"}),
    "gather": frozenset({"self"}),
    "take": frozenset({"self", "index"}),
    "masked_select": frozenset({"self", "mask"}),
}
UNCHECKED: dict[str, frozenset[str]] = {
    "index_fill": frozenset({"value"}),
    "masked_fill": frozenset({"value"}),
}


def _tensors(value):
    if isinstance(value, torch.Tensor):
        return (value,)
    if isinstance(value, (list, tuple)):
        return tuple(v for v in value if isinstance(v, torch.Tensor))
    return ()


def check(name: str, written: torch.Tensor, arguments: dict) -> None:
    """CPU's checks of `written` against op `name`'s `arguments` (schema name -> value)."""
    full, unchecked = FULL.get(name, frozenset()), UNCHECKED.get(name, frozenset())
    for argument, value in arguments.items():
        if argument not in unchecked:
            tensor.check_no_partial_overlap(written, _tensors(value), full_too=argument in full)


def _base_name(op: OpOverload) -> str:
    return op._schema.name.removeprefix("aten::").removesuffix("_")


def written_check(op: OpOverload, after_self: bool) -> Callable | None:
    """For a derived in-place (`after_self`: its arguments come without self) or out= kernel of `op`:
    `check(written, args, kwargs)` with CPU's rules, or None where the partial check of every argument is
    CPU's rule."""
    name = _base_name(op)
    if name not in FULL and name not in UNCHECKED:
        return None
    names = [a.name for a in op._schema.arguments][1 if after_self else 0 :]

    def check_written(written, args, kwargs):
        arguments = dict(zip(names, args))
        arguments.update((k, v) for k, v in kwargs.items() if k in names)
        check(name, written, arguments)

    return check_written
