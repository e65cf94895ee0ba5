"""CPU's checks of the index tensors of index_select, gather and scatter (and their errors), shared by
the indexing and scatter families, and accumulation and bounds as PyTorch does them (`add_at`,
`multiply_at`, `check_index_bounds`): indices in [0, size) only, int32/int64 dtypes, and PyTorch's
convention that a 0-dim tensor has one dim of size 1; and the alert of kernels whose duplicate
indices write in any order (alert_not_deterministic)."""

from __future__ import annotations

import warnings

import jax.numpy as jnp
import numpy as np
import torch

from jaxdev import tracing
from jaxdev.ops.kit.jit import jitted


def first_outside(i, size: int) -> int:
    """The first index (row-major) outside [0, size): the one CPU's loops report."""
    flat = np.asarray(i).reshape(-1)
    return int(flat[np.argmax((flat < 0) | (flat >= size))])


def check_in_range(i, size: int, error) -> None:
    """CPU's index_select/gather/scatter take indices in [0, size) only (no negative ones)."""
    if i.size:
        tracing.check_values(outside(0, int(size))(i), error)


def index_dtype_check(name, index) -> None:
    if index.numel() != 0 and index.dtype not in (torch.int64, torch.int32):  # CPU checks non-empty ones
        raise RuntimeError(f"{name}(): Expected dtype int32/int64 for index")


def bounds_error(i, size, d):
    return lambda: RuntimeError(f"index {first_outside(i, size)} is out of bounds for dimension {d} with size {size}")


def nonempty_dim(t) -> int:
    return max(t.dim(), 1)


def nonempty_size(t, d: int) -> int:
    return t.shape[d] if t.dim() else 1


def alert_not_deterministic(caller: str) -> None:
    """at::globalContext().alertNotDeterministic(caller): CPU's kernel raises (or warns, with
    warn_only) under torch.use_deterministic_algorithms(True) before anything else."""
    if not torch.are_deterministic_algorithms_enabled():
        return
    head = f"{caller} does not have a deterministic implementation, but you set "
    if torch.is_deterministic_algorithms_warn_only_enabled():
        warnings.warn(
            head + "'torch.use_deterministic_algorithms(True, warn_only=True)'. You can file an issue at "
            "https://github.com/pytorch/pytorch/issues to help us prioritize adding deterministic support for "
            "this operation.",
            UserWarning,
            stacklevel=3,
        )
        return
    raise RuntimeError(
        head + "'torch.use_deterministic_algorithms(True)'. You can turn off determinism just for this "
        "operation, or you can use the 'warn_only=True' option, if that's acceptable for your application. "
        "You can also file an issue at https://github.com/pytorch/pytorch/issues to help us prioritize adding "
        "deterministic support for this operation."
    )


def add_at(ref, values):
    """`ref.add(values)` for an `x.at[...]` reference; for bool, PyTorch's sum is a logical or."""
    return ref.max(values) if values.dtype == jnp.bool_ else ref.add(values)


def multiply_at(ref, values):
    """`ref.multiply(values)`; for bool, PyTorch's product is a logical and."""
    return ref.min(values) if values.dtype == jnp.bool_ else ref.multiply(values)


def check_index_bounds(idx, size: int, dim: int, error_of=None) -> None:
    """PyTorch's IndexError for an index outside [-size, size) (deferred inside compiled programs);
    `error_of(message)` makes an op's own error from the usual message."""
    if idx.size == 0:
        return

    def error():
        lo, hi = int(jnp.min(idx)), int(jnp.max(idx))
        bad = lo if lo < -size else hi
        message = f"index {bad} is out of bounds for dimension {dim} with size {size}"
        return IndexError(message) if error_of is None else error_of(message)

    tracing.check_values(outside(-int(size), int(size))(idx), error)


@jitted
def outside(low: int, high: int):
    """The flag "an index lies outside [low, high)" as one program (eagerly: two comparisons, an or and
    an any, ~30 us)."""
    return lambda idx: jnp.any((idx < low) | (idx >= high))
