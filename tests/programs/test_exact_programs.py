"""Which programs jaxdev compiles with less optimization (jaxdev/programs/exact_programs.py): only those without
floating-point arithmetic, and their results are the bits the default compile gives."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxdev.programs import exact_programs, exec_cache

X = jnp.asarray(np.random.default_rng(0).standard_normal((6, 5)).astype(np.float32))
IDX = jnp.asarray([4, 0, 2])

EXACT = {
    "transpose": lambda x, i: x.T,
    "strided slice": lambda x, i: x[:, ::2],
    "gather": lambda x, i: x[i],
    "scatter (set)": lambda x, i: x.at[i].set(0.5),
    "concatenate and flip": lambda x, i: jnp.concatenate([x, x[::-1]], 1),
    "mask": lambda x, i: jnp.where(x > 0.1, x, jnp.float32(0)),
    "integer arithmetic": lambda x, i: (i * 7 + 3) % 5,
    "float64 to float32": lambda x, i: x.astype(jnp.float64).astype(jnp.float32),
}
NOT_EXACT = {
    "add": lambda x, i: x + 1,
    "sum": lambda x, i: x.sum(0),
    "max": lambda x, i: jnp.maximum(x, 0.0),
    "scatter-add": lambda x, i: x.at[i].add(1.0),
    "float to int": lambda x, i: (x * 100).astype(jnp.int32),
    "loop": lambda x, i: jax.lax.fori_loop(0, 3, lambda k, a: a * 2, x),
}


@pytest.mark.parametrize("name", list(EXACT) + list(NOT_EXACT))
def test_only_programs_without_float_arithmetic_are_exact(name):
    fn = EXACT.get(name) or NOT_EXACT[name]
    assert exact_programs.exact(jax.make_jaxpr(fn)(X, IDX)) == (name in EXACT)


def test_large_programs_compile_as_before():
    big = jnp.zeros((exact_programs.TINY + 1,))
    assert not exact_programs.exact(jax.make_jaxpr(lambda x: x[::-1])(big))
    assert not exact_programs.exact(jax.make_jaxpr(lambda x: jnp.broadcast_to(x, (20, 6, 5)))(X))
    assert exact_programs.exact(jax.make_jaxpr(lambda x: x[::-1])(big[: exact_programs.TINY]))


def _compiled(fn, options):
    return jax.jit(fn).lower(X, IDX).compile(options)(X, IDX)


@pytest.mark.parametrize("name", ["transpose", "gather", "scatter (set)", "mask"])
def test_the_cheaper_compile_gives_the_same_bits(name):
    fn = EXACT[name]
    fast = np.asarray(_compiled(fn, dict([exact_programs.OPTION])))
    default = np.asarray(_compiled(fn, {}))
    assert fast.tobytes() == default.tobytes() and fast.dtype == default.dtype


def test_exact_programs_get_the_option_unless_off_or_set_by_the_caller(monkeypatch):
    seen, original = [], exec_cache._ORIGINAL
    monkeypatch.setenv(exec_cache.ENV, "off")  # every program reaches the compile
    monkeypatch.setattr(
        exec_cache, "_ORIGINAL", lambda *a, **p: seen.append(p["compiler_options_kvs"]) or original(*a, **p)
    )
    jax.jit(lambda x: x.T[::2])(X)
    jax.jit(lambda x: x.T * 2)(X)
    monkeypatch.setenv(exact_programs.ENV, "off")
    jax.jit(lambda x: x.T[::3])(X)
    assert seen == [(exact_programs.OPTION,), (), ()]
    assert not exact_programs.wanted((("xla_backend_optimization_level", 2),))
