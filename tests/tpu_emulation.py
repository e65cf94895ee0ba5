"""A TPU's numerics emulated on this process's platform (CPU), for tests/ops/conftest.py's fixtures and
benchmarks/tpu_emulated_ulps.py:

* `policy()`: the TPU's program facts (capabilities.PROGRAM_FACTS["tpu"]: float64 emulated, division
  approximate ...) on this platform and jaxdev's own float32 functions forced (JAXDEV_MATH auto picks
  them off CPU); yields a list of the (from, to) dtypes of each convert the usual lowering was asked for.
* `division()`: every float32 division XLA is given lowered 200 ulps off, as a TPU v5e divides.

Both trace and lower every program afresh while they hold (jax.clear_caches), and again after.
"""

from __future__ import annotations

import contextlib

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax._src.interpreters import mlir

from jaxdev.ops.kit import capabilities, transcendentals

OFF = 200 * 2.0**-23  # a TPU v5e's float32 division was measured up to 191 ulps from IEEE's


_MISSING = object()


@contextlib.contextmanager
def _set(mapping_or_object, name, value, *, item: bool):
    previous = mapping_or_object.get(name, _MISSING) if item else getattr(mapping_or_object, name)
    if item:
        mapping_or_object[name] = value
    else:
        setattr(mapping_or_object, name, value)
    try:
        yield
    finally:
        if not item:
            setattr(mapping_or_object, name, previous)
        elif previous is _MISSING:
            del mapping_or_object[name]
        else:
            mapping_or_object[name] = previous


@contextlib.contextmanager
def policy():
    """The TPU's program facts on this process's platform and its own float32 functions, every program
    traced and lowered afresh while they hold; yields the (from, to) dtypes of each convert the usual
    lowering was asked for."""
    seen, usual = [], capabilities._usual_convert

    def spy(ctx, operand, *, new_dtype, **params):
        seen.append((ctx.avals_in[0].dtype, np.dtype(new_dtype)))
        return usual(ctx, operand, new_dtype=new_dtype, **params)

    facts = dict(capabilities.PROGRAM_FACTS["tpu"])
    with contextlib.ExitStack() as stack:
        stack.enter_context(_set(capabilities.PROGRAM_FACTS, capabilities.platform(), facts, item=True))
        stack.enter_context(_set(capabilities, "_usual_convert", spy, item=False))
        jax.clear_caches()
        try:
            with transcendentals.forced("own"):
                yield seen
        finally:
            jax.clear_caches()  # the next programs as this platform makes them


def inexact(q):
    """q 200 ulps off: up for a quotient with odd last bit, down for even."""
    odd = (lax.bitcast_convert_type(q, jnp.int32) & 1) == 1
    return q * jnp.where(odd, 1 + OFF, 1 - OFF).astype(jnp.float32)


@contextlib.contextmanager
def division():
    """Every float32 division XLA is given, `/` in a kernel as much as cpu_numerics.divide's own,
    lowered 200 ulps off (`inexact`), as a TPU divides: the division itself through its usual
    lowering, the error after it."""
    entry = mlir._lowerings[lax.div_p]

    def lowering(ctx, x, y, **params):
        (q,) = entry.rule(ctx, x, y, **params)
        aval = ctx.avals_out[0]
        if aval.dtype != np.float32:
            return [q]
        perturb = mlir.lower_fun(inexact, multiple_results=False)
        return perturb(ctx.replace(primitive=None, avals_in=[aval], avals_out=[aval]), q)

    mlir.register_lowering(lax.div_p, lowering)
    jax.clear_caches()
    try:
        yield
    finally:
        mlir._lowerings[lax.div_p] = entry
        jax.clear_caches()


@contextlib.contextmanager
def tpu():
    """policy() and division() together: the chip's numerics as far as they are emulated here."""
    with policy() as seen, division():
        yield seen
