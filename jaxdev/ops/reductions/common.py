"""What the reductions share: one memoised jitted program per reduction call (`reduce_over`), and CPU's
refusals of empty and complex inputs."""

from __future__ import annotations

import torch

from jaxdev import dtypes
from jaxdev.ops.kit import axes, jitted, on_views, opmath


@jitted
def _reduction(fn, axis, keepdims, compute, result):
    return lambda x: fn(dtypes.convert(x, compute), axis=axis, keepdims=keepdims).astype(result)


# (fn, dim, keepdim, ndim, result, compute) -> the jitted reduction: one lookup keyed by what the op
# was called with, where building the key of _reduction (axes, numpy dtypes) costs a microsecond.
_REDUCTIONS: dict = {}


def reduce_over(fn, x: torch.Tensor, dim, keepdim, result: torch.dtype, compute: torch.dtype | None = None):
    ndim = x.dim()
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
