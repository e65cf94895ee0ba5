"""Advanced indexing: `x[idx]` (aten::index) and `x[idx] = v` (index_put, with or without
accumulate), through integer index tensors and boolean masks.

Data-dependent shapes (boolean masks) are computed concretely: this is eager mode. They must not
compile a program per count of true values (`x[mask] = v` in a training loop would compile on every
step): positions come from one padded program per mask shape plus a slice to the count, and a write
through a single mask needs no positions at all. Integer indices are bounds-checked like PyTorch (JAX
would silently clamp them). `x[idx] = v` into a storage nothing else sees writes into its own buffer
(ops/kit/indexed_writes.py).
"""

from __future__ import annotations

import jax.numpy as jnp

from jaxdev import tensor
from jaxdev.ops.kit import J, add_at, indexed_writes, jitted, overlaps
from jaxdev.ops.kit.indexed_writes import into
from jaxdev.ops.kit.indices import (
    check_put_dtypes,
    index_tuple,
    joined_index,
    masked_rows,
    put_index,
    put_value,
    single_mask,
    split_index,
)
from jaxdev.ops.registry import aten, register, register_functional

# Positions of true values, one compile per shape.


@jitted
def _put_through_mask(p, accumulate):
    """index_put with one mask over dims p ..: the i-th true position takes row i of v along dim p
    (v's dim p is 1 or the count), through a running count instead of the positions."""

    def run(x, m, v):
        k = m.ndim
        row = jnp.clip(jnp.cumsum(m.reshape(-1)) - 1, 0, v.shape[p] - 1)
        g = jnp.take(v, row, axis=p).reshape(x.shape)
        if accumulate:
            g = x | g if x.dtype == jnp.bool_ else x + g
        return jnp.where(m.reshape((1,) * p + m.shape + (1,) * (x.ndim - p - k)), g, x)

    return run


@register_functional(aten.index.Tensor)
def index(self, indices):
    single = single_mask(self, indices)
    if single is not None:
        return masked_rows(J(self), single[1], single[0])
    structure, arrays = split_index(index_tuple(self, indices))
    return _indexed(structure)(J(self), *arrays)


@jitted
def _indexed(structure):
    """x[index] in one program."""
    return lambda x, *arrays: x[joined_index(structure, arrays)]


@register_functional(aten.index_put.default, indexed=True)
def index_put(self, indices, values, accumulate=False):
    x = J(self)
    single = single_mask(self, indices)
    if single is not None:
        check_put_dtypes(self, values, zero_dim_converts=True)
        p, mask = single
        return into(_put_through_mask(p, bool(accumulate)), x, mask, put_value(self, values, mask, p))
    index, v = put_index(self, indices, values)
    structure, arrays = split_index(index)
    return into(_put_at(structure, bool(accumulate)), x, v, *arrays)


@jitted
def _put_at(structure, accumulate):
    """index_put's update in one program (the index as in _indexed)."""

    def run(x, v, *arrays):
        ref = x.at[joined_index(structure, arrays)]
        v = v.astype(x.dtype)
        return add_at(ref, v) if accumulate else ref.set(v)

    return run


@register(aten._index_put_impl_.default)
def index_put_impl_(self, indices, values, accumulate=False, unsafe=False):
    overlaps.check("_index_put_impl", self, {"indices": indices, "values": values})
    if overlaps.expanded_dims(self):
        overlaps.write_expanded(aten._index_put_impl_.default, self, index_put, (indices, values, accumulate), {})
        return self
    others = [ix for ix in indices if ix is not None] + [values]
    tensor.write(self, indexed_writes.computed(index_put, self, (indices, values, accumulate), {}, others))
    return self
