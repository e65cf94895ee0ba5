"""Program keys (jaxdev/programs/program_keys.py): the key of jaxdev's executable cache moves with everything a
program's lowering depends on, and stays put for the same program traced again. (That it is the same in
another process: tests/test_exec_cache.py.)"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxdev.programs import cache, exec_cache, program_keys


@pytest.fixture
def store(tmp_path, monkeypatch):
    monkeypatch.setattr(cache, "directory", lambda: str(tmp_path))
    monkeypatch.delenv(exec_cache.ENV, raising=False)
    return tmp_path


def _keys(monkeypatch) -> list[str]:
    """The keys exec_cache computes from now on."""
    seen = []
    original = program_keys.program_key

    def record(args, params):
        seen.append(original(args, params))
        return seen[-1]

    monkeypatch.setattr(program_keys, "program_key", record)
    return seen


def test_the_key_moves_with_shape_dtype_static_arguments_and_constants(store, monkeypatch):
    keys = _keys(monkeypatch)
    x = jnp.ones((3, 4), jnp.float32)

    def run(fn, *args):
        jax.jit(fn)(*args)
        return keys[-1]

    base = run(lambda a: a.sum(0) * 2.5, x)
    assert run(lambda a: a.sum(0) * 2.5, x) == base  # the same program, traced again: the same key
    assert run(lambda a: a.sum(1) * 2.5, x) != base  # a static argument (the axis)
    assert run(lambda a: a.sum(0) * 2.5, x.astype(jnp.float64)) != base
    assert run(lambda a: a.sum(0) * 2.5, jnp.ones((3, 5), jnp.float32)) != base
    assert run(lambda a: a.sum(0) * 2.25, x) != base  # a literal
    table = np.arange(4, dtype=np.float32)
    with_table = run(lambda a: a.sum(0) * table, x)
    table2 = table.copy()
    table2[3] = 7
    assert run(lambda a: a.sum(0) * table2, x) != with_table  # a constant's values
    with jax.default_matmul_precision("highest"):  # a setting the lowering reads
        assert run(lambda a: a.sum(0) * 2.5, x) != base
    assert len(set(keys)) == len(keys) - 1


def test_literals_are_keyed_by_their_bits(store, monkeypatch):
    """A number passed to an inner jit becomes a typed literal (a float subclass): -0.0 and 0.0 are two
    programs (x.mul_(-0.0) and x.mul_(0.0) gave the same key once, and the second ran the first's)."""
    keys = _keys(monkeypatch)
    x = jnp.ones((3,), jnp.float32)
    inner = jax.jit(lambda a, c: a * c)
    for c in (-0.0, 0.0, 0.0, 1, 1.0):
        jax.jit(lambda a, c=c: inner(a, c))(x)
    assert keys[-5] != keys[-4] == keys[-3] != keys[-2] != keys[-1]


def test_objects_without_a_stable_encoding_are_refused():
    with pytest.raises(program_keys.Unkeyable):
        program_keys._value(lambda: 0)  # a Python function (a host callback's)
    with pytest.raises(program_keys.Unkeyable):
        program_keys._value(np.array([object()]))
    assert program_keys._value(jax.random.key(3)) == program_keys._value(jax.random.key(3))
    assert program_keys._value(jax.random.key(3)) != program_keys._value(jax.random.key(4))
    assert program_keys._value(-0.0) != program_keys._value(0.0)
    assert program_keys._value(np.float32(1)) != program_keys._value(1.0) != program_keys._value(1)
