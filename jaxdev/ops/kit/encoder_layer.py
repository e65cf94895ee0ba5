"""The transformer layer's math as programs, which the dense kernels (ops/transformer.py) and the
nested ones (ops/nested.py) run: `attend` (native_multi_head_attention's values), `encoder_layer`
(transformer_encoder_layer_forward's), the layer's program and its arguments as the dispatcher passes
them. Half inputs compute in float32 and round once."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import torch

from jaxdev import dtypes
from jaxdev.ops.kit import transcendentals as tm
from jaxdev.ops.kit.arguments import J
from jaxdev.ops.kit.formulas import layer_norm
from jaxdev.ops.kit.jit import jitted
from jaxdev.ops.kit.precision import matmul, widened_product_precision


def _linear(x, w, b, precision, accumulate):
    y = matmul(x, w.T, precision, accumulate)
    return y if b is None else y + b.astype(y.dtype)


def _masked(scores, mask, mask_type):
    """`scores` (B, heads, L, S) with the keys `mask` hides set to -inf."""
    if mask is None:
        return scores
    hide = mask != 0
    if mask_type == 1:  # a key padding mask (B, S)
        hide = hide[:, None, None, :]
    return jnp.where(jnp.broadcast_to(hide, scores.shape), -jnp.inf, scores)


def attend(query, key, value, w, b, proj_w, proj_b, mask, *, heads, need_weights, average, mask_type, settings):
    """(output (B, L, E), attention weights or None) of CPU's native_multi_head_attention."""
    precision, accumulate = settings
    dtype = query.dtype
    c = jnp.promote_types(dtype, jnp.float32)
    query, key, value, w, b, proj_w, proj_b = (t.astype(c) for t in (query, key, value, w, b, proj_w, proj_b))
    batch, length, embed = query.shape
    head = embed // heads
    wq, wk, wv = jnp.split(w, 3)
    bq, bk, bv = jnp.split(b, 3)

    def split_heads(x, weight, bias):  # (B, L, E) -> (B, heads, L, head)
        y = _linear(x, weight, None, precision, accumulate) + bias
        return y.reshape(batch, -1, heads, head).transpose(0, 2, 1, 3)

    q = split_heads(query, wq, bq) / jnp.sqrt(jnp.asarray(head, c))
    k, v = split_heads(key, wk, bk), split_heads(value, wv, bv)
    scores = _masked(matmul(q, jnp.swapaxes(k, -1, -2), precision, accumulate), mask, mask_type)
    peak = jnp.max(scores, axis=-1, keepdims=True)
    weights = tm.exp(scores - peak)  # a row every key is hidden from: -inf - -inf, NaN as on CPU
    weights = weights / jnp.sum(weights, axis=-1, keepdims=True)
    context = matmul(weights, v, precision, accumulate).transpose(0, 2, 1, 3).reshape(batch, length, embed)
    out = _linear(context, proj_w, proj_b, precision, accumulate).astype(dtype)
    if not need_weights:
        return out, None
    if average:
        weights = jnp.sum(weights, axis=1) / heads
    return out, weights.astype(dtype)


def encoder_layer(src, attention, norms, ffn, mask, *, heads, gelu, norm_first, eps, mask_type, settings):
    """CPU's transformer_encoder_layer_forward on a dense (B, L, E) `src`."""
    precision, accumulate = settings
    (w1, b1), (w2, b2) = norms
    (fw1, fb1), (fw2, fb2) = ffn
    axes = (src.ndim - 1,)

    def norm(x, w, b):
        return layer_norm(x, w, b, axes, eps)[0]

    x = norm(src, w1, b1) if norm_first else src
    x = attend(
        x, x, x, *attention, mask, heads=heads, need_weights=False, average=True, mask_type=mask_type, settings=settings
    )[0]
    x = x + src
    if not norm_first:
        x = norm(x, w1, b1)
    residual = x
    if norm_first:
        x = norm(x, w2, b2)
    c = jnp.promote_types(x.dtype, jnp.float32)
    hidden = _linear(x.astype(c), fw1.astype(c), fb1.astype(c), precision, accumulate)
    hidden = tm.gelu(hidden, approximate=False) if gelu else jax.nn.relu(hidden)
    x = _linear(hidden, fw2.astype(c), fb2.astype(c), precision, accumulate).astype(x.dtype) + residual
    return norm(x, w2, b2) if not norm_first else x


@jitted
def _layer_program(heads, gelu, norm_first, eps, mask_type, settings):
    def run(src, attention, norms, ffn, mask):
        return encoder_layer(
            src,
            attention,
            norms,
            ffn,
            mask,
            heads=heads,
            gelu=gelu,
            norm_first=norm_first,
            eps=eps,
            mask_type=mask_type,
            settings=settings,
        )

    return run


def settings_for(dtype: torch.dtype) -> tuple:
    """The products' settings: `attend` and `encoder_layer` widen half inputs to float32 first, as
    CPU's kernels do, so theirs are float32 products."""
    return widened_product_precision(dtypes.to_jax_dtype(dtype))


def layer_arrays(args):
    """The encoder layer's weights as the program's (attention, norms, ffn) pytrees."""
    (qkv_w, qkv_b, proj_w, proj_b, n1w, n1b, n2w, n2b, f1w, f1b, f2w, f2b) = (J(t) for t in args)
    return (qkv_w, qkv_b, proj_w, proj_b), ((n1w, n1b), (n2w, n2b)), ((f1w, f1b), (f2w, f2b))


def layer_program(dtype, embed_dim, num_heads, use_gelu, norm_first, eps, mask_type):
    if embed_dim % num_heads != 0:
        raise RuntimeError("`embed_dim` must divide evenly by `num_heads`")
    return _layer_program(num_heads, bool(use_gelu), bool(norm_first), float(eps), mask_type, settings_for(dtype))


def encoder_arguments(rest, mask, mask_type):
    """_transformer_encoder_layer_fwd's arguments after (src, embed_dim, num_heads), however the
    dispatcher passed mask and mask_type (positionally or by name): the layer's 12 weights (qkv, proj,
    two norms, two ffn linears, each weight then bias), use_gelu, norm_first, eps, mask, mask_type."""
    qkv_weight, qkv_bias, proj_weight, proj_bias, use_gelu, norm_first, eps, *tail = rest
    norms_and_ffn, extra = tail[:8], tail[8:]
    mask = extra[0] if extra else mask
    mask_type = extra[1] if len(extra) > 1 else mask_type
    weights = (qkv_weight, qkv_bias, proj_weight, proj_bias, *norms_and_ffn)
    return weights, use_gelu, norm_first, eps, mask, mask_type
