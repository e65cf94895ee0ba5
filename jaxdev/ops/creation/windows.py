"""The Kaiser window (torch.kaiser_window), whose CPU kernel stub has no jax entry."""

from __future__ import annotations

import jax.numpy as jnp
import jax.scipy.special as jss
import torch

from jaxdev import dtypes, tensor
from jaxdev.ops.kit import jitted, opmath
from jaxdev.ops.registry import aten, register


@jitted
def _kaiser(length, dtype):
    """CPU's kaiser_window_kernel over arange(length) in `dtype`, computed in its opmath type."""
    jdt = dtypes.to_jax_dtype(dtype)
    compute = opmath(jdt)

    def run(beta):
        a = jnp.arange(length).astype(jdt).astype(compute)
        alpha = jnp.asarray((length - 1) / 2.0, compute)
        beta = beta.astype(compute)
        r = (a - alpha) / alpha
        return (jss.i0(beta * jnp.sqrt(jnp.abs(1 - r * r))) / jss.i0(beta)).astype(jdt)

    return run


def _kaiser_window(window_length, periodic, beta, dtype, layout, device, pin_memory):
    """PyTorch's factory calls a CPU/CUDA kernel stub that has no jax entry (an internal assert): the
    window is computed here. Checks, invalid dtypes and lengths 0 and 1 (empty, ones) are left to
    PyTorch's own composite, which raises its errors and builds those before it reaches the stub."""
    dt = dtype or torch.get_default_dtype()
    if window_length <= 1 or not dt.is_floating_point or layout not in (None, torch.strided):
        options = {"dtype": dtype, "layout": layout, "device": device, "pin_memory": pin_memory}
        return aten.kaiser_window.beta._op_dk(
            torch._C.DispatchKey.CompositeExplicitAutograd, window_length, periodic, beta, **options
        )
    length = window_length + 1 if periodic else window_length
    window = _kaiser(length, dt)(jnp.asarray(beta, jnp.float64))
    return tensor.wrap(window[:window_length] if periodic else window)


# The overloads without beta (12.0) or periodic (True) call PyTorch's composite directly, not through the
# dispatcher: each needs its kernel.
@register(aten.kaiser_window.beta)
def kaiser_window_beta(window_length, periodic, beta, *, dtype=None, layout=None, device=None, pin_memory=None):
    return _kaiser_window(window_length, periodic, beta, dtype, layout, device, pin_memory)


@register(aten.kaiser_window.periodic)
def kaiser_window_periodic(window_length, periodic, *, dtype=None, layout=None, device=None, pin_memory=None):
    return _kaiser_window(window_length, periodic, 12.0, dtype, layout, device, pin_memory)


@register(aten.kaiser_window.default)
def kaiser_window(window_length, *, dtype=None, layout=None, device=None, pin_memory=None):
    return _kaiser_window(window_length, True, 12.0, dtype, layout, device, pin_memory)
