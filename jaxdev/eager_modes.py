"""How eager ops run: one program per op (the default), fused, or synchronously for debugging.

    JAXDEV_EAGER=fused python train.py          # or, in code:
    jaxdev.eager_mode("fused")                  # a setter ...
    with jaxdev.eager_mode("sync"): ...         # ... and a context manager (the previous mode comes back)

* "op" (default): every op on jax tensors is one jitted XLA program, dispatched asynchronously; values
  that CPU checks at once (an index out of range) are checked at the op.
* "fused": ops are recorded instead of run and flushed as one cached XLA program when a value must
  exist (jaxdev/fused/). Errors that depend on values surface at the next sync, like CUDA's
  asynchronous errors.
* "sync": every op waits for its results: errors and NaNs show up at the op that made them, and
  timings are per op. For debugging.

Every Python kernel the registry installs calls `dispatch` when a mode other than "op" is on (one
attribute test per op otherwise); the native fast paths are turned off in those modes so that no op
escapes the mode (`native.cpp`'s set_python_kernels).
"""

from __future__ import annotations

import os
import threading

import jax

from jaxdev import native

MODES = ("op", "fused", "sync")
ENV = "JAXDEV_EAGER"


class _Active:
    """`on`: a mode other than "op" is set (the kernels' one test); `name`: the mode."""

    on = False
    name = "op"


ACTIVE = _Active()
# Kernels that run inside another kernel, a trace or a flush run as they are (thread-local: autograd
# runs backward kernels on its own thread while the caller's thread waits).
_local = threading.local()


def _check(name: str) -> str:
    if name not in MODES:
        raise ValueError(f"jaxdev eager mode must be one of {', '.join(MODES)}, not {name!r}")
    return name


_ever_fused = False


def _set(name: str) -> None:
    global _ever_fused
    if ACTIVE.name == "fused" and name != "fused":
        from jaxdev.fused import recorder

        recorder.flush()
    _ever_fused = _ever_fused or name == "fused"
    ACTIVE.name = name
    ACTIVE.on = name != "op"
    if native.module is not None:
        native.module.set_python_kernels(ACTIVE.on)


class eager_mode:
    """`jaxdev.eager_mode("fused")` sets the mode now; `with jaxdev.eager_mode("fused"):` sets it for a
    block and restores the previous one after (flushing pending work when leaving "fused")."""

    def __init__(self, name: str):
        self._previous = ACTIVE.name
        _set(_check(name))

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        _set(self._previous)


def flush() -> None:
    """Run fused eager's pending ops now (nothing to do in the other modes)."""
    if ACTIVE.name == "fused" or _ever_fused:
        from jaxdev.fused import recorder

        recorder.flush()


def get_eager_mode() -> str:
    return ACTIVE.name


def inside() -> bool:
    return getattr(_local, "depth", 0) > 0


class as_is:
    """Kernels called inside run as they are, whatever the mode (a kernel's own nested ops, a flush)."""

    def __enter__(self):
        _local.depth = getattr(_local, "depth", 0) + 1

    def __exit__(self, *exc) -> None:
        _local.depth -= 1


def dispatch(op, fn, args, kwargs):
    """A kernel call while a mode other than "op" is on."""
    if getattr(_local, "depth", 0) or _tracing():
        return fn(*args, **kwargs)
    if ACTIVE.name == "fused":
        from jaxdev.fused import recorder

        return recorder.record(op, fn, args, kwargs)
    with as_is():
        out = fn(*args, **kwargs)
    _wait(out)
    return out


def _tracing() -> bool:
    """Kernels are being traced (a compiled program, a VJP body, fused's own evaluation): run them."""
    if _probes is None:
        _find_probes()
    return _probes[0]() or _probes[1]()


_probes = None  # (tracing.tracing_now, tensor.in_scratch): imported at the first op (they import this module)


def _find_probes() -> None:
    global _probes
    from jaxdev import tensor, tracing

    _probes = (tracing.tracing_now, tensor.in_scratch)


def _wait(out) -> None:
    """sync mode: block until `out`'s values exist, so a device error is raised here."""
    from jaxdev import tensor

    for t in out if isinstance(out, (tuple, list)) else (out,):
        if tensor.is_jax(t):
            jax.block_until_ready(tensor.box_of(t).pending())


def from_environment() -> None:
    name = os.environ.get(ENV, "").strip().lower()
    if name and name != "op":
        if name not in MODES:
            raise RuntimeError(f"{ENV}={name!r} is not a jaxdev eager mode: use one of {', '.join(MODES)}")
        _set(name)


def _after_optimizer_step(optimizer, args, kwargs) -> None:
    if ACTIVE.name == "fused":
        flush()


def install() -> None:
    """The end of every `optimizer.step()` is a flush point; JAXDEV_EAGER picks the starting mode."""
    from torch.optim.optimizer import register_optimizer_step_post_hook

    register_optimizer_step_post_hook(_after_optimizer_step)
    from_environment()
