"""A TPU's numerics emulated on this process's platform (CPU), for tests/ops/conftest.py's fixtures and
benchmarks/tpu_emulated_ulps.py:

* `policy()`: the TPU's program facts (capabilities.PROGRAM_FACTS["tpu"]: float64 emulated, division
  approximate ...) on this platform and jaxdev's own float32 functions forced (JAXDEV_MATH auto picks
  them off CPU); yields a list of the (from, to) dtypes of each convert the usual lowering was asked for.
* `division()`: every float32 division XLA is given lowered as inexactly as a TPU v5e divides (on a
  TPU itself, its own division).

Both trace and lower every program afresh while they hold (jax.clear_caches), and again after.
"""

from __future__ import annotations

import contextlib
import functools
import os

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax._src.interpreters import mlir

from jaxdev.ops.kit import capabilities, transcendentals
from jaxdev.programs import exec_cache

# A TPU v5e's float32 division as measured there (benchmarks/tpu_probe_division.py, 2026-12-06): within
# 2 ulps of IEEE's (mean 0.35) for operands in 2**-40..2**40, and for a dividend near float32's limits
# (2**-126..2**-114, 2**115..2**127) over a divisor in 2**-8..2**8; a divisor near the limits (its
# reciprocal's) is far off: up to 7.5e7 ulps, 46 % of quotients past 2 (sigmoid's 1 / (1 + exp(80))
# was 181 ulps off). Emulated as 2 ulps off, and 200 where the divisor is past 2**100 or under 2**-100.
NEAR, FAR = 2 * 2.0**-23, 200 * 2.0**-23


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


def inexact(q, b):
    """q, a quotient by b, as far off as a TPU's (NEAR or FAR ulps): up for a quotient with odd last
    bit, down for even."""
    odd = (lax.bitcast_convert_type(q, jnp.int32) & 1) == 1
    limits = (jnp.abs(b) > 2.0**100) | (jnp.abs(b) < 2.0**-100)
    off = jnp.where(limits, jnp.float32(FAR), jnp.float32(NEAR))
    return q * jnp.where(odd, 1 + off, 1 - off)


@contextlib.contextmanager
def _relowered(rules: dict):
    """The primitives in `rules` lowered by their new rules (each given the usual one) while this holds,
    every program traced and lowered afresh; nothing changed on a TPU itself, whose own arithmetic is
    what is under test there."""
    from jaxdev.audit import deviceless

    if jax.default_backend() == "tpu" and not deviceless.installed():
        yield
        return
    usual = {p: mlir._lowerings[p] for p in rules}
    for p, rule in rules.items():
        mlir.register_lowering(p, functools.partial(rule, usual[p].rule))
    jax.clear_caches()
    try:
        # jaxdev's executable cache is keyed by the traced program, which a lowering leaves as it is:
        # off, lest an executable compiled with or without it be loaded on the other side
        with _set(os.environ, exec_cache.ENV, "off", item=True):
            yield
    finally:
        mlir._lowerings.update(usual)
        jax.clear_caches()


def _divide_lowering(usual, ctx, x, y, **params):
    (q,) = usual(ctx, x, y, **params)
    aval = ctx.avals_out[0]
    if aval.dtype != np.float32:
        return [q]
    perturb = mlir.lower_fun(inexact, multiple_results=False)
    return perturb(ctx.replace(primitive=None, avals_in=[aval, ctx.avals_in[1]], avals_out=[aval]), q, y)


def _remainder(x, y):
    return x - y * jnp.trunc(inexact(x / y, y))


def _rem_lowering(usual, ctx, x, y, **params):
    if ctx.avals_out[0].dtype != np.float32:
        return usual(ctx, x, y, **params)
    return mlir.lower_fun(_remainder, multiple_results=False)(ctx.replace(primitive=None), x, y)


@contextlib.contextmanager
def division():
    """Every float32 division XLA is given, `/` in a kernel as much as cpu_numerics.divide's own,
    lowered as inexactly as a TPU divides (`inexact`): the division itself through its usual lowering,
    the error after it; and float32 rem (jnp.fmod) as a TPU's: x - y trunc(x / y) on that quotient
    (on a v5e 97 % of fmod(k y, y) came out 0 where CPU's is y less an ulp's worth). On a TPU itself nothing is emulated: its own division is what is under test
    (perturbed on top, its error compounded: the 10 tests using this that failed on the chip, 2026-12-07)."""
    with _relowered({lax.div_p: _divide_lowering, lax.rem_p: _rem_lowering}):
        yield


def _off(s):
    return inexact(s, jnp.ones_like(s))


def _sqrt_lowering(usual, ctx, x, **params):
    (s,) = usual(ctx, x, **params)
    aval = ctx.avals_out[0]
    if aval.dtype != np.float32:
        return [s]
    return mlir.lower_fun(_off, multiple_results=False)(ctx.replace(primitive=None, avals_in=[aval]), s)


@contextlib.contextmanager
def sqrt():
    """Every float32 sqrt XLA is given lowered NEAR ulps off as `inexact` puts a quotient (a TPU's was
    2 ulps from IEEE's on 41 % of inputs, v5e 2026-12-07). Nothing emulated on a TPU itself."""
    with _relowered({lax.sqrt_p: _sqrt_lowering}):
        yield
