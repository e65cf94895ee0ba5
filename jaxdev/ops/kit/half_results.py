"""Where a bfloat16 result takes the platform's exp, log, tanh and sigmoid under JAXDEV_MATH=near.

Why. jaxdev's own float32 functions (transcendentals.py) are tens of vector operations an element on a
TPU, where the chip's own run on its transcendental unit. In the GPT LM's bfloat16 training step on a
TPU v5e (2026-12-07, benchmarks/lm_programs.py, fused eager's program against `jax.jit`'s: 7.81 against
6.35 ms of device time) the fusions computing them were the largest gap: the LM head's log-softmax and
its gradient (one pass over [4096, 8192] with the own exp took 232 us, the output and gradient pass 317),
the MLP's tanh-GELU (131 against ~50 us a layer) and the attention's softmax, and under
`JAXDEV_MATH=fast` (XLA's functions) the same step was 1.13 ms shorter (README, On a TPU).

A value computed in float32 and rounded to bfloat16 (8 significant bits) barely sees the platform's
error: XLA's TPU exp, log, tanh and sigmoid were at most 42, 3,084, 678 and 40 float32 ulps from CPU's
over 100,000 values (transcendentals.py), at most 3,084 / 65,536 = 0.05 of a bfloat16 ulp, so the
rounded result is CPU's or, where the exact value lies that close to a rounding boundary, its
neighbour. Under near (the accelerator default: within a few ulps of CPU's results, not its bits) such
values therefore take the platform's functions. float32 results keep jaxdev's, and so do float16 ones
(a float16 ulp is 8,192 float32 ulps: log's error would be 0.38 of one). Where a kernel's formula
cancels after the function the platform's last ulps show, as near's division's do. tanh-GELU's
x (1 + tanh u) / 2, which cancels where tanh(u) is near -1, takes tanh as 1 - 2 / (exp(2|u|) + 1) from
the platform's exp: rounded near -1 as CPU's tanh is, its tail keeps CPU's rounding (XLA's own tanh may
be hundreds of ulps off there).
Other functions (expm1, log1p, erf, the trigonometric ones) keep jaxdev's: their platform error was
not measured.

A kernel computing a bfloat16 result in float32 says so around its traced body, `with
rounded_to(result_dtype):`. It is trace-time state decided by the body's own dtypes, so a program is
traced the same way whenever it is traced.
"""

from __future__ import annotations

import contextlib
import contextvars

import jax
import jax.numpy as jnp

from jaxdev.ops.kit.math_mode import mode

_BFLOAT16 = jnp.dtype(jnp.bfloat16)
_FLOAT32 = jnp.dtype(jnp.float32)
_ROUNDED = contextvars.ContextVar("jaxdev_rounded_to_bfloat16", default=False)


@contextlib.contextmanager
def rounded_to(dtype):
    """While the block traces: float32 values are being computed for a result of `dtype` (a bfloat16
    result makes them eligible for the platform's functions; any other dtype makes them not)."""
    token = _ROUNDED.set(jnp.dtype(dtype) == _BFLOAT16)
    try:
        yield
    finally:
        _ROUNDED.reset(token)


def platform_functions(x) -> bool:
    """Whether value (or dtype) `x` takes the platform's exp, log, tanh and sigmoid rather than
    jaxdev's: a bfloat16 value, or a float32 one inside `rounded_to(bfloat16)`, under near, off XLA's
    CPU backend (where jaxdev's functions are not chosen anyway)."""
    dtype = jnp.dtype(getattr(x, "dtype", x))
    if not (dtype == _BFLOAT16 or (dtype == _FLOAT32 and _ROUNDED.get())):
        return False
    return mode() == "near" and jax.default_backend() != "cpu"
