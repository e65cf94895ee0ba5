"""What a kernel does differently when it runs inside a compiled program.

Under `torch.compile(backend="jax")` the graph's ops run once through the same kernels as eager
mode, on jax tensors whose storages hold JAX tracers (see `jaxdev/compiler/program.py`). A kernel
then sees shapes and dtypes but no values, so it must never branch on a value in Python. Where CPU
raises on bad values (a class index out of range, an integer division by zero), a kernel states the
check with `check_values`:

* eager: the condition is read at once and CPU's exception is raised, as before;
* traced: the condition becomes an output of the program. After each call of a program that holds
  checks, the program's runner reads one boolean; if any check failed it runs the graph again
  eagerly on the same inputs, so the user gets the eager kernel's own exception (see program.py).
  Values are never silently wrong, at the price of one scalar read per call
  (`JAXDEV_COMPILE_CHECKS=0` skips that read, and the checks with it).
"""

from __future__ import annotations

from typing import Callable

import jax

Tracer = jax.core.Tracer


class _Checks:
    """The traced checks of the program being traced now (None outside tracing)."""

    pending: list | None = None


_checks = _Checks()


def is_traced(x) -> bool:
    return isinstance(x, Tracer)


def check_values(bad, error: Callable[[], Exception]) -> None:
    """Raise `error()` where the boolean array `bad` is true (eagerly), or record the check (traced)."""
    if is_traced(bad):
        if _checks.pending is not None:
            _checks.pending.append(bad.any())
        return
    if bool(bad.any()):
        raise error()


def start_checks() -> None:
    _checks.pending = []


def finish_checks() -> list:
    pending, _checks.pending = _checks.pending or [], None
    return pending
