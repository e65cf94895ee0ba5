"""The fused inference kernels of nn.MultiheadAttention's and nn.TransformerEncoderLayer's fast paths:
aten::_native_multi_head_attention and aten::_transformer_encoder_layer_fwd, each one jitted program.

PyTorch takes these paths in eval mode (or under no_grad) when no input needs a gradient; neither op
has a derivative (CPU raises for one too). Values are those of CPU's native_multi_head_attention
(attention.cpp): q, k and v projected without bias, the bias added and q scaled by 1/sqrt(head dim)
(_transform_bias_rescale_qkv), q k^T, a masked softmax over the last dim, the product with v, the output
projection. A mask element that is nonzero (True, or -inf in a float mask) hides that key, and a row
that sees no key is NaN, as CPU's _masked_softmax gives; mask_type says the mask's shape: 0 (L, L),
1 a key padding mask (B, L), otherwise one that broadcasts to (B, heads, L, L). The encoder layer is
CPU's transformer_encoder_layer_forward: attention, residual, layer norm (before or after, norm_first),
a ReLU or exact GELU feed-forward, residual, layer norm. Half inputs compute in float32 and round once.

The math is ops/kit/encoder_layer.py's, which the nested (padded-by-mask) forms in ops/nested.py run too.
"""

from __future__ import annotations

import torch

from jaxdev import tensor
from jaxdev.ops.kit import J, jitted
from jaxdev.ops.kit.encoder_layer import attend, encoder_arguments, layer_arrays, layer_program, settings_for
from jaxdev.ops.registry import aten, register


@jitted
def _attention_program(heads, need_weights, average, mask_type, settings):
    def run(query, key, value, w, b, proj_w, proj_b, mask):
        return attend(
            query,
            key,
            value,
            w,
            b,
            proj_w,
            proj_b,
            mask,
            heads=heads,
            need_weights=need_weights,
            average=average,
            mask_type=mask_type,
            settings=settings,
        )

    return run


def check_attention(query, key, value, embed_dim, num_head, qkv_weight, qkv_bias):
    """CPU's argument checks of native_multi_head_attention (dense query)."""
    for name, t in (("query", query), ("key", key), ("value", value)):
        if t.dim() != 3:
            raise RuntimeError(f"expected 3-D `{name}`, got {t.dim()}-D tensor")
    if not query.is_nested and query.shape[2] != embed_dim:
        raise RuntimeError(f"passed-in embed_dim {embed_dim} didn't match last dim of query {query.shape[2]}")
    if not (query.is_nested or key.is_nested or value.is_nested) and not query.shape == key.shape == value.shape:
        raise RuntimeError("expected `query`/`key`/`value` shapes to match")
    if qkv_weight.dim() != 2 or tuple(qkv_weight.shape) != (3 * embed_dim, embed_dim):
        raise RuntimeError(
            f"expected `qkv_weight` of shape ({3 * embed_dim}, {embed_dim}), got {tuple(qkv_weight.shape)}"
        )
    if qkv_bias.dim() != 1 or qkv_bias.shape[0] != 3 * embed_dim:
        raise RuntimeError(f"expected `qkv_bias` of shape ({3 * embed_dim},), got {tuple(qkv_bias.shape)}")
    if embed_dim % num_head != 0:
        raise RuntimeError("`embed_dim` must divide evenly by `num_heads`")


def _opt(t):
    return None if t is None else J(t)


@register(aten._native_multi_head_attention.default)
def native_multi_head_attention(
    query,
    key,
    value,
    embed_dim,
    num_head,
    qkv_weight,
    qkv_bias,
    proj_weight,
    proj_bias,
    mask=None,
    need_weights=True,
    average_attn_weights=True,
    mask_type=None,
):
    check_attention(query, key, value, embed_dim, num_head, qkv_weight, qkv_bias)
    if query.numel() == 0:
        return torch.empty_like(query), None
    program = _attention_program(
        num_head, bool(need_weights), bool(average_attn_weights), mask_type, settings_for(query.dtype)
    )
    arrays = [J(t) for t in (query, key, value, qkv_weight, qkv_bias, proj_weight, proj_bias)]
    out, weights = program(*arrays, _opt(mask))
    return tensor.wrap(out), None if weights is None else tensor.wrap(weights)


@register(aten._transformer_encoder_layer_fwd.default)
def transformer_encoder_layer_fwd(src, embed_dim, num_heads, *rest, mask=None, mask_type=None):
    weights, use_gelu, norm_first, eps, mask, mask_type = encoder_arguments(rest, mask, mask_type)
    if src.numel() == 0:
        return src.clone()
    check_attention(src, src, src, embed_dim, num_heads, weights[0], weights[1])
    program = layer_program(src.dtype, embed_dim, num_heads, use_gelu, norm_first, eps, mask_type)
    return tensor.wrap(program(J(src), *layer_arrays(weights), _opt(mask)))
