"""scaled_dot_product_attention as one program each way.

F.scaled_dot_product_attention asks the device which backend runs it (a C++ DispatchStub; the native
module answers for jax, jaxdev/csrc/native.cpp `install_attention_choice`). Without an answer it takes
the math path: about ten aten ops (scale, two products, the mask, softmax...), each a program of its
own, 200-280 us for a small head on this CPU. The answer here is PyTorch's "overrideable" backend:
_scaled_dot_product_fused_attention_overrideable and its backward, whose derivative PyTorch already
ties together, computed below in one jitted program each.

Values are those of CPU's math path: the scale split as sqrt(scale) into both q and k, a causal mask
aligned top-left, a float mask added, a boolean one already turned into 0/-inf by PyTorch, and rows
that see nothing giving zeros (_safe_softmax), not NaN. Half inputs are widened to float32 throughout,
as that path widens them, and rounded once; the products are then float32 products, at float32's
precision setting (kit.widened_product_precision), never the backend's one-pass bfloat16 default
for float32 operands (a TPU's: the bfloat16 gradient was 118x the OpInfo tolerance off). (Rounding the probabilities to half for the second product, as
fused GPU kernels do, put the results 1-2x the OpInfo tolerance farther from float64 than CPU's.)
Results and gradients are laid out eagerly as the path CPU would take lays them out (its flash kernel
or its math path: attention_layouts.py), and inside compiled programs as the op's meta function says (the inputs' own
order of dims, as CUDA's fused kernels), which is what their graphs were planned on. The backward
recomputes the forward inside jax.vjp rather than keeping the attention matrix: the memory of a
fused kernel, at the cost of one more pair of products.

The device chooses this path for 3- and 4-dim inputs of equal batch and head sizes without dropout;
dropout, grouped-query heads and broadcast batch dims keep the math path (PyTorch's own composite).
"""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp

from jaxdev import dtypes, layout, tensor, tracing
from jaxdev.ops.kit import attention_layouts, jitted, matmul, memo, on_views, widened_product_precision
from jaxdev.ops.kit import transcendentals as tm
from jaxdev.ops.kit.half_results import rounded_to
from jaxdev.ops.kit.precision import body_at_precision
from jaxdev.ops.registry import aten, register


def _attend(q, k, v, bias, is_causal, scale, precision, accumulate):
    """(output, logsumexp) of attention over (..., L, E) queries and (..., S, E) keys."""
    dtype = q.dtype
    if dtype in (jnp.float16, jnp.bfloat16):
        # half inputs: in float32 throughout, as CPU's math path widens q, k, v and the mask, rounded
        # once at the end; its products are float32 products (widened_product_precision)
        q, k, v = (t.astype(jnp.float32) for t in (q, k, v))
        bias = None if bias is None else bias.astype(jnp.float32)
    factor = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    # CPU's math path: sqrt(|scale|) into both operands, the sign into q
    root = math.sqrt(abs(factor))
    q = q * jnp.asarray(-root if factor < 0 else root, q.dtype)
    scores = matmul(q, jnp.swapaxes(k * jnp.asarray(root, k.dtype), -1, -2), precision, accumulate)
    length, source = scores.shape[-2:]
    if is_causal:
        keep = jnp.tril(jnp.ones((length, source), bool))
        scores = scores + jnp.where(keep, 0.0, -jnp.inf).astype(scores.dtype)
    if bias is not None:
        scores = scores + bias.astype(scores.dtype)
    peak = _shift(scores)
    with rounded_to(dtype):  # a bfloat16 output may take the platform's exp (half_results.py)
        out, total = _softmax_product(scores, peak, v, precision, accumulate)
    with rounded_to(jnp.float32):  # a float32 output: jaxdev's log where its functions are, in any body
        logsumexp = (tm.log(total) + peak)[..., 0]
    return out.astype(dtype), logsumexp.astype(jnp.float32)


def _softmax_product(scores, peak, v, precision, accumulate):
    """(softmax(scores) @ v, the rows' sums of exp(scores - peak)), the softmax shifted by `peak`."""
    unseen = peak == -jnp.inf  # a row every key is masked from: zeros (_safe_softmax)
    weights = tm.exp(scores - jnp.where(unseen, 0.0, peak).astype(scores.dtype))
    total = jnp.sum(weights, axis=-1, keepdims=True)
    if tm.own_exp(weights):
        # jaxdev's exp is tens of operations an element: XLA fused it into every product that reads the
        # probabilities and computed it in each (five a layer in a training step); computed once here,
        # with the rows' totals: summed behind the barrier they were a pass of their own over the
        # weights, and the backward wrote their gradient's sum with the weights' out in full
        weights, total = jax.lax.optimization_barrier((weights, total))
    # an unseen row's total is 0: divided by 1 instead, its 0/0 never makes the gradient NaN
    probabilities = jnp.where(unseen, 0.0, weights / jnp.where(unseen, 1.0, total)).astype(scores.dtype)
    return matmul(probabilities, v, precision, accumulate), total


def _shift(scores):
    """The rows' max, the shift of softmax's exponent. Softmax does not depend on it, so its gradient
    through the max is rounding residue (CPU's softmax backward has none); where XLA materializes that
    gradient's mask, `x == max` over the scores' full shape, and reads it in the key gradient's
    product (capabilities' `max_gradient_mask_materialized`: a TPU), it is left out."""
    from jaxdev.ops.kit import capabilities  # imports the fallback, which needs the ops package loaded

    if capabilities.fact("max_gradient_mask_materialized"):
        scores = jax.lax.stop_gradient(scores)  # not the max's: JAX would build the mask it then drops
    return jnp.max(scores, axis=-1, keepdims=True)


