"""What the reductions share: one memoised jitted program per reduction call (`reduce_over`), and CPU's
refusals of empty and complex inputs."""

from __future__ import annotations

import jax.numpy as jnp
import torch

from jaxdev import dtypes
from jaxdev.ops.kit import axes, jitted, on_views, opmath, unflattened


@jitted
def _reduction(fn, axis, keepdims, compute, result):
    return lambda x: fn(dtypes.convert(x, compute), axis=axis, keepdims=keepdims).astype(result)


# (fn, dim, keepdim, ndim, result, compute) -> the jitted reduction: one lookup keyed by what the op
# was called with, where building the key of _reduction (axes, numpy dtypes) costs a microsecond.
_REDUCTIONS: dict = {}


@jitted
def _rows_reduction(fn, keepdims, compute, result):
    """`fn` over dim 0 of the rows an N-D array flattens to, taken over its leading dims unflattened."""

    def run(x):
        out = fn(dtypes.convert(x, compute), axis=tuple(range(x.ndim - 1))).astype(result)
        return out.reshape((1, -1) if keepdims else (-1,))

    return run


def _over_rows(fn, x: torch.Tensor, dim, keepdim, result: torch.dtype, compute: torch.dtype | None):
    """Inside a traced program, a sum over dim 0 of a 2-D tensor that is all of an N-D array (the
    bias gradient of F.linear over a [batch, seq, k] input: autograd sums addmm's [batch * seq, k]
    gradient to the bias's shape) taken over that array's leading dims, as kit.unflattened's products
    are: the flattened rows made XLA's TPU compiler copy the gradient of the fused qkv (put together
    from the heads' [batch, seq, heads, d] gradients) into a row-major [batch * seq, 3k] layout for the
    reduction, two copies of ~93k cycles each a layer (issue 37). None where that does not apply. The
    same bits on CPU: XLA sums the two shapes in the same order (checked for float16/32/64, bfloat16)."""
    if fn is not jnp.sum or x.dim() != 2 or axes(dim, 2) != (0,):
        return None
    source = unflattened(x)
    if source is None:
        return None
    jdt = opmath(dtypes.to_jax_dtype(compute or result))
    return on_views(_rows_reduction(fn, bool(keepdim), jdt, dtypes.to_jax_dtype(result)), (source,))


def reduce_over(fn, x: torch.Tensor, dim, keepdim, result: torch.dtype, compute: torch.dtype | None = None):
    ndim = x.dim()
    if ndim == 2 and (rows := _over_rows(fn, x, dim, keepdim, result, compute)) is not None:
        return rows
    key = (fn, tuple(dim) if isinstance(dim, list) else dim, keepdim, ndim, result, compute)
    try:
        body = _REDUCTIONS.get(key)
    except TypeError:  # an unhashable dim (symbolic sizes): no memo
        key, body = None, None
    if body is None:
        # axes() raises on a bad dim before anything is kept.
        jdt = opmath(dtypes.to_jax_dtype(compute or result))
        body = _reduction(fn, axes(dim, ndim), bool(keepdim), jdt, dtypes.to_jax_dtype(result))
        if key is not None:
            if len(_REDUCTIONS) >= 4096:
                _REDUCTIONS.clear()
            _REDUCTIONS[key] = body
    return on_views(body, (x,))


def check_nonempty(self, dim, name):
    if self.numel() == 0 and (dim is None or (isinstance(dim, (list, tuple)) and len(dim) == 0)):
        raise RuntimeError(
            f"{name}(): Expected reduction dim to be specified for input.numel() == 0. "
            "Specify the reduction dim with the 'dim' argument."
        )
    for a in axes(dim, self.dim()):
        if self.shape[a] == 0:
            raise IndexError(f"{name}(): Expected reduction dim {a} to have non-zero size.")


def no_complex(name: str, dtype: torch.dtype, kernel: str | None = None) -> None:
    """CPU's max, min, argmax and argmin refuse complex (and argmax/argmin bool) inputs: in their own
    words, or as their kernel's missing dtype case (`kernel`). jnp ordered complex by real part, or
    raised its own TypeError."""
    if dtype.is_complex:
        if kernel is not None:
            raise NotImplementedError(f"\"{kernel}\" not implemented for '{dtypes.scalar_name(dtype)}'")
        raise RuntimeError(f"{name}(): does not support complex input")
    if dtype == torch.bool and name in ("argmax", "argmin"):
        raise RuntimeError(f"{name}(): does not support bool input")
