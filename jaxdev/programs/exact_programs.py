"""Programs with no floating-point arithmetic, which XLA may compile with less optimization and give the
same bits: most of what eager jaxdev compiles for views, copies, indexing, masks and integer index math.

A new program's compile is most of what a fresh process pays for it (benchmarks/new_shapes.py: about
35 of 46 ms), and PyTorch's test files make thousands of small programs, each run a few times. `xla_backend_optimization_level=0` compiles a small program in 20-45 % less time, but
it may change floating-point results (an earlier measurement: grid_sample's bilinear float32 values
moved), since LLVM's optimizations may contract, reorder or vectorize float arithmetic and pick other
min/max instructions. A program whose every operation moves, selects, compares or converts values, or
computes on integers and booleans only, has no such freedom: each output element is a fixed function
of input bits whatever the code's shape. So jaxdev asks for the cheaper compile for those programs
only, and only where every value is small (TINY) (jaxdev/programs/exec_cache.py adds the option where it keys them), and everything else compiles as
before.

    JAXDEV_FAST_COMPILE=off     compile every program with XLA's default optimization
"""

from __future__ import annotations

import os

import numpy as np
from jax._src import core

ENV = "JAXDEV_FAST_COMPILE"
# The most elements of any value in a program compiled so. Less optimized code runs slower: measured
# per call, a 16x16 float32 transpose 5.1 -> 6.4 us, 32x32 5.2 -> 13.5 us, 512x512 95 us -> 6.3 ms; the
# cheaper compile is for the small programs a new shape brings, not for a model's large ones.
TINY = 256
OPTION = ("xla_backend_optimization_level", 0)
_OFF = ("0", "off", "none", "false", "no")

# Operations that only move, select or reinterpret values (any dtype)
_MOVES = frozenset({
    "transpose", "reshape", "squeeze", "expand_dims", "broadcast_in_dim", "slice", "dynamic_slice",
    "dynamic_update_slice", "gather", "concatenate", "pad", "rev", "select_n", "copy", "copy_p", "iota",
    "bitcast_convert_type", "convert_element_type", "eq", "ne", "lt", "le", "gt", "ge", "is_finite",
    "stop_gradient", "optimization_barrier",
})  # fmt: skip
# Calls whose body is checked in their place
_CALLS = ("jaxpr", "call_jaxpr")


def wanted(options: tuple) -> bool:
    """Whether to ask for the cheaper compile, given the call's own compiler options (which win)."""
    return os.environ.get(ENV, "on").strip().lower() not in _OFF and all(k != OPTION[0] for k, _ in options)


def exact(closed) -> bool:
    """Whether `closed` (a ClosedJaxpr) is small and has no floating-point arithmetic."""
    try:
        return _small(closed.jaxpr.invars) and _exact(closed.jaxpr)
    except Exception:  # a form this reading does not know (another JAX): compiled as by default
        return False


def _small(variables) -> bool:
    return all(getattr(v.aval, "size", TINY + 1) <= TINY for v in variables)


def _exact(jaxpr) -> bool:
    for e in jaxpr.eqns:
        name = e.primitive.name
        if not _small(e.outvars):
            return False
        bodies = [e.params[k] for k in _CALLS if k in e.params]
        if bodies:
            if not all(_exact(b.jaxpr if isinstance(b, core.ClosedJaxpr) else b) for b in bodies):
                return False
            continue
        if name == "scatter" and e.params.get("update_jaxpr") is None:
            continue  # a scatter that replaces values
        if name == "convert_element_type" and _float_to_integer(e):
            return False  # out-of-range floats convert as the generated code happens to
        if name in _MOVES:
            continue
        if any(k.endswith("jaxpr") for k in e.params):
            return False  # control flow, reductions with a body: not looked into
        if not all(_integral(v.aval) for v in (*e.invars, *e.outvars)):
            return False
    return True


def _float_to_integer(e) -> bool:
    source, target = e.invars[0].aval, e.outvars[0].aval
    return not _integral(source) and _integral(target) and np.dtype(target.dtype) != np.bool_


def _integral(aval) -> bool:
    dtype = getattr(aval, "dtype", None)
    if dtype is None:
        return False
    try:
        return np.issubdtype(dtype, np.integer) or np.issubdtype(dtype, np.bool_)
    except TypeError:  # an extended dtype (random keys)
        return False
