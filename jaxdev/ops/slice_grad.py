"""slice_backward as one program: the gradient of `x[..., start:end:step, ...]` (a fused qkv
projection's split, a chunk) is zeros of the input's shape with the slice's gradient in place.

PyTorch's kernel is a CompositeExplicitAutograd one: `zeros(input_sizes, grad.options())`, the slice of
it, `copy_(grad)`: three dispatched ops and two programs in per-op eager (70 us against 9 us for the
same program alone on the LM's op stream, benchmarks/op_stream.py). Here it is one `lax.pad` of the
gradient: zeros before the slice, between its steps and after it, which is exactly the composite's
result (the values copied as they are, zeros elsewhere, a new contiguous tensor of grad's dtype), and a
memo kernel replays it natively (kit/memo.py). Where the slice's shape is not the gradient's (copy_
would broadcast), or the gradient is empty, conjugated or negated, PyTorch's composite runs as before.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import torch

from jaxdev import dtypes, tensor
from jaxdev.ops.kit import compiled, memo, on_views
from jaxdev.ops.registry import aten, register

_CPU = torch._C.DispatchKeySet(torch._C.DispatchKey.CPU)  # the composite is CPU's kernel too


def _slice_range(size: int, start: int, end: int, step: int) -> tuple[int, int]:
    """(first index, length) of `slice(start, end, step)` over a dim of `size`, as at::slice clamps it."""
    start = start + size if start < 0 else start
    end = end + size if end < 0 else end
    start = min(max(start, 0), size)
    end = min(max(end, start), size)
    return start, (end - start + step - 1) // step


def _pad_body(g, padding):
    return jax.lax.pad(g, jnp.zeros((), g.dtype), padding)


def _padding(grad, input_sizes, dim: int, start: int, end: int, step: int):
    """The (low, high, interior) padding of each dim that puts `grad` at the slice, or None."""
    n = len(input_sizes)
    if (
        not tensor.is_jax(grad)
        or grad.is_conj()
        or grad.is_neg()
        or grad.numel() == 0
        or grad.dim() != n
        or not -n <= dim < n
        or step <= 0
    ):
        return None
    d = dim % n
    first, length = _slice_range(input_sizes[d], start, end, step)
    if list(grad.shape) != [length if k == d else s for k, s in enumerate(input_sizes)]:
        return None
    last = first + (length - 1) * step  # the last index written
    return tuple((first, input_sizes[k] - last - 1, step - 1) if k == d else (0, 0, 0) for k in range(n))


def _held_as_is(dtype: torch.dtype) -> bool:
    """A dtype whose values a jax array holds as such, and whose result tensor.wrap names back."""
    try:
        return dtypes.JAX_TO_TORCH.get(dtypes.to_jax_dtype(dtype)) is dtype
    except Exception:  # a dtype the platform refuses, or one held in carrier bits: the composite's
        return False


@register(aten.slice_backward.default)
def slice_backward(grad_output, input_sizes, dim, start, end, step):
    padding = _padding(grad_output, list(input_sizes), dim, start, end, step)
    if padding is None or not _held_as_is(grad_output.dtype):
        memo.not_learned()  # the composite's ops: a memo kernel must not take them for this call
        return aten.slice_backward.default._handle.redispatch_boxed(
            _CPU, grad_output, input_sizes, dim, start, end, step
        )
    return tensor.wrap(on_views(compiled(_pad_body, padding), (grad_output,)))
