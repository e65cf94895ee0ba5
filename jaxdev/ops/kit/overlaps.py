"""CPU's overlap checks between a written tensor (self of an in-place op, out=) and the op's arguments.

Every op checks a partial overlap (PyTorch's assert_no_partial_overlap: TensorIterator's rule) unless
listed here. These are CPU's other rules, from its kernels (TensorAdvancedIndexing.cpp) and checked
against CPU PyTorch:
  FULL       arguments CPU checks with assert_no_overlap, which refuses a full overlap too: the written
             tensor passed as its own index or source (`t.index_add_(0, i, t)`, `t.scatter_(0, t, v)`)
  UNCHECKED  arguments CPU reads as a number (`.item()`) before writing, and never checks
and EXPANDED_FILLS and EXPANDED_WRITES, the in-place writes CPU runs on a self whose elements share
memory (an expanded tensor) with a deprecation warning where every other op raises the internal-overlap
error.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable

import jax
import jax.numpy as jnp
import torch
from torch._ops import OpOverload

from jaxdev import tensor
from jaxdev.ops.kit.jit import jitted

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


# --- fills of an expanded self --------------------------------------------------------------------------

EXPANDED_FILLS: dict[str, str] = {"masked_fill": "tensor[mask] = scalar", "index_fill": "tensor[mask] = scalar"}


# In-place writes CPU runs on an expanded self in its loop order (the last write to a location wins):
# their writer, `writer(self, *args, **kwargs)`, comes from the module serving them (ops/expanded_put.py),
# which needs the op's own index checks.
EXPANDED_WRITES = frozenset({"index_put", "_index_put_impl"})
EXPANDED_WRITERS: dict[str, Callable] = {}


def fills_expanded(op: OpOverload) -> bool:
    name = _base_name(op)
    return name in EXPANDED_FILLS or name in EXPANDED_WRITES


def write_expanded(
    op: OpOverload, self: torch.Tensor, fn: Callable, args, kwargs, store: Callable | None = None
) -> None:
    """An in-place op's write into an expanded `self` as CPU does it (fills_expanded(op) is true)."""
    name = _base_name(op)
    if name in EXPANDED_WRITES:
        EXPANDED_WRITERS[name](self, *args, **kwargs)
    else:
        store_expanded(op, self, fn(self, *args, **kwargs), store)


def expanded_dims(t: torch.Tensor) -> tuple[int, ...]:
    """The dims whose elements share memory (stride 0, more than one element): has_internal_overlap."""
    return tuple(d for d, (n, s) in enumerate(zip(t.shape, t.stride())) if s == 0 and n > 1)


def store_expanded(op: OpOverload, self: torch.Tensor, value, store: Callable) -> None:
    """Write an in-place fill's `value` (self's shape) into an expanded `self` as CPU does: with its
    deprecation warning, each memory location taking the value if any of the elements sharing it was
    written (a fill writes one value, so which one does not matter), else keeping its own."""
    name = _base_name(op)
    warnings.warn(
        f"Use of {name}_ on expanded tensors is deprecated. Please clone() the tensor before performing this "
        f"operation. This also applies to advanced indexing e.g. {EXPANDED_FILLS[name]}",
        UserWarning,
        stacklevel=3,
    )
    dims = expanded_dims(self)
    shape = [1 if d in dims else n for d, n in enumerate(self.shape)]
    memory = self.as_strided(shape, self.stride(), self.storage_offset())  # each location once
    store(memory, _collapsed(dims)(value, tensor.read(self)), resize=False)


@jitted
def _collapsed(dims):
    def run(value, old):
        for d in dims:
            written = value != old  # (NaN kept as NaN counts as written: the same value either way)
            first = jax.lax.slice_in_dim(old, 0, 1, axis=d)
            pick = jnp.take_along_axis(value, jnp.argmax(written, axis=d, keepdims=True), axis=d)
            value, old = jnp.where(jnp.any(written, axis=d, keepdims=True), pick, first), first
        return value

    return run
