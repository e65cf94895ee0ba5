"""What a kernel does differently when it runs inside a compiled program.

Under `torch.compile(backend="jax")` the graph's ops run once through the same kernels as eager
mode, on jax tensors whose storages hold JAX tracers (see `jaxdev/graphs/program.py`). A kernel
then sees shapes and dtypes but no values, so it must never branch on a value in Python. Where CPU
raises on bad values (a class index out of range, an integer division by zero), a kernel states the
check with `check_values`:

* eager: the condition is read at once and CPU's exception is raised, as before;
* traced: the condition becomes an output of the program, a boolean the program's runner hands to
  `defer_check`. It is read at the next point where values leave the device (`.item()`, `.cpu()`,
  printing, `torch.jax.synchronize()`) or before the same program runs again, so checking does not
  stall the device after every call. If a check failed, the graph runs again eagerly on the inputs
  of the failing call (kept until then), and the user gets the eager kernel's own exception there:
  asynchronous like CUDA's device-side errors, but with CPU's exception and message.
  `JAXDEV_COMPILE_CHECKS=0` skips the checks.

What cannot be traced at all (a kernel that needs values, a collective without a lowering) raises
`UntraceableGraph`: the graph engine (jaxdev/graphs/) then runs the graph op by op.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable

import jax
import torch

Tracer = jax.core.Tracer


class UntraceableGraph(Exception):
    """A graph, or node `node` of it, cannot run inside one XLA program: it runs op by op instead."""

    def __init__(self, node: torch.fx.Node | None, reason: str):
        self.node = node
        self.reason = reason
        where = f"{op_name(node)} (graph node {node.name!r})" if node is not None else "the graph"
        super().__init__(f"{where} cannot run inside one XLA program: {reason}")


def op_name(node: torch.fx.Node) -> str:
    target = node.target
    if isinstance(target, torch._ops.OpOverload):
        return target.name()
    return getattr(target, "__name__", str(target))


class _Checks:
    """The traced checks of the program being traced now (None outside tracing); `depth`: traces
    under way that collect no checks (a VJP body, jaxdev.fused's abstract evaluation)."""

    pending: list | None = None
    states: list | None = None  # with `snapshot`: what it returned at each check, in pending's order
    snapshot: Callable[[], object] | None = None
    depth = 0
    eager_layouts = False  # fused eager traces its ops as eager mode lays them out, not as AOTAutograd plans


checks = _Checks()


def tracing_now() -> bool:
    """Kernels are being traced into a program now (their tensors hold tracers)."""
    return checks.pending is not None or checks.depth > 0


def is_traced(x) -> bool:
    return isinstance(x, Tracer)


@contextlib.contextmanager
def eager_layouts(on: bool):
    """Ops traced inside lay out their results as eager mode does (on: fused eager's programs) or as a
    compiled graph planned them (off); the previous setting after."""
    was, checks.eager_layouts = checks.eager_layouts, on
    try:
        yield
    finally:
        checks.eager_layouts = was


def fused_trace() -> bool:
    """Fused eager (jaxdev/fused) is evaluating or tracing its ops now."""
    return checks.eager_layouts


def compiled_layout(x) -> bool:
    """Results made from `x` are laid out as a compiled graph planned them (the meta functions'
    strides), not as eager CPU lays them out: `x` is traced, and not by fused eager (jaxdev/fused),
    whose programs replay eager ops with eager layouts."""
    return isinstance(x, Tracer) and not checks.eager_layouts


def check_values(bad, error: Callable[[], Exception]) -> None:
    """Raise `error()` where the boolean array `bad` is true (eagerly), or record the check (traced)."""
    flag = bad if bad.ndim == 0 else bad.any()  # a program's own flag is read as it is (eager .any(): ~10 us)
    if is_traced(flag):
        if checks.pending is not None:
            checks.pending.append(flag)
            if checks.snapshot is not None:
                checks.states.append(checks.snapshot())
        return
    if bool(flag):
        raise error()


# Checks of programs already run, not yet read: owner -> (flag, raise_error), oldest first.
_deferred: dict = {}


def defer_check(owner, flag, raise_error: Callable[[], None]) -> None:
    """Hold a program's check flag; `raise_error()` raises the eager exception if it is set."""
    if owner in _deferred:
        _resolve(owner)
    _deferred[owner] = (flag, raise_error)


def resolve_checks() -> None:
    """Read every held check flag, oldest first; raise for the first that failed."""
    while _deferred:
        _resolve(next(iter(_deferred)))


def _resolve(owner) -> None:
    flag, raise_error = _deferred.pop(owner)
    if bool(flag):
        _deferred.clear()
        raise_error()


def start_checks(snapshot: Callable[[], object] | None = None) -> None:
    """Collect the checks of the program traced from now on; `snapshot()` is called at each one and its
    result kept beside it (a program's storages as they are when an op checks its inputs)."""
    checks.pending, checks.states, checks.snapshot = [], [], snapshot


def finish_checks() -> list:
    pending, checks.pending, checks.snapshot = checks.pending or [], None, None
    return pending


def states_at_checks() -> list:
    """What the last finished collection's `snapshot` returned at each of its checks."""
    states, checks.states = checks.states or [], None
    return states
