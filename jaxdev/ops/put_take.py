"""put (flat positions written or added into) and its read, take: CPU's checks in its order, negative
positions from the end, the alert under deterministic algorithms. Their in-place variants write into
self's own buffer where they may (ops/kit/indexed_writes.py)."""

from __future__ import annotations

import jax.numpy as jnp
import torch

from jaxdev import dtypes, tracing
from jaxdev.ops.kit import J, add_at, any_device, jitted, overlaps
from jaxdev.ops.kit.index_checks import alert_not_deterministic
from jaxdev.ops.kit.indexed_writes import into
from jaxdev.ops.registry import aten, register, register_functional, store_into


@register_functional(aten.put.default, indexed=True)
def put(self, index, source, accumulate=False):
    if not accumulate:
        alert_not_deterministic("put_")  # CPU's put_: duplicate indices write in any order
    if index.dtype != torch.int64:
        raise RuntimeError(f"put_(): Expected a long tensor for index, but got {dtypes.scalar_name(index.dtype)}")
    if self.dtype != source.dtype:
        raise RuntimeError(
            f"put_(): self and source expected to have the same dtype, but got self.dtype = {self.dtype} and source.dtype = {source.dtype}"
        )
    if index.numel() != source.numel():
        raise RuntimeError(
            f"put_(): Expected source and index to have the same number of elements, but got source.numel() = {source.numel()}, index.numel() = {index.numel()}"
        )
    x = J(self)
    i = any_device(index).reshape(-1)
    n = x.size
    if i.size:
        tracing.check_values((i >= n) | (i < -n), lambda: _out_of_range(i, n))
    return into(_put(bool(accumulate)), x, i, J(source))


@jitted
def _put(accumulate):
    """x's flat positions i (negative from the end) set to, or added, the source's values."""

    def run(x, i, s):
        flat, s = x.reshape(-1), s.reshape(-1).astype(x.dtype)
        ref = flat.at[jnp.where(i < 0, i + flat.size, i)]
        return (add_at(ref, s) if accumulate else ref.set(s)).reshape(x.shape)

    return run


@register(aten.take.out)
def take_out(self, index, *, out):
    if out.dtype != self.dtype:  # CPU checks this first
        raise RuntimeError(
            "take(): self and out expected to have the same dtype, but got self.dtype = "
            f"{dtypes.scalar_name(self.dtype)} and out.dtype = {dtypes.scalar_name(out.dtype)}"
        )
    overlaps.check("take", out, {"self": self, "index": index})
    return store_into(out, take(self, index), resize=True)


@register_functional(aten.take.default, out=False)
def take(self, index):
    if index.dtype != torch.int64:
        raise RuntimeError(f"take(): Expected a long tensor for index, but got {dtypes.scalar_name(index.dtype)}")
    x = J(self).reshape(-1)
    i = any_device(index)
    n = x.size
    if i.size:
        tracing.check_values((i >= n) | (i < -n), lambda: _out_of_range(i, n))
    return x[jnp.where(i < 0, i + n, i)]


def _out_of_range(i, n) -> IndexError:
    bad = int(jnp.max(i)) if n == 0 or int(jnp.max(i)) >= n else int(jnp.min(i))
    return IndexError(f"out of range: tried to access index {bad} on a tensor of {n} elements.")
