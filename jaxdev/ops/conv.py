"""Convolution, forward and backward, through PyTorch's hooks for out-of-tree backends:
`convolution` (CompositeExplicitAutograd) calls `convolution_overrideable`, and its autograd formula
calls `convolution_backward`, which calls `convolution_backward_overrideable`.

Gradients are the VJP of the same JAX forward, so they are exactly consistent with it. Products run
at the device's precision (kit.product_precision, as in linalg.py): half inputs accumulate in
float32, float32 follows torch.set_float32_matmul_precision.
"""

from __future__ import annotations

import itertools

import jax
import jax.numpy as jnp
import torch

from jaxdev import dtypes
from jaxdev.ops.kit import J, capabilities, jitted, product_precision, zeros
from jaxdev.ops.kit.cpu_numerics import round_to
from jaxdev.ops.registry import aten, register_backward, register_functional

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
    """The convolution at the device's product precision (kit.product_precision); the bias is
    added before the one rounding of a half result."""

    def run(x, w, b):
        y = _conv(x, w, precision, accumulate, *params)
        if has_bias:
            y = y + b.astype(y.dtype).reshape((1, -1) + (1,) * (y.ndim - 2))
        return y.astype(jdt)

    return run


@jitted
def _slow_transposed(params, has_bias, jdt, precision, accumulate):
    """CPU's slow_conv_transpose{2,3}d for half inputs (the kernel it takes when oneDNN does not run
    the dtype on this host, or output_padding >= stride): a GEMM gives the columns, rounded to the
    half dtype, and col2im/col2vol adds them into the output one kernel tap after another, each
    addition rounded; the bias is one more rounded addition. Its gradient stays the convolution's."""
    stride, padding, dilation, _, output_padding, groups = params
    exact = _compiled_forward(params, has_bias, jdt, precision, accumulate)
    f32 = jnp.float32

    rounded = round_to(jdt)

    def emulate(x, w, b):
        nd = x.ndim - 2
        n, cin = x.shape[:2]
        ins, k, cog = x.shape[2:], w.shape[2:], w.shape[1]
        outs = [
            (i - 1) * s - 2 * p + d * (kk - 1) + op + 1
            for i, s, p, d, kk, op in zip(ins, stride, padding, dilation, k, output_padding)
        ]
        sp_in, sp_k = "xyz"[:nd], "pqr"[:nd]
        xg = x.reshape((n, groups, cin // groups) + ins)
        wg = w.reshape((groups, cin // groups, cog) + k)
        cols = jnp.einsum(
            f"ngc{sp_in},gco{sp_k}->ngo{sp_k}{sp_in}", xg, wg, precision=precision, preferred_element_type=f32
        )
        cols = rounded(cols)
        out = jnp.zeros((n, groups, cog) + tuple(outs), f32)
        for tap in itertools.product(*(range(kk) for kk in k)):
            to, frm = [], []
            for t, s, p, d, i_n, o_n in zip(tap, stride, padding, dilation, ins, outs):
                start = t * d - p
                i0 = max(0, (s - 1 - start) // s)  # first input position landing at or after 0
                i1 = min(i_n, (o_n - 1 - start) // s + 1)  # one past the last landing before o_n
                if i1 <= i0:
                    break
                o0 = start + i0 * s
                to.append(slice(o0, o0 + (i1 - i0 - 1) * s + 1, s))
                frm.append(slice(i0, i1))
            else:
                at = (slice(None),) * 3 + tuple(to)
                out = out.at[at].set(rounded(out[at] + cols[(slice(None),) * 3 + tap + tuple(frm)]))
        out = out.reshape((n, groups * cog) + tuple(outs))
        if has_bias:
            out = rounded(out + b.astype(f32).reshape((1, -1) + (1,) * nd))
        return out.astype(jdt)

    @jax.custom_vjp
    def run(x, w, b):
        return emulate(x, w, b)

    def run_fwd(x, w, b):
        return emulate(x, w, b), (x, w, b)

    def run_bwd(saved, g):
        return jax.vjp(exact, *saved)[1](g)

    run.defvjp(run_fwd, run_bwd)
    return run


def _cpu_takes_slow_transposed(dtype, stride, output_padding) -> bool:
    """Whether CPU runs a half transposed convolution through slow_conv_transpose (ConvParams::
    use_mkldnn is false): oneDNN disabled, output_padding >= stride, or the host's oneDNN lacks
    the dtype (mkldnn_bf16/fp16_device_check)."""
    if dtype not in (torch.bfloat16, torch.float16):
        return False
    if not torch._C._get_mkldnn_enabled() or any(op >= s for op, s in zip(output_padding, stride)):
        return True
    supported = (
        torch.ops.mkldnn._is_mkldnn_bf16_supported
        if dtype == torch.bfloat16
        else torch.ops.mkldnn._is_mkldnn_fp16_supported
    )
    return not supported()


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


_AXES = {2: ("height", "width"), 3: ("depth", "height", "width")}


def _check_geometry(input, weight, params):
    """CPU's checks that torch's own (negative padding, non-positive stride, negative dilation) leave
    to the kernels: a zero dilation; for a transposed convolution, an output padding as large as
    both its stride and its dilation, and an output of no element. CPU runs a 1-d convolution as a
    2-d one of height 1, and says so."""
    stride, padding, dilation, transposed, output_padding, _ = params
    sizes, kernel = tuple(input.shape[2:]), tuple(weight.shape[2:])
    if len(sizes) == 1:
        stride, padding, dilation, output_padding = (1, *stride), (0, *padding), (1, *dilation), (0, *output_padding)
        sizes, kernel = (1, *sizes), (1, *kernel)
    axes = _AXES.get(len(sizes))
    if axes is None:
        return
    if not transposed:
        if min(dilation) <= 0:
            raise RuntimeError(f"dilation should be greater than zero, but got {list(dilation)}")
        return
    if min(dilation) <= 0:
        got = ", ".join(f"dilation_{a}: {d}" for a, d in zip(axes, dilation))
        raise RuntimeError(f"dilation should be greater than zero, but got {got}")
    if any(op >= s and op >= d for op, s, d in zip(output_padding, stride, dilation)):
        got = " ".join(
            [f"output_padding_{a}: {v}" for a, v in zip(axes, output_padding)]
            + [f"stride_{a}: {v}" for a, v in zip(axes, stride)]
            + [f"dilation_{a}: {v}" for a, v in zip(axes, dilation)]
        )
        raise RuntimeError(f"output padding must be smaller than either stride or dilation, but got {got}")
    outs = [
        (i - 1) * s - 2 * p + d * (k - 1) + op + 1
        for i, s, p, d, k, op in zip(sizes, stride, padding, dilation, kernel, output_padding)
    ]
    if min(outs) < 1:
        raise RuntimeError(
            f"Given input size per channel: ({' x '.join(map(str, sizes))}). Calculated output size per channel: "
            f"({' x '.join(map(str, outs))}). Output size is too small"
        )


@register_functional(aten.convolution_overrideable.default, inplace=False, out=False)
def convolution(input, weight, bias, stride, padding, dilation, transposed, output_padding, groups):
    _check(input, weight, groups)
    nd = input.dim() - 2
    params = _params(stride, padding, dilation, transposed, output_padding, groups, nd)
    _check_geometry(input, weight, params)
    jdt = dtypes.to_jax_dtype(input.dtype)
    factory = _compiled_forward
    taps = params[3] and not capabilities.fact("half_transposed_taps_abort")
    if taps and _cpu_takes_slow_transposed(input.dtype, params[0], params[4]):
        factory = _slow_transposed
    fn = factory(params, bias is not None, jdt, *product_precision(jdt))
    if bias is None and factory is _slow_transposed:
        return fn(J(input), J(weight), zeros((1,), jdt))
    return fn(J(input), J(weight), J(bias) if bias is not None else None)


def _with_bias(args, grad_output):
    """The backward carries no bias, yet returns its gradient: differentiate at a zero bias."""
    channels = grad_output.shape[1]
    return {**args, "bias": zeros((channels,), J(grad_output).dtype)}


register_backward(
    aten.convolution_backward_overrideable.default, aten.convolution_overrideable.default, prepare=_with_bias
)
