"""The one jit policy: every program a kernel runs is made here.

`jitted`: a factory of bodies, cached by its static arguments; `compiled`: a module-level function
jitted once per static tuple; `zeros`; and `program`, a body jitted as it is, for the few programs the
policy names below.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import jax
import jax.numpy as jnp

# Every program a kernel runs is made by `jitted`: a factory of bodies, cached by its static arguments
# (`maxsize` bounds a cache keyed by shapes; `donate` gives argument buffers to the program). A body
# with no static arguments is a factory of none (`_padded_positions()(x)`). A few are made by `program`
# instead (a body jitted as it is), each for a reason of its own:
# * a program that exists, re-jitted with its first argument donated (indexed_writes.into): keyed by
#   the program object, which is not a static argument;
# * a program keyed by a signature jitted's cache cannot express (inplace._program: 1, 1.0 and True are
#   one key there, and give different programs), and a one-off check program (chunked_draws._agrees);
# * fixed bodies of no static argument called as functions: the Hurwitz zeta's float64 rounds
#   (special/zeta.py) and complex32's bit conversions (carriers/complex_half_bits.py).
# Below ops, modules that ops import (jaxdev/core, rng, the parallel wing, custom ops) and whole-graph
# programs (jaxdev/compiler, jaxdev/fused) jit with jax.jit: they cannot import ops.kit without
# importing upward, and their programs carry shardings or user bodies, not kernel bodies. Op families
# never call jax.jit (tests/test_layering.py).


def jitted(factory: Callable | None = None, *, maxsize: int | None = None, donate: tuple | Callable = ()):
    """Decorator for `factory(*static) -> body` (or a tuple of bodies), `body(*arrays)` pure JAX.

    The decorated factory returns the body jitted, built once per static tuple (static values
    must be hashable). Eager JAX pays its dispatch cost per primitive; a jitted body pays it once
    per call, and under `torch.compile` it inlines into the program. The factory runs under
    `jax.ensure_compile_time_eval`, so a constant it builds is a concrete array even when the first
    call happens while a compiled program is being traced (a cached tracer would leak).

    `maxsize`: keep the last `maxsize` bodies only (a factory keyed by sizes or shapes, without
    bound); all by default. `donate`: the positions of the body's arguments whose buffers it may use
    for its results (XLA donation: the caller gives them up), or a function of the static arguments
    that says them. Used bare (`@jitted`) or with options (`@jitted(maxsize=64)`)."""
    if factory is None:
        return functools.partial(jitted, maxsize=maxsize, donate=donate)

    def build(*static):
        with jax.ensure_compile_time_eval():
            body = factory(*static)
        given = donate(*static) if callable(donate) else donate
        jit = functools.partial(jax.jit, donate_argnums=given) if given else jax.jit
        return tuple(jit(b) for b in body) if isinstance(body, tuple) else jit(body)

    cached = functools.cache(build) if maxsize is None else functools.lru_cache(maxsize=maxsize)(build)
    return functools.update_wrapper(cached, factory)


def program(body: Callable, *, donate: tuple = ()):
    """`body` jitted as it is (its first arguments donated when `donate` names them): the programs the
    policy above makes otherwise than through `jitted`."""
    return jax.jit(body, donate_argnums=donate) if donate else jax.jit(body)


@jitted
def compiled(fn: Callable, *static):
    """`fn(*arrays, *static)` jitted once per static tuple; `fn` must be a module-level function."""
    return lambda *arrays: fn(*arrays, *static)


@jitted
def _zeros(shape, jdt):
    return lambda: jnp.zeros(shape, jdt)


def zeros(shape: tuple[int, ...], jdt) -> jax.Array:
    """Zeros of `shape`, as one cached jitted call (eager jnp.zeros dispatches several primitives)."""
    return _zeros(tuple(shape), jnp.dtype(jdt))()
