"""CPU's TensorIterator loop layout, from metadata alone: where a CPU result depends on the order its loop
visits elements (the last of several writes to one location wins: ops/expanded_put.py) or on the loop's
innermost dim (flip of raw-byte dtypes copies whole rows only: ops/carriers/bit_dtypes.py).

`strides` is one list per operand (outputs first, as TensorIterator holds them), each as long as `shape`,
in any one unit per operand (TensorIterator compares bytes; only comparisons within an operand matter).
"""

from __future__ import annotations

from jaxdev import layout


def reordered(shape, strides) -> list[int]:
    """TensorIterator's reorder_dimensions: the dims, innermost first (layout.iteration_order, the rule
    result layouts already follow)."""
    return layout.iteration_order(shape, strides)


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
