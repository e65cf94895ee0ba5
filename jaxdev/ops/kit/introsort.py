"""The order CPU's torch.mode leaves tied elements in: libstdc++'s std::sort (an introsort, not stable)
of (value, index) pairs compared by value only, whose last pair among the modal value's run gives the
index (aten/src/ATen/native/cpu/TensorCompareKernel.cpp, mode_kernel_impl).

std::sort is deterministic, so its order can be reproduced: median-of-three pivots moved to the
segment's front, Hoare's unguarded partition, recursion down to segments of 16 or fewer, a heapsort
for a segment still longer after 2 floor(log2 n) levels, then an insertion sort over the whole array.
The insertion sort is stable and the partitioned segments are in order, so its result is the stable
sort of the partitioned array. A partition is computed for every segment of every row at once: the
k-th element from the left that stops the left scan (not below the pivot) swaps with the k-th from
the right that stops the right scan (not above it) while the first lies left of the second, and the
cut is the first crossing. The heapsort (taken for median-of-three killers, an organ pipe for one)
runs as libstdc++'s sift-down and sift-up loops, one segment after another.

NaN is reproduced too: the partitions compare as CPU does, and the final insertion sort, where NaN
is never greater than an element and never moves left, is followed exactly (_insertion_sort).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

_THRESHOLD = 16  # libstdc++'s _S_threshold


def _take(a, i):
    return jnp.take_along_axis(a, jnp.clip(i, 0, a.shape[1] - 1), axis=1)


def _segments(start):
    """Each position's segment [first, last) from the segment-start marks."""
    n = start.shape[1]
    pos = jnp.broadcast_to(jnp.arange(n), start.shape)
    first = jax.lax.cummax(jnp.where(start, pos, 0), axis=1)
    at_or_after = jax.lax.cummin(jnp.where(start, pos, n), axis=1, reverse=True)
    last = jnp.concatenate([at_or_after[:, 1:], jnp.full_like(first[:, :1], n)], axis=1)
    return pos, first, last


def _median_to_first(key, first, last):
    """__move_median_to_first(first, first + 1, mid, last - 1): the position swapped with `first`."""
    mid = first + (last - first) // 2
    a, b, c = _take(key, first + 1), _take(key, mid), _take(key, last - 1)
    return jnp.where(
        a < b,
        jnp.where(b < c, mid, jnp.where(a < c, last - 1, first + 1)),
        jnp.where(a < c, first + 1, jnp.where(b < c, last - 1, mid)),
    )


def _partition(key, arrays, start):
    """One level of __introsort_loop over every segment longer than the threshold."""
    rows, n = key.shape
    pos, first, last = _segments(start)
    active = last - first > _THRESHOLD
    chosen = _median_to_first(key, first, last)
    src = jnp.where(active & (pos == first), chosen, jnp.where(active & (pos == chosen), first, pos))
    key, arrays = _take(key, src), [_take(a, src) for a in arrays]
    pivot = _take(key, first)
    left = active & (pos > first) & ~(key < pivot)  # where the left scan stops
    right = active & ~(pivot < key)  # where the right scan stops (the pivot itself at worst)
    count_left = jnp.cumsum(left, axis=1)
    count_right = jnp.cumsum(right[:, ::-1], axis=1)[:, ::-1]  # right stops at or after each position
    padded = jnp.concatenate([count_right, jnp.zeros_like(count_right[:, :1])], axis=1)
    right_from_last, left_to_first = _take(padded, last), _take(count_left, first)
    rank_left, rank_right = count_left - left_to_first, count_right - right_from_last
    beyond = _take(padded, pos + 1) - right_from_last  # right stops after a left stop
    before = count_left - left - left_to_first  # left stops before a right stop
    swap_left, swap_right = left & (beyond >= rank_left), right & (before >= rank_right)
    # where the stop with a given running count sits (slot n + 1 takes the rest)
    row = jnp.arange(rows)[:, None]
    at_left = jnp.zeros((rows, n + 2), pos.dtype).at[row, jnp.where(left, count_left, n + 1)].set(pos)
    at_right = jnp.zeros((rows, n + 2), pos.dtype).at[row, jnp.where(right, count_right, n + 1)].set(pos)

    def stop(table, count):
        return jnp.take_along_axis(table, jnp.clip(count, 0, n + 1), axis=1)

    partner = jnp.where(
        swap_left, stop(at_right, rank_left + right_from_last), stop(at_left, rank_right + left_to_first)
    )
    src = jnp.where(swap_left | swap_right, partner, pos)
    key, arrays = _take(key, src), [_take(a, src) for a in arrays]
    swaps = jnp.cumsum(swap_left, axis=1)
    crossing = _take(swaps, last - 1) - _take(swaps, first) + 1  # the scans' first crossing
    left_stops = _take(count_left, last - 1) - left_to_first
    left_at = jnp.where(crossing <= left_stops, stop(at_left, crossing + left_to_first), n)
    right_at = jnp.where(crossing > 1, stop(at_right, crossing - 1 + right_from_last), n)
    cut = jnp.minimum(left_at, right_at)
    return key, arrays, start | (active & (pos == cut)), jnp.any(active)


