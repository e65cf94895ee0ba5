"""A tracer of the kernels that still reach XLA's float32 functions where jaxdev's are chosen (a TPU),
beside tests/tpu_emulation.py's emulation (benchmarks/tpu_emulated_ulps.py, tests/ops/conftest.py's
`tpu_functions` fixture).

`functions()`: every float32 (and complex64) result of XLA's own exp, log, tanh, erf, sin, atan2, pow
... (`XLA_FUNCTIONS`) lowered FUNCTION_OFF (1,000 ulps) off, up or down by its last bit's parity. A
TPU's are that far from CPU's and farther (log 3,084 ulps, tanh 678), or nearer (exp 42): the size is
the tracer's, not the chip's, and an op that shows it reaches XLA's functions, which on the chip may
be more or less off. sqrt and rsqrt are left as they are, unless named.
"""

from __future__ import annotations

import contextlib
import os

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax._src.interpreters import mlir

from jaxdev.programs import exec_cache

FUNCTION_OFF = 1000 * 2.0**-23
XLA_FUNCTIONS = (
    "exp", "exp2", "log", "log1p", "expm1", "tanh", "logistic", "erf", "erfc", "erf_inv", "sin", "cos", "tan",
    "atan2", "atan", "asin", "acos", "asinh", "acosh", "atanh", "sinh", "cosh", "lgamma", "digamma", "igamma",
    "igammac", "pow", "cbrt", "bessel_i0e", "bessel_i1e", "polygamma", "zeta",
)  # fmt: skip


def _off(v):
    """v FUNCTION_OFF off, up or down by the parity of its (real part's) last bit."""
    part = v.real if jnp.iscomplexobj(v) else v
    odd = (lax.bitcast_convert_type(part, jnp.int32) & 1) == 1
    return v * jnp.where(odd, 1 + FUNCTION_OFF, 1 - FUNCTION_OFF).astype(jnp.float32)


def _perturbed(entry):
    def lowering(ctx, *args, **params):
        outs = entry.rule(ctx, *args, **params)
        aval = ctx.avals_out[0]
        if len(outs) != 1 or aval.dtype not in (np.float32, np.complex64):
            return outs
        perturb = mlir.lower_fun(_off, multiple_results=False)
        return perturb(ctx.replace(primitive=None, avals_in=[aval], avals_out=[aval]), outs[0])

    return lowering


@contextlib.contextmanager
def functions(names: tuple = XLA_FUNCTIONS):
    """XLA's float32 and complex64 functions (`names`, lax primitives' names: XLA_FUNCTIONS unless told)
    lowered FUNCTION_OFF off, relative, every program traced and lowered afresh while they are (and
    after). jaxdev's executable cache, keyed by the traced program, which this lowering leaves as it
    is, is off meanwhile."""
    entries = {p: mlir._lowerings[p] for p in (getattr(lax, f"{name}_p") for name in names)}
    previous = os.environ.get(exec_cache.ENV)
    os.environ[exec_cache.ENV] = "off"
    for p, entry in entries.items():
        mlir.register_lowering(p, _perturbed(entry))
    jax.clear_caches()
    try:
        yield
    finally:
        mlir._lowerings.update(entries)
        if previous is None:
            del os.environ[exec_cache.ENV]
        else:
            os.environ[exec_cache.ENV] = previous
        jax.clear_caches()
