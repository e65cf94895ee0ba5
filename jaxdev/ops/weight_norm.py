"""Weight normalization's fused op: aten::_weight_norm_interface and its backward.

torch._weight_norm (nn.utils.weight_norm, parametrizations.weight_norm) calls the fused op for
float32/float64/bfloat16 when `dim` is the first or the last dim: w = v * (g / ||v||), the norm taken
over every dim but `dim` and returned beside w (float32 for a bfloat16 g, as CPU keeps it). A g longer
than v's `dim` gives its first elements (CPU's kernel reads no more; the norms past them are memory it
never writes: zeros here, or the deterministic fill when asked). The backward is the VJP of the same
function (registry.register_backward), fed from the saved v and g.
"""

from __future__ import annotations

import math

import jax.numpy as jnp
import torch

from jaxdev.ops.kit import J, compiled, division, new_memory, opmath
from jaxdev.ops.registry import aten, register_backward, register_functional


def _weight_norm(v, g, dim, rest):
    c = opmath(v.dtype)
    axes = tuple(a for a in range(v.ndim) if a != dim)
    norm = division.sqrt(jnp.sum(jnp.square(v.astype(c)), axis=axes, keepdims=True))  # IEEE's, as CPU's
    k = math.prod(norm.shape)  # CPU's kernel reads g's first k elements (and writes as many norms)
    gk = g.reshape(-1)[:k].astype(c).reshape(norm.shape)
    w = v.astype(c) * division.divide(gk, norm)  # CPU's order: the factor g / norm first
    norm_dtype = jnp.float32 if g.dtype == jnp.bfloat16 else g.dtype
    norms = norm.reshape(-1).astype(norm_dtype)
    if g.size > k:  # the rest of a longer g's norms is memory CPU never writes
        norms = jnp.concatenate([norms, jnp.full(g.size - k, rest, norm_dtype)])
    return w.astype(v.dtype), norms.reshape(g.shape)


@register_functional(aten._weight_norm_interface.default, inplace=False, out=False)
def weight_norm_interface(v, g, dim=0):
    if v.device != g.device:
        raise RuntimeError(f"Expected all tensors to be on the same device, but found {v.device} and {g.device}")
    if dim not in (0, v.dim() - 1):  # CPU asserts the same (WeightNormKernel.cpp); -1 is not wrapped
        raise RuntimeError("weight norm: fused kernels can only be applied for first or last dim")
    size = v.shape[dim] if v.dim() else 1
    if g.numel() < size:  # CPU's kernel reads past g's end
        raise RuntimeError(
            f"weight norm: g has {g.numel()} elements, fewer than the {size} of dim {dim} of v, {tuple(v.shape)}"
        )
    rest = new_memory.uninitialised_value(torch.float32 if g.dtype == torch.bfloat16 else g.dtype)
    return compiled(_weight_norm, dim, 0.0 if rest is None else rest)(J(v), J(g))


def _saved(bound, grad_w):
    return {"v": bound["saved_v"], "g": bound["saved_g"], "dim": bound["dim"]}


register_backward(aten._weight_norm_interface_backward.default, aten._weight_norm_interface.default, prepare=_saved)