def _adjust_heap(key, arrays, first, hole, length, value):
    """libstdc++'s __adjust_heap on one row: sift the hole down to a leaf by the larger child, then
    push `value` (key, then the other arrays' entries) up from there."""
    top = hole

    def move(state, to, frm):
        key, arrays = state
        return key.at[first + to].set(key[first + frm]), [a.at[first + to].set(a[first + frm]) for a in arrays]

    def down(s):
        state, hole, child = s
        child = 2 * (child + 1)
        child = jnp.where(state[0][first + child] < state[0][first + child - 1], child - 1, child)
        return move(state, hole, child), child, child

    state, hole, child = jax.lax.while_loop(lambda s: s[2] < (length - 1) // 2, down, ((key, arrays), hole, hole))
    even = ((length & 1) == 0) & (child == (length - 2) // 2)
    state = move(state, hole, jnp.where(even, 2 * child + 1, hole))
    hole = jnp.where(even, 2 * child + 1, hole)

    def rising(s):
        parent = jnp.maximum((s[1] - 1) // 2, 0)
        return (s[1] > top) & (s[0][0][first + parent] < value[0])

    def up(s):
        state, hole = s
        parent = (hole - 1) // 2
        return move(state, hole, parent), parent

    (key, arrays), hole = jax.lax.while_loop(rising, up, (state, hole))
    return key.at[first + hole].set(value[0]), [a.at[first + hole].set(v) for a, v in zip(arrays, value[1:])]


def _heapsort(key, arrays, first, length):
    """__partial_sort(first, last, last): __make_heap, then __sort_heap, on one row's segment."""

    def make(s):
        key, arrays, parent = s
        value = [key[first + parent]] + [a[first + parent] for a in arrays]
        return (*_adjust_heap(key, arrays, first, parent, length, value), parent - 1)

    key, arrays, _ = jax.lax.while_loop(lambda s: s[2] >= 0, make, (key, arrays, (length - 2) // 2))

    def pop(s):
        key, arrays, size = s
        last = first + size - 1
        value = [key[last]] + [a[last] for a in arrays]
        key, arrays = key.at[last].set(key[first]), [a.at[last].set(a[first]) for a in arrays]
        return (*_adjust_heap(key, arrays, first, 0, size - 1, value), size - 1)

    key, arrays, _ = jax.lax.while_loop(lambda s: s[2] > 1, pop, (key, arrays, length))
    return key, arrays


def _heapsort_row(key, arrays, begins, ends):
    """Heapsorts each of a row's segments that `begins` marks, one after another."""
    n = key.shape[0]
    pos = jnp.arange(n)

    def next_after(cur):
        later = begins & (pos > cur)
        return jnp.where(jnp.any(later), jnp.argmax(later), n)

    def body(s):
        key, arrays, cur = s
        key, arrays = _heapsort(key, arrays, cur, ends[cur] - cur)
        return key, arrays, next_after(cur)

    start = jnp.where(begins[0], 0, next_after(0))
    key, arrays, _ = jax.lax.while_loop(lambda s: s[2] < n, body, (key, arrays, start))
    return key, arrays


def std_sort(key, arrays):
    """Rows of `key` (2-D) in the order std::sort leaves them with `key`'s `<`, `arrays` (same shape)
    permuted alongside."""
    rows, n = key.shape
    if n > _THRESHOLD:
        start = jnp.zeros((rows, n), bool).at[:, 0].set(True)
        depth_limit = 2 * (n.bit_length() - 1)

        def level(s):
            depth, key, arrays, start, _ = s
            return (depth + 1, *_partition(key, arrays, start))

        state = (0, key, arrays, start, jnp.asarray(True))
        _, key, arrays, start, _ = jax.lax.while_loop(lambda s: (s[0] < depth_limit) & s[-1], level, state)
        _, first, last = _segments(start)
        begins = start & (last - first > _THRESHOLD)  # the depth limit reached: heapsort these

        def heapsort(operands):
            return jax.vmap(_heapsort_row)(*operands, begins, last)

        key, arrays = jax.lax.cond(jnp.any(begins), heapsort, lambda operands: operands, (key, arrays))
    return _insertion_sort(key, arrays)


def _insertion_sort(key, arrays):
    """__final_insertion_sort: the guarded insertion sort of the first 16 (where an element below the
    first jumps to the front), then linear insertion of the rest. An element moves left past greater
    ones only, and NaN is never greater nor moves itself: past the first 16 each NaN-delimited block
    ends up stably sorted in place (the whole row when there is no NaN)."""
    n = key.shape[1]
    width = min(n, _THRESHOLD)
    slot = jnp.arange(width)

    def insert(i, window):
        head, value = window[0], jax.lax.dynamic_slice_in_dim(window[0], i, 1, axis=1)
        stays = ~(value < head) & (slot < i)  # where the leftward scan stops
        stop = jnp.max(jnp.where(stays, slot, -1), axis=1, keepdims=True)
        to = jnp.where(value < head[:, :1], 0, stop + 1)
        src = jnp.where((slot < to) | (slot > i), slot, jnp.where(slot == to, i, slot - 1))
        return [jnp.take_along_axis(w, src, axis=1) for w in window]

    window = jax.lax.fori_loop(1, width, insert, [key[:, :width]] + [a[:, :width] for a in arrays])
    merged = [jnp.concatenate([w, a[:, width:]], axis=1) for w, a in zip(window, [key, *arrays])]
    key, arrays = merged[0], merged[1:]
    if not jnp.issubdtype(key.dtype, jnp.floating):
        out = jax.lax.sort((key, *arrays), dimension=1, is_stable=True, num_keys=1)
        return out[0], list(out[1:])
    nan = jnp.isnan(key)
    block = jnp.cumsum(nan, axis=1)
    order = jnp.where(nan | (key == 0), jnp.zeros((), key.dtype), key)  # -0.0 equals 0.0 in `<`
    out = jax.lax.sort((block, ~nan, order, key, *arrays), dimension=1, is_stable=True, num_keys=3)
    return out[3], list(out[4:])
