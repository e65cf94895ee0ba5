"""Convolution, forward and backward, through PyTorch's hooks for out-of-tree backends:
`convolution` (CompositeExplicitAutograd) calls `convolution_overrideable`, and its autograd formula
calls `convolution_backward`, which calls `convolution_backward_overrideable`.

Gradients are the VJP of the same JAX forward, so they are exactly consistent with it. Products run
at the device's precision (toolkit.product_precision, as in linalg.py): half inputs accumulate in
float32, float32 follows torch.set_float32_matmul_precision.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from jaxdev import dtypes
from jaxdev.ops.registry import aten, register_backward, register_functional
from jaxdev.ops.toolkit import J, jitted, product_precision, zeros

_SPATIAL = "DHW"


def _numbers(nd: int):
    s = _SPATIAL[-nd:]
    return ("NC" + s, "OI" + s, "NC" + s)


def _conv(x, w, precision, accumulate, stride, padding, dilation, transposed, output_padding, groups):
    nd = x.ndim - 2
    if not transposed:
        return jax.lax.conv_general_dilated(
            x,
            w,
            window_strides=stride,
            padding=[(p, p) for p in padding],
            rhs_dilation=dilation,
            dimension_numbers=_numbers(nd),
            feature_group_count=groups,
            precision=precision,
            preferred_element_type=accumulate,
        )
    # Transposed: the gradient of a convolution. Weight is (in, out/groups, *k): regroup it to
    # (out, in/groups, *k), flip it spatially, and dilate the input by the stride.
    cin, cout_g = w.shape[0], w.shape[1]
    k = w.shape[2:]
    w = w.reshape((groups, cin // groups, cout_g) + k)
    w = jnp.swapaxes(w, 1, 2).reshape((groups * cout_g, cin // groups) + k)
    w = jnp.flip(w, axis=tuple(range(2, 2 + nd)))
    pads = [(d * (kk - 1) - p, d * (kk - 1) - p + op) for kk, p, d, op in zip(k, padding, dilation, output_padding)]
    return jax.lax.conv_general_dilated(
        x,
        w,
        window_strides=(1,) * nd,
        padding=pads,
        lhs_dilation=stride,
        rhs_dilation=dilation,
        dimension_numbers=_numbers(nd),
        feature_group_count=groups,
        precision=precision,
        preferred_element_type=accumulate,
    )


@jitted
def _compiled_forward(params, has_bias, jdt, precision, accumulate):
    """The convolution at the device's product precision (toolkit.product_precision); the bias is
    added before the one rounding of a half result."""

    def run(x, w, b):
        y = _conv(x, w, precision, accumulate, *params)
        if has_bias:
            y = y + b.astype(y.dtype).reshape((1, -1) + (1,) * (y.ndim - 2))
        return y.astype(jdt)

    return run


def _params(stride, padding, dilation, transposed, output_padding, groups, nd):
    expand = lambda v: tuple(v) * nd if len(v) == 1 else tuple(v)
    return (expand(stride), expand(padding), expand(dilation), bool(transposed), expand(output_padding), int(groups))


def _check(input, weight, groups):
    if input.dtype != weight.dtype:
        raise RuntimeError(f"Input type ({input.dtype}) and weight type ({weight.dtype}) should be the same")
    if input.dim() != weight.dim():
        raise RuntimeError(
            f"Expected {weight.dim()}-dimensional input for {weight.dim()}-dimensional weight "
            f"{list(weight.shape)}, but got {input.dim()}-dimensional input of size {list(input.shape)} instead"
        )


@register_functional(aten.convolution_overrideable.default, inplace=False, out=False)
def convolution(input, weight, bias, stride, padding, dilation, transposed, output_padding, groups):
    _check(input, weight, groups)
    nd = input.dim() - 2
    params = _params(stride, padding, dilation, transposed, output_padding, groups, nd)
    jdt = dtypes.to_jax_dtype(input.dtype)
    fn = _compiled_forward(params, bias is not None, jdt, *product_precision(jdt))
    return fn(J(input), J(weight), J(bias) if bias is not None else None)


def _with_bias(args, grad_output):
    """The backward carries no bias, yet returns its gradient: differentiate at a zero bias."""
    channels = grad_output.shape[1]
    return {**args, "bias": zeros((channels,), J(grad_output).dtype)}


register_backward(
    aten.convolution_backward_overrideable.default, aten.convolution_overrideable.default, prepare=_with_bias
)
