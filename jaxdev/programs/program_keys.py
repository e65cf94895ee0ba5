"""A program's content as a stable key, for jaxdev's executable cache (jaxdev/programs/exec_cache.py).

A jitted call's program is fixed by what JAX lowers: the traced jaxpr (its equations, their
parameters, its constants' values), the arguments' types and placements, the call's shardings,
layouts and donations, and the JAX settings in force. `program_key` encodes all of that as a tuple
of plain values (strings, numbers, bytes) whose repr is the same in every process, or raises
`Unkeyable` where some part has no such encoding (a host callback's Python function, a sharding
over a mesh, an object this module does not know). An unkeyable program is compiled as JAX always
compiles it: the key errs on the side of no cache, never on the side of a shared entry.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import hashlib
import struct

import jax
import numpy as np
from jax._src import config as jax_config
from jax._src import core

# Parameters that hold Python functions which lowering never calls: a custom_jvp/custom_vjp call
# lowers its `call_jaxpr` (the differentiation rules are for transformations, done before lowering).
_RULES_NOT_LOWERED = {
    "custom_jvp_call": ("jvp_jaxpr_fun",),
    "custom_vjp_call": ("fwd_jaxpr_thunk", "bwd", "out_trees"),
}
_PLAIN = (type(None), bool, int, str, bytes)


class Unkeyable(Exception):
    """Some part of the program has no stable encoding: it is not cached."""


def program_key(args, params: dict) -> str:
    """The sha256 of everything JAX's lowering and compilation of this call depends on."""
    from jax._src import pjit

    closed = params["jaxpr"]
    if closed.jaxpr.effects:
        raise Unkeyable("effects")  # ordered effects and callbacks: tokens and host functions
    encoded = (
        _closed_jaxpr(closed),
        tuple(_meta(pjit.convert_to_metaty(a)) for a in args),
        tuple(_value(params[k]) for k in sorted(params) if k not in ("jaxpr", "name")),
        _settings(),
    )
    return hashlib.sha256(repr(encoded).encode()).hexdigest()


# Settings of where and whether JAX keeps or logs programs, which no program depends on (a process with
# its own cache folder or logging finds the same entries)
_NOT_THE_PROGRAMS = frozenset({
    "jax_compilation_cache_dir", "jax_compilation_cache_max_size", "jax_enable_compilation_cache",
    "jax_persistent_cache_min_compile_time_secs", "jax_persistent_cache_min_entry_size_bytes",
    "jax_raise_persistent_cache_errors", "jax_compilation_cache_check_contents",
    "jax_compilation_cache_include_metadata_in_key", "jax_explain_cache_misses", "jax_log_compiles",
    "jax_logging_level", "jax_debug_log_modules",
})  # fmt: skip


def _settings():
    """The JAX configuration: global values, and the thread's own where a context set them."""
    values = tuple((k, type(v), v) for k, v in jax.config.values.items() if k not in _NOT_THE_PROGRAMS)
    digest = _SETTINGS.get(values)
    if digest is None:
        encoded = tuple((k, _value(v)) for k, _, v in sorted(values))
        digest = _SETTINGS[values] = hashlib.sha256(repr(encoded).encode()).hexdigest()
    return digest, _value(jax_config.trace_context())


_SETTINGS: dict = {}  # the global configuration's digests, by its values


def _meta(m):
    """An argument as jit's lowering sees it: abstract value, placement, layout, committed or not."""
    return ("arg", _value(m.aval), _sharding(m.sharding), _format(m.format), m.committed, m.is_np_array)


def _sharding(s):
    if s is None:
        return None
    if isinstance(s, jax.sharding.SingleDeviceSharding):
        device = next(iter(s.device_set))
        return ("single", device.platform, device.id, s.memory_kind)
    if isinstance(s, jax.sharding.NamedSharding):  # an abstract value's: over an abstract mesh
        return ("named", _mesh(s.mesh), _object(s.spec, type(s.spec)), s.memory_kind)
    raise Unkeyable(f"sharding {type(s).__name__}")


def _mesh(m):
    """An abstract mesh (axis names and sizes, no devices), or a concrete one with no axes."""
    from jax._src import mesh

    if isinstance(m, mesh.AbstractMesh):
        return _object(m, type(m))
    if isinstance(m, mesh.Mesh) and m.empty:
        return ("empty mesh",)
    raise Unkeyable("a mesh of devices")


def _format(f):
    if f is None:
        return None
    layout = f.layout
    return (
        "format",
        _value(getattr(layout, "major_to_minor", layout)),
        _value(getattr(layout, "tiling", None)),
        _value(getattr(layout, "sub_byte_element_size_in_bits", None)),
        _sharding(f.sharding),
    )


def _closed_jaxpr(closed):
    return ("closed", _jaxpr(closed.jaxpr), tuple(_array(c) for c in closed.consts))


def _jaxpr(jaxpr):
    names: dict = {}

    def var(v):
        if isinstance(v, core.Literal):
            return ("lit", _value(v.val), _value(v.aval))
        if v not in names:
            names[v] = len(names)
        return ("var", names[v], _value(v.aval))

    head = (tuple(map(var, jaxpr.constvars)), tuple(map(var, jaxpr.invars)))
    eqns = tuple(_eqn(e, var) for e in jaxpr.eqns)
    return ("jaxpr", head, eqns, tuple(map(var, jaxpr.outvars)))


