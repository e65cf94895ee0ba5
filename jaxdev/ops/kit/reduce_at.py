"""Reductions into positions of an array, the traceable core of scatter_reduce, index_reduce and the
half-precision sums of index_add / scatter_add: `reduce_at(x, pos, s, reduce, ...)`.

Several values may meet at one position, and what meets there is combined in the order CPU's kernels
share: x's own value first (unless excluded), then the values in index order; sums and products of half
and bfloat16 accumulate in float32 and round once. Written naively (`_dense`) that needs arrays of x's
size (a "hit" mask, per-position counts, a float32 copy of x), so a write of 8 rows into a 512 MiB
tensor costs passes over all of it even when its buffer is donated. When the values are few next to x
(SPARSE), the program touches the n elements written and never all of x:
* amax, amin, and sums and products in x's own dtype scatter straight into x (`_direct`: an excluded
  x is first overwritten by the reduction's identity at the positions hit, NaNs are scattered after);
* a mean, or a sum or product in a wider dtype, makes the positions unique first (`_unique`: a sort of
  the n positions), then reads, combines and writes each once.
Both compute what `_dense` does, bit for bit.
"""

from __future__ import annotations

import jax.numpy as jnp

from jaxdev.ops.kit.index_checks import add_at, multiply_at

# The unique-positions path sorts the n positions written (n log n), where the dense one makes a few
# passes over x: it wins when n is well below x's size.
SPARSE = 8


def positions(i, d: int) -> tuple:
    """The full index tuple of a scatter along `d` with index array `i` (other dims: their own
    position)."""
    grids = list(jnp.meshgrid(*[jnp.arange(n) for n in i.shape], indexing="ij"))
    grids[d] = i
    return tuple(grids)


def extreme(dtype, for_max: bool):
    """The value every other value beats in amax (for_max) or amin."""
    if jnp.issubdtype(dtype, jnp.floating):
        return jnp.asarray(-jnp.inf if for_max else jnp.inf, dtype)
    if dtype == jnp.bool_:
        return jnp.asarray(not for_max)
    info = jnp.iinfo(dtype)
    return jnp.asarray(info.min if for_max else info.max, dtype)


def reduce_at(x, pos: tuple, s, reduce: str, include_self: bool = True, floor_mean: bool = False, acc=None):
    """Traceable: x with the values `s` (shaped as pos's arrays; of x's dtype, or of `acc` for a sum or
    product) reduced into x[pos] by `reduce` (sum, prod, mean, amax, amin); `include_self`: x's value
    there takes part; `acc`: the dtype sums and products accumulate in (x's own by default), rounded
    to x's once; `floor_mean`: an integer mean rounds down."""
    acc = x.dtype if acc is None else acc
    if SPARSE * s.size > x.size:
        return _dense(x, pos, s, reduce, include_self, floor_mean, acc)
    if reduce in ("amax", "amin") or (reduce != "mean" and acc == x.dtype):
        return _direct(x, pos, s, reduce, include_self)
    return _unique(x, pos, s, reduce, include_self, floor_mean, acc)


def _identity(dtype, reduce: str):
    """The value a reduction starts from where x's own value is excluded."""
    if reduce in ("amax", "amin"):
        return extreme(dtype, reduce == "amax")
    return jnp.ones((), dtype) if reduce == "prod" else jnp.zeros((), dtype)


def _dense(x, pos, s, reduce, include_self, floor_mean, acc):
    hit = jnp.zeros(x.shape, bool).at[pos].set(True)  # dropped by XLA where unused (sums with self)
    start = x if include_self else jnp.where(hit, _identity(x.dtype, reduce), x)
    new = _combined(start, s, lambda b: b.at[pos], reduce, include_self, floor_mean, acc)
    if reduce in ("amax", "amin") and jnp.issubdtype(x.dtype, jnp.floating):  # NaN wins, as on CPU
        nan = jnp.zeros(x.shape, bool).at[pos].max(jnp.isnan(s)) | jnp.isnan(start)
        new = jnp.where(nan, jnp.asarray(jnp.nan, x.dtype), new)
    return jnp.where(hit, new, x) if reduce == "mean" else new


def _direct(x, pos, s, reduce, include_self):
    nan = None
    if reduce in ("amax", "amin") and jnp.issubdtype(x.dtype, jnp.floating):
        nan = jnp.isnan(s) | jnp.isnan(x[pos]) if include_self else jnp.isnan(s)
        # The values carry the NaNs: that orders the read of x's old values before the scatter that
        # overwrites them (without it XLA copies the donated x to keep them).
        s = jnp.where(nan, jnp.asarray(jnp.nan, x.dtype), s)
    start = x if include_self else x.at[pos].set(_identity(x.dtype, reduce))
    new = _combined(start, s, lambda b: b.at[pos], reduce, include_self, False, x.dtype)
    if nan is not None:  # NaN wins, as on CPU, whatever max and min make of it: written last
        where = (jnp.where(nan, pos[0], x.shape[0]),) + tuple(pos[1:])  # past the end: dropped
        new = new.at[where].set(jnp.asarray(jnp.nan, x.dtype), mode="drop")
    return new


def _unique(x, pos, s, reduce, include_self, floor_mean, acc):
    flat = x.reshape(-1)
    # Padding past the unique positions points past x's end: its gathers clip, its writes are dropped.
    lin = jnp.ravel_multi_index(pos, x.shape, mode="clip").reshape(-1)
    unique, inverse = jnp.unique(lin, return_inverse=True, size=s.size, fill_value=x.size)
    old = jnp.take(flat, unique, mode="clip")
    start = old if include_self else jnp.broadcast_to(_identity(x.dtype, reduce), old.shape)  # all hit
    inverse = inverse.reshape(-1)
    new = _combined(start, s.reshape(-1), lambda b: b.at[inverse], reduce, include_self, floor_mean, acc)
    return flat.at[unique].set(new, mode="drop").reshape(x.shape)


def _combined(start, s, at, reduce, include_self, floor_mean, acc):
    """`start` (x, or the old values of the unique positions, with the identity where x is excluded)
    with `s` reduced in by `reduce`; `at(b)` is b's reference at the positions of s. A mean is right
    at the positions hit only."""
    if reduce == "amax":
        return at(start).max(s)
    if reduce == "amin":
        return at(start).min(s)
    combine = multiply_at if reduce == "prod" else add_at
    total = combine(at(start.astype(acc)), s.astype(acc)).astype(start.dtype)
    if reduce != "mean":
        return total
    count = at(jnp.zeros(start.shape, jnp.int64)).add(1) + (1 if include_self else 0)
    count = jnp.maximum(count, 1).astype(start.dtype)
    return jnp.floor_divide(total, count) if floor_mean else total / count
