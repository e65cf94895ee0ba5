"""How CPU lays out scaled_dot_product_attention's results, which user code can see.

On CPU, F.scaled_dot_product_attention takes the fused flash kernel wherever PyTorch's checks allow
it (4-dim inputs of one head size, ...) and the math path otherwise. The two lay their results out
differently, and code that reshapes the result with `.view` works only on the layout it got:
`out.transpose(1, 2).view(b, length, width)` after heads split from a (b, length, heads, d) input is
valid on CPU (flash writes `out` in the query's order of dims) and failed on jax while jax laid every
result out contiguously, as the math path does. So jax asks CPU's own chooser which path CPU would take
(torch._fused_sdp_choice, on stand-ins that hold one row each: the checks read sizes, strides and
dtypes only) and lays the results out as that path does:
- flash: the output in the query's order of dims; the logsumexp (batch, heads, L) over (batch, L,
  heads) memory; the gradients of query, key and value over (batch, L, heads, d) memory whatever the
  inputs' layouts (CPU's flash backward allocates them so).
- math: every result contiguous, but the key's gradient, which comes out of a product transposed.
"""

from __future__ import annotations

import functools

import torch

_FLASH = 1  # sdp::SDPBackend::flash_attention in torch._fused_sdp_choice's answer


def _stand_in(shape, dtype):
    """A CPU tensor with `shape` that allocates one row: strides 0 but a last one of 1."""
    if shape is None:
        return None
    return torch.empty(shape[-1], dtype=dtype).expand(shape)


@functools.lru_cache(maxsize=256)
def _cpu_takes_flash(q, k, v, mask, dtype, is_causal, scale, mask_dtype) -> bool:
    args = [_stand_in(s, dtype) for s in (q, k, v)]
    attn_mask = _stand_in(mask, mask_dtype)
    try:
        choice = torch._fused_sdp_choice(*args, attn_mask, 0.0, is_causal, scale=scale)
    except RuntimeError:  # CPU refuses the call itself: no layout of its to follow
        return False
    return choice == _FLASH


def cpu_takes_flash(query, key, value, attn_bias, is_causal, scale) -> bool:
    """Whether CPU would run this attention with its flash kernel (see the module's docstring)."""
    if query.dim() != 4:
        return False
    mask = tuple(attn_bias.shape) if attn_bias is not None else None
    mask_dtype = attn_bias.dtype if attn_bias is not None else None
    shapes = (tuple(query.shape), tuple(key.shape), tuple(value.shape))
    return _cpu_takes_flash(*shapes, mask, query.dtype, bool(is_causal), scale, mask_dtype)


def _in_order(shape, order) -> tuple:
    """Strides for `shape` laid out in memory in `order` (outermost dim first)."""
    strides, step = [0] * len(shape), 1
    for d in reversed(order):
        strides[d] = step
        step *= shape[d]
    return tuple(strides)


def forward_strides(query, out_shape, lse_shape) -> tuple:
    """CPU flash's (output, logsumexp) strides: the query's order of dims; (batch, L, heads)."""
    order = sorted(range(4), key=lambda d: query.stride()[d], reverse=True)
    return _in_order(out_shape, order), _in_order(lse_shape, (0, 2, 1))


def backward_strides(shape) -> tuple:
    """CPU flash's gradient strides: (batch, heads, L, d) over (batch, L, heads, d) memory."""
    return _in_order(shape, (0, 2, 1, 3))