@jitted
def _forward(precision, accumulate, is_causal, scale):
    return lambda q, k, v, bias: _attend(q, k, v, bias, is_causal, scale, precision, accumulate)


@jitted
def _backward(precision, accumulate, is_causal, scale):
    def run(grad, q, k, v, bias):
        def output(q, k, v, bias):
            return _attend(q, k, v, bias, is_causal, scale, precision, accumulate)[0]

        _, pullback = jax.vjp(output, q, k, v, bias)
        return pullback(grad.astype(q.dtype))

    return run


@functools.cache
def _placeholder_arrays(jdt):
    # made once: a memo kernel's replay (kit/memo.py) puts them in its fresh results as this kernel does
    with jax.ensure_compile_time_eval():
        return memo.constant(jnp.zeros((0,), jdt)), memo.constant(jnp.zeros((), jnp.int64))


def _placeholders(dtype):
    """The outputs this path has no use for (cumulative sequence lengths, the debug mask, the dropout
    seed and offset), as new tensors over arrays made once: eager jnp.zeros cost ~40 us a call."""
    empty, seed = _placeholder_arrays(dtypes.to_jax_dtype(dtype))
    return tensor.wrap(empty), tensor.wrap(seed)


@register(aten._scaled_dot_product_fused_attention_overrideable.default)
def fused_attention(
    query, key, value, attn_bias=None, dropout_p=0.0, is_causal=False, return_debug_mask=False, *, scale=None
):
    if dropout_p != 0.0:  # the device never chooses this path with dropout; a direct call is refused
        raise RuntimeError("jaxdev's fused attention runs without dropout; dropout takes the math path")
    # views (a head split's transposes, an expanded mask) are read inside the program (kit.on_views)
    body = body_at_precision(_forward, query.dtype, widened_product_precision, bool(is_causal), scale)
    out, logsumexp = on_views(body, (query, key, value, attn_bias))
    if query.dim() == 3:  # the logsumexp of (heads, L, E) queries is (1, heads, L)
        logsumexp = logsumexp[None]
    empty, seed = _placeholders(query.dtype)
    op = aten._scaled_dot_product_fused_attention_overrideable.default
    args = (query, key, value, attn_bias, dropout_p, is_causal, return_debug_mask)
    flash = attention_layouts.cpu_takes_flash(query, key, value, attn_bias, is_causal, scale)
    eager = attention_layouts.forward_strides(query, out.shape, logsumexp.shape) if flash else None
    out, logsumexp = _laid_out(op, args, {"scale": scale}, (out, logsumexp), eager=eager)
    return (
        out,
        logsumexp,
        empty,
        empty,
        query.shape[-2],
        key.shape[-2],
        seed,
        seed,
        empty,
    )


@register(aten._scaled_dot_product_fused_attention_overrideable_backward.default)
def fused_attention_backward(
    grad_out,
    query,
    key,
    value,
    attn_bias,
    grad_input_mask,
    out,
    logsumexp,
    cum_seq_q,
    cum_seq_k,
    max_q,
    max_k,
    dropout_p,
    is_causal,
    philox_seed,
    philox_offset,
    *,
    scale=None,
):
    run = body_at_precision(_backward, query.dtype, widened_product_precision, bool(is_causal), scale)
    grads = on_views(run, (grad_out, query, key, value, attn_bias))  # `.sum()`'s gradient is an expand
    grads = [g if wanted else None for g, wanted in zip(grads, grad_input_mask)]
    op = aten._scaled_dot_product_fused_attention_overrideable_backward.default
    args = (grad_out, query, key, value, attn_bias, grad_input_mask, out, logsumexp, cum_seq_q, cum_seq_k)
    args += (max_q, max_k, dropout_p, is_causal, philox_seed, philox_offset)
    eager = None
    if attention_layouts.cpu_takes_flash(query, key, value, attn_bias, is_causal, scale):
        eager = [attention_layouts.backward_strides(g.shape) if g is not None else None for g in grads[:3]]
    return tuple(_laid_out(op, args, {"scale": scale}, grads, transposed=(1,), eager=eager))


def _laid_out(op, args, kwargs, values, transposed=(), eager=None) -> tuple:
    """`values` (jax arrays or None) as tensors laid out as PyTorch lays them out. Eagerly, as the path
    CPU would take: its flash kernel's strides `eager` (attention_layouts) where given, else as its math
    path, whatever the inputs' layouts: every result contiguous but those at the positions in
    `transposed` (the key's gradient comes out of a product as the transpose of a contiguous one).
    Inside a compiled program, as the op's meta function says (layout.result_layouts: the query's and
    the inputs' own order of dims, as CUDA's fused kernels), since the graph was planned on those."""
    traced = any(tracing.compiled_layout(v) for v in values if v is not None)
    layouts = layout.result_layouts(op, args, kwargs, True) if traced else None
    results = []
    for i, v in enumerate(values):
        laid = layouts[i] if layouts is not None and i < len(layouts) else None
        if v is None:
            results.append(None)
        elif laid is not None and laid[0] == tuple(v.shape):
            results.append(tensor.wrap_strided(v, laid[1]))
        elif not traced and eager is not None and i < len(eager) and eager[i] is not None:
            results.append(tensor.wrap_strided(v, eager[i]))  # as CPU's flash kernel (attention_layouts)
        elif not traced and i in transposed and v.ndim >= 2:
            strides = list(tensor.contiguous_strides(v.shape[:-2] + (v.shape[-1], v.shape[-2])))
            strides[-2], strides[-1] = strides[-1], strides[-2]
            results.append(tensor.wrap_strided(v, tuple(strides)))
        else:
            results.append(tensor.wrap(v))
    return results
