"""The numbers kernels hand to their jitted bodies, as data of a fused segment's program, as per-op.

In per-op mode a kernel calls its jitted body (ops/kit's `jitted`) with Python numbers among the arrays
(alpha, a scalar operand, `complex(alpha)`): jit makes each a parameter of the op's XLA program, a value
XLA knows nothing about. Traced into a segment's program, the same call passes the number as a literal:
XLA's simplifier then folds it, and folding is not IEEE arithmetic nor c10's:
* x * (1 + 0j) became x, where c10's complex product gives inf * 1 - 0 * 0, inf * 0 + 0 * 1 = inf + NaN i
  (`torch.mul(complex_x, True)`, `torch.rsub(a, b)` with its alpha 1, `x * 1`, `x / 1`);
* x + 0 became x (-0.0 + 0 is +0.0), x * -1 became -x (a NaN's sign flipped), x * 1 kept a subnormal
  that the multiply flushes.
So the segment's program is traced once as a jaxpr, and every scalar literal operand of a top-level
jit call (a body called by a kernel: what per-op passes as a parameter) becomes an input of the
program: floats and complex numbers always, integers and bools where their value reaches floating
arithmetic in the body (converted to a float or complex: alpha 1, `x * True`). Integers that stay
integers (a view's offset, a dim, an index) are left constants: their arithmetic is exact whether XLA
knows them or not, and a static offset keeps a static slice. A literal inside a body (its own 0.5) is a
constant in per-op mode too, and stays one. The values are kept on the device with the program, one
array per dtype: a call passes them as they are. Weakly typed literals stay weakly typed.
"""

from __future__ import annotations

import jax
import numpy as np
from jax._src.lax.lax import _convert_element_type  # weak_type= has no public spelling
from jax._src.pjit import jit_p
from jax.extend import core as jcore

_CONVERT = "convert_element_type"


def jit(fn, donate_argnums: tuple = ()):
    """`jax.jit(fn, donate_argnums=...)` with fn's bodies' numbers as program data (see above)."""
    return Lifted(fn, donate_argnums)


class _Stale(Exception):
    """jax retraced the program and the kernels handed other numbers to their bodies this time."""


class Lifted:
    """fn traced once as a jaxpr (its lifted literals' values kept on the device), run through jax.jit.
    Where jax traces the program again (its caches were cleared: a test's TPU policy, under which the
    kernels choose other formulas), fn is traced again too, as plain jax.jit would; if its lifted
    literals changed, the program is built anew."""

    __slots__ = ("call", "donate", "first", "fn", "key", "values")

    def __init__(self, fn, donate: tuple):
        self.fn, self.donate, self.call, self.first, self.values, self.key = fn, donate, None, None, (), None

    def __call__(self, *args):
        if self.call is None:
            self._build(args)
        try:
            return self.call(self.values, *args)
        except _Stale:
            self._build(args)
            return self.call(self.values, *args)

    def out_tree(self, *args):
        """The structure of fn's result on args, from the trace the first call compiles (traced here
        if no call has been made yet, so a caller can decide how to call before anything compiles)."""
        if self.call is None:
            self._build(args)
        return (self.first or _Traced(self.fn, args)).out_tree

    def inputs_of_last_output(self, *args) -> frozenset:
        """The positions among args' leaves that fn's last output leaf is computed from (a program's check
        flag: which inputs it reads), from the trace the first call compiles (see out_tree)."""
        if self.call is None:
            self._build(args)
        return reaching((self.first or _Traced(self.fn, args)).jaxpr, -1)

    def _build(self, args) -> None:
        self.first = traced = _Traced(self.fn, args)
        self.key = traced.key
        with jax.ensure_compile_time_eval():  # a flush inside a trace (a jitted read of a pending tensor)
            self.values = tuple(jax.device_put(np.stack(group)) for group in traced.groups.values())
        donate = tuple(i + 1 for i in self.donate)
        self.call = jax.jit(self._run, donate_argnums=donate) if donate else jax.jit(self._run)

    def _run(self, values, *args):
        traced, self.first = self.first, None
        if traced is None:  # jax traces again: so do the kernels (see the class)
            traced = _Traced(self.fn, args)
            if traced.key != self.key:
                raise _Stale
        packed = dict(zip(traced.groups, values))
        scalars = []
        for dtype, i, weak in traced.where:
            s = packed[dtype][i]
            scalars.append(_convert_element_type(s, weak_type=True) if weak else s)
        return jax.tree.unflatten(traced.out_tree, traced.fun(*jax.tree.leaves(args), *scalars))


