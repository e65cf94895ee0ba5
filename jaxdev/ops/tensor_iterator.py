"""CPU's TensorIterator loop layout, from metadata alone: where a CPU result depends on the order its loop
visits elements (the last of several writes to one location wins: ops/expanded_put.py) or on the loop's
innermost dim (flip of raw-byte dtypes copies whole rows only: ops/bit_dtypes.py).

`strides` is one list per operand (outputs first, as TensorIterator holds them), each as long as `shape`,
in any one unit per operand (TensorIterator compares bytes; only comparisons within an operand matter).
"""

from __future__ import annotations


def reordered(shape, strides) -> list[int]:
    """TensorIterator's reorder_dimensions: the dims, innermost first. An insertion sort from the last dim
    as the innermost, by the first operand whose strides along both dims are nonzero: the smaller stride
    goes inner; equal strides put the smaller dim inner or leave the decision to the next operand."""

    def should_swap(d0, d1) -> int:
        for st in strides:
            s0, s1 = st[d0], st[d1]
            if s0 == 0 or s1 == 0:
                continue
            if s0 != s1:
                return -1 if s0 < s1 else 1
            if shape[d0] > shape[d1]:
                return 1
        return 0

    perm = list(range(len(shape)))[::-1]
    for i in range(1, len(perm)):
        d1 = i
        for d0 in range(i - 1, -1, -1):
            c = should_swap(perm[d0], perm[d1])
            if c > 0:
                perm[d0], perm[d1] = perm[d1], perm[d0]
                d1 = d0
            elif c < 0:
                break
    return perm


def coalesced(shape, strides) -> tuple[list[int], list[list[int]]]:
    """TensorIterator's coalesce_dimensions over dims already innermost first: neighbours merge where one
    has size 1 or every operand steps over the inner one exactly (size * stride == the outer stride)."""
    shape, strides = list(shape), [list(st) for st in strides]
    if len(shape) <= 1:
        return shape, strides
    prev = 0
    for dim in range(1, len(shape)):
        n0, n1 = shape[prev], shape[dim]
        if n0 == 1 or n1 == 1 or all(n0 * st[prev] == st[dim] for st in strides):
            if n0 == 1:
                for st in strides:
                    st[prev] = st[dim]
            shape[prev] *= n1
        else:
            prev += 1
            if prev != dim:
                for st in strides:
                    st[prev] = st[dim]
                shape[prev] = n1
    return shape[: prev + 1], [st[: prev + 1] for st in strides]


def loop_layout(shape, strides) -> tuple[list[int], list[list[int]]]:
    """(shape, strides per operand) of the loop TensorIterator runs, innermost dim first."""
    perm = reordered(shape, strides)
    return coalesced([shape[d] for d in perm], [[st[d] for d in perm] for st in strides])
