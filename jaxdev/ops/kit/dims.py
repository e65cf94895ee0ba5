"""PyTorch's dim rules and errors: `wrap_dim`, `axes`; and `each_location_once` (a tensor's broadcast
dims narrowed to one element)."""

from __future__ import annotations


def wrap_dim(d: int, ndim: int) -> int:
    lo, hi = (-1, 0) if ndim == 0 else (-ndim, ndim - 1)
    if not lo <= d <= hi:
        raise IndexError(f"Dimension out of range (expected to be in range of [{lo}, {hi}], but got {d})")
    return d % max(ndim, 1)


def axes(dim, ndim: int) -> tuple[int, ...]:
    """`dim` (None, int, or a list; empty means all) as sorted non-negative axes."""
    if dim is None or (isinstance(dim, (list, tuple)) and len(dim) == 0):
        return tuple(range(ndim))
    dims = [dim] if isinstance(dim, int) else list(dim)
    out = tuple(sorted({wrap_dim(d, ndim) for d in dims}))
    if len(out) != len(dims):
        raise RuntimeError(f"dim {dims[0]} appears multiple times in the list of dims")
    return out if ndim > 0 else ()


def each_location_once(t):
    """t's broadcast (stride-0) dimensions narrowed to one element: the same memory locations, each once.
    CPU's fill_ with a number, zero_ and threshold_ skip TensorIterator's internal-overlap check (every
    element aliasing one location gets the same value), so an expanded tensor can be written by them;
    writing through this view does the same. A negative or conjugate view is written by PyTorch's
    fallback through copy_, which checks: left as is, it raises."""
    if t.is_neg() or t.is_conj():
        return t
    for d, (n, s) in enumerate(zip(t.shape, t.stride())):
        if s == 0 and n > 1:
            t = t.narrow(d, 0, 1)
    return t