class _Traced:
    """fn traced on args: `fun`, its lifted jaxpr as a function (fn's inputs, then the lifted numbers),
    `out_tree`, `groups` (dtype -> the lifted values of that dtype, in order), `where` (each lifted
    literal's (dtype, index in its group, weakly typed)), and `key`: all of that but the function."""

    __slots__ = ("fun", "groups", "jaxpr", "key", "out_tree", "where")

    def __init__(self, fn, args):
        closed, shapes = jax.make_jaxpr(fn, return_shape=True)(*args)
        jaxpr, lifted = lift(closed.jaxpr)
        self.groups: dict = {}
        self.where = []
        for literal in lifted:
            dtype = np.dtype(literal.aval.dtype)
            group = self.groups.setdefault(dtype, [])
            self.where.append((dtype, len(group), literal.aval.weak_type))
            group.append(np.asarray(literal.val, dtype))
        self.key = (tuple(self.where), tuple((d, np.stack(g).tobytes()) for d, g in self.groups.items()))
        self.jaxpr = jaxpr
        self.fun = jcore.jaxpr_as_fun(jcore.ClosedJaxpr(jaxpr, closed.consts))
        self.out_tree = jax.tree.structure(shapes)


def lift(jaxpr):
    """`jaxpr` with the literals to lift (see the top) as new inputs after its own, and those literals."""
    lifted, new, eqns = [], [], []
    for eqn in jaxpr.eqns:
        if eqn.primitive is jit_p and any(type(v) is jcore.Literal for v in eqn.invars):
            inner = eqn.params["jaxpr"].jaxpr
            invars = list(eqn.invars)
            for i, v in enumerate(invars):
                if type(v) is jcore.Literal and np.shape(v.val) == () and _numeric(inner, i, np.dtype(v.aval.dtype)):
                    lifted.append(v)
                    invars[i] = jcore.Var(v.aval)
                    new.append(invars[i])
            eqn = eqn.replace(invars=invars)
        eqns.append(eqn)
    debug = jaxpr.debug_info
    if debug is not None and debug.arg_names is not None:
        debug = debug._replace(arg_names=(*debug.arg_names, *(f"number{i}" for i in range(len(new)))))
    return jaxpr.replace(invars=[*jaxpr.invars, *new], eqns=eqns, debug_info=debug), lifted


def reaching(jaxpr, output: int) -> frozenset:
    """The positions of `jaxpr`'s inputs that its output at `output` depends on (an equation's outputs
    are taken to depend on all its inputs: a nested program is not looked into, which can only add)."""
    out = jaxpr.outvars[output]
    wanted = set() if type(out) is jcore.Literal else {out}
    for eqn in reversed(jaxpr.eqns):
        if any(v in wanted for v in eqn.outvars):
            wanted.update(v for v in eqn.invars if type(v) is not jcore.Literal)
    return frozenset(i for i, v in enumerate(jaxpr.invars) if v in wanted)


def _numeric(inner, index: int, dtype: np.dtype) -> bool:
    """Whether the body's `index`-th input, of `dtype`, takes part in floating arithmetic: a float or
    complex itself, or an integer or bool that some path of the body converts to one."""
    if np.issubdtype(dtype, np.inexact):
        return True
    return _reaches_inexact(inner, {inner.invars[index]})


def _reaches_inexact(jaxpr, tainted: set) -> bool:
    """Whether a value in `tainted` (vars of `jaxpr`), or one computed from them, is converted to a
    float or complex in `jaxpr` or a jit it calls. Other calls (a loop, a custom derivative) are taken
    to: lifting a number they only index with costs a parameter, never a bit."""
    for eqn in jaxpr.eqns:
        uses = [i for i, v in enumerate(eqn.invars) if type(v) is not jcore.Literal and v in tainted]
        if not uses:
            continue
        if eqn.primitive.name == _CONVERT and np.issubdtype(np.dtype(eqn.params["new_dtype"]), np.inexact):
            return True
        if eqn.primitive.name == "pow" and 1 in uses:  # a float to an integer power: no convert first
            return True
        if eqn.primitive is jit_p:
            inner = eqn.params["jaxpr"].jaxpr
            if _reaches_inexact(inner, {inner.invars[i] for i in uses}):
                return True
        elif any(True for _ in jcore.jaxprs_in_params(eqn.params)):
            return True
        tainted.update(v for v in eqn.outvars if not np.issubdtype(np.dtype(v.aval.dtype), np.inexact))
    return False
