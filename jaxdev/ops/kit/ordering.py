"""PyTorch's order: `sort_key` (NaN last, -0.0 == 0.0, bools as integers) and `stable_sort`."""

from __future__ import annotations

import jax.numpy as jnp

from jaxdev.ops.kit.jit import jitted


def sort_key(x):
    """PyTorch's order as a sort key: -0.0 and 0.0 tie (lax.sort orders them), bools sort as
    integers; NaN sorts last, as lax.sort puts it."""
    if x.dtype == jnp.bool_:
        return x.astype(jnp.uint8)
    if jnp.issubdtype(x.dtype, jnp.floating):
        return x + jnp.zeros((), x.dtype)
    return x


def _argsort_last(x, descending):
    return jnp.argsort(sort_key(x), axis=-1, stable=True, descending=descending)


@jitted
def stable_sort(axis, descending):
    def run(x):
        x = jnp.moveaxis(x, axis, -1)
        idx = _argsort_last(x, descending)
        vals = jnp.take_along_axis(x, idx, axis=-1)
        return jnp.moveaxis(vals, -1, axis), jnp.moveaxis(idx, -1, axis).astype(jnp.int64)

    return run