def _eqn(e, var):
    skip = _RULES_NOT_LOWERED.get(e.primitive.name, ())
    params = tuple((k, _value(v)) for k, v in sorted(e.params.items()) if k not in skip)
    if e.effects:
        raise Unkeyable("effects")
    return (e.primitive.name, tuple(map(var, e.invars)), params, tuple(map(var, e.outvars)), _value(e.ctx))


def _array(x):
    if isinstance(x, core.Tracer):
        raise Unkeyable("tracer")
    if jax.dtypes.issubdtype(getattr(x, "dtype", None), jax.dtypes.extended):  # random keys: their data
        return ("keys", str(x.dtype), _array(jax.random.key_data(x)))
    a = np.asarray(x)
    if a.dtype == object:
        raise Unkeyable("object array")
    return ("array", a.dtype.str, a.shape, a.tobytes())


def _value(v):
    t = type(v)
    if t in _PLAIN:
        return (t.__name__, v)
    if t is tuple or t is list:
        return (t.__name__, tuple(_value(x) for x in v))
    if t is float:
        return ("float", struct.pack("<d", v))
    if isinstance(v, (int, float, complex)) and not isinstance(v, enum.Enum):
        return _number(v, t)  # a subclass (jax's typed literals, numpy's float64): the value and its type
    if t is dict or t is set or t is np.ndarray:  # mutable: encoded at every meeting
        return _other(v, t)
    memo = _MEMO.get(id(v))
    if memo is not None and memo[0] is v:
        return memo[1]
    encoded = _other(v, t)
    text = repr(encoded)
    if len(text) > 80:  # a long encoding stands as its digest (met again, it costs nothing to write)
        encoded = ("sha256", hashlib.sha256(text.encode()).hexdigest())
    if len(_MEMO) >= _MEMO_SIZE:
        _MEMO.clear()
    _MEMO[id(v)] = (v, encoded)  # the object held: its id cannot be reused while the entry lives
    return encoded


def _number(v, t):
    if isinstance(v, complex):
        payload = struct.pack("<dd", v.real, v.imag)
    elif isinstance(v, float):
        payload = struct.pack("<d", v)
    else:
        payload = int(v)
    return ("number", t.__module__, t.__qualname__, str(getattr(v, "dtype", "")), payload)


# Encodings of the objects met so far, by identity (JAX interns abstract values, shardings, meshes and
# equation contexts: each is encoded once per process)
_MEMO: dict = {}
_MEMO_SIZE = 1 << 14


def _other(v, t):
    if t is dict:
        return ("dict", tuple(sorted((repr(_value(k)), _value(x)) for k, x in v.items())))
    if isinstance(v, (np.ndarray, np.generic, jax.Array)):
        return _array(v)
    if isinstance(v, np.dtype):
        return ("dtype", str(v))
    if isinstance(v, enum.Enum):
        return ("enum", t.__module__, t.__qualname__, v.name)
    if isinstance(v, (frozenset, set)):
        return ("set", tuple(sorted(repr(_value(x)) for x in v)))
    if isinstance(v, core.ClosedJaxpr):
        return _closed_jaxpr(v)
    if isinstance(v, core.Jaxpr):
        return _jaxpr(v)
    if isinstance(v, core.Primitive):
        return ("primitive", v.name)
    if isinstance(v, type) and issubclass(v, np.generic):
        return ("scalar type", np.dtype(v).str)
    if isinstance(v, tuple):  # a named tuple (dimension numbers)
        return ("tuple", t.__module__, t.__qualname__, tuple(_value(x) for x in v))
    if isinstance(v, jax.sharding.Sharding):
        return _sharding(v)
    if t.__name__ in ("Mesh", "AbstractMesh"):
        return _mesh(v)
    if getattr(v, "dtype", None) is not None and jax.dtypes.issubdtype(v, jax.dtypes.extended):
        return ("extended dtype", str(v))
    return _object(v, t)


_FIELDS: dict = {}
_SENTINELS = ("UnspecifiedValue", "AUTO")  # JAX's stateless markers (a sharding or layout left to XLA)
_BUILTIN_STATE = (int, float, complex, str, bytes, tuple, list, dict, set, frozenset, np.ndarray, np.generic)


def _fields(v, t) -> list:
    if dataclasses.is_dataclass(v):
        return [f.name for f in dataclasses.fields(v)]
    fields = _FIELDS.get(t)
    if fields is None:
        fields = _FIELDS[t] = [s for c in t.__mro__ for s in getattr(c, "__slots__", ()) if s != "__weakref__"]
    # not the values a cached property left in __dict__ (present or not by what was asked before)
    state = [k for k in getattr(v, "__dict__", {}) if not isinstance(getattr(t, k, None), functools.cached_property)]
    return fields + sorted(state)


def _object(v, t):
    """A JAX object (abstract values, meshes, contexts, partition specs) by its fields."""
    if t.__module__.split(".")[0] not in ("jax", "jaxlib") or callable(v) or isinstance(v, _BUILTIN_STATE):
        raise Unkeyable(f"{t.__module__}.{t.__qualname__}")  # its state is not (all) in Python fields
    fields = _fields(v, t)
    if not fields and t.__qualname__ in _SENTINELS:
        return ("sentinel", t.__module__, t.__qualname__)
    if not fields:
        raise Unkeyable(f"{t.__module__}.{t.__qualname__}")  # a C++ object: no fields to read
    return ("object", t.__module__, t.__qualname__, tuple((f, _value(getattr(v, f, None))) for f in fields))
