"""How eager ops run: one program per op, fused, or synchronously for debugging.

    JAXDEV_EAGER=fused python train.py          # or, in code:
    jaxdev.eager_mode("fused")                  # a setter ...
    with jaxdev.eager_mode("sync"): ...         # ... and a context manager (the previous mode comes back)

* "op" (the default on XLA's CPU backend): every op on jax tensors is one jitted XLA program,
  dispatched asynchronously; values that CPU checks at once (an index out of range) are checked at the op.
* "fused" (the default on an accelerator): ops are recorded instead of run and flushed as one cached
  XLA program when a value must exist (jaxdev/fused/). Errors that depend on values surface at the
  next sync, like CUDA's asynchronous errors.
* "sync": every op waits for its results: errors and NaNs show up at the op that made them, and
  timings are per op. For debugging.

Every Python kernel the registry installs calls `dispatch` when a mode other than "op" is on (one
attribute test per op otherwise); the native fast paths are turned off in those modes so that no op
escapes the mode (`native.cpp`'s set_python_kernels).

The default is chosen at the device's first tensor (torch calls `torch.jax._lazy_init` then), when
neither JAXDEV_EAGER nor `eager_mode()` chose before: asking JAX's platform earlier would start the
accelerator's runtime at `import torch` (jaxdev autoloads). Why fused on an accelerator: on a TPU v5e
(2026-12-06, benchmarks/tpu_check.sh, the GPT LM's bf16 training step) fused eager ran a step in 15.6
ms against per-op's 86.5 and its cold first step in 32.1 s against 66.0, and won the batch-1 forward;
on XLA's CPU backend per-op stays, whose values CPU checks at the op.

The modes are one table, HANDLERS: a mode's name -> its handler (a `Mode`), which says what a kernel
call and a compiled graph's call do while the mode is on, and what a flush runs. "op" and "sync" are
defined here; "fused" is jaxdev/fused/'s (mode.py registers it), so this module imports no mode.
"""

from __future__ import annotations

import os
import threading

import jax

from jaxdev import native, tensor, tracing

MODES = ("op", "fused", "sync")  # the names, in the order the docs give them
ENV = "JAXDEV_EAGER"


class Mode:
    """An eager mode's handler; this one is the default mode's ("op"): a kernel runs as it is, a
    compiled graph as its own program, and nothing is ever pending."""

    name = "op"

    def kernel(self, op, fn, args, kwargs):
        """A kernel call (the dispatcher's `op`, its Python kernel `fn`) while this mode is on."""
        return fn(*args, **kwargs)

    def graph(self, program, args: list):
        """A compiled graph's call (`program`, a graphs.program.GraphProgram) while this mode is on."""
        return program.run(args)

    def flush(self) -> None:
        """Run what this mode holds pending."""


class _Sync(Mode):
    """Every op waits for its results, so errors and NaNs show up at the op that made them."""

    name = "sync"

    def kernel(self, op, fn, args, kwargs):
        with as_is():
            out = fn(*args, **kwargs)
        _wait(out)
        return out


HANDLERS: dict[str, Mode] = {}


def register(mode: Mode) -> None:
    """`mode` becomes the handler of the mode named `mode.name`."""
    HANDLERS[mode.name] = mode


class _Active:
    """`on`: a mode other than "op" is set (the kernels' one test); `name`: the mode; `handler`: its Mode."""

    on = False
    name = "op"
    handler = Mode()


ACTIVE = _Active()
_chosen = False  # a mode was chosen (JAXDEV_EAGER, eager_mode()): the platform's default no longer applies
register(ACTIVE.handler)
register(_Sync())


class _Local(threading.local):
    """Kernels that run inside another kernel, a trace or a flush run as they are (`depth`; thread-local:
    autograd runs backward kernels on its own thread while the caller's thread waits)."""

    depth = 0  # until a thread sets its own: a plain attribute read on every op, no getattr default


_local = _Local()
# The handlers of every mode set in this process: what `flush` asks (work may be pending in a mode
# that was left since, on another thread).
_entered: list[Mode] = []


def _check(name: str) -> str:
    if name not in HANDLERS:
        raise ValueError(f"jaxdev eager mode must be one of {', '.join(MODES)}, not {name!r}")
    return name


def _set(name: str) -> None:
    handler = HANDLERS[name]
    if ACTIVE.name != name:
        ACTIVE.handler.flush()  # what the mode left holds pending runs now
    if handler not in _entered:
        _entered.append(handler)
    ACTIVE.name, ACTIVE.handler = name, handler
    ACTIVE.on = name != "op"
    if native.module is not None:
        native.module.set_python_kernels(ACTIVE.on)


class eager_mode:
    """`jaxdev.eager_mode("fused")` sets the mode now; `with jaxdev.eager_mode("fused"):` sets it for a
    block and restores the previous one after (flushing pending work when leaving "fused")."""

    def __init__(self, name: str):
        global _chosen
        self._previous = ACTIVE.name
        _set(_check(name))
        _chosen = True

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        _set(self._previous)


def flush() -> None:
    """Run every mode's pending work now (fused eager's pending ops; nothing in the other modes)."""
    for handler in _entered:
        handler.flush()


def get_eager_mode() -> str:
    return ACTIVE.name


def inside() -> bool:
    return _local.depth > 0


class as_is:
    """Kernels called inside run as they are, whatever the mode (a kernel's own nested ops, a flush)."""

    def __enter__(self):
        _local.depth += 1

    def __exit__(self, *exc) -> None:
        _local.depth -= 1


_checks = tracing.checks  # tracing.tracing_now()'s flags, read by dispatch without that call


def dispatch(op, fn, args, kwargs):
    """A kernel call while a mode other than "op" is on. Inside another kernel or a flush (as_is), or
    while kernels are traced (a compiled program, a VJP body, fused's own evaluation), it runs as it
    is. The tests are inline (tracing.tracing_now()'s own): this runs for every op fused eager
    records, where each Python frame costs about a tenth of a microsecond."""
    if _local.depth or _checks.pending is not None or _checks.depth or tensor.in_scratch():
        return fn(*args, **kwargs)
    return ACTIVE.handler.kernel(op, fn, args, kwargs)


def _wait(out) -> None:
    """sync mode: block until `out`'s values exist, so a device error is raised here."""
    for t in out if isinstance(out, (tuple, list)) else (out,):
        if tensor.is_jax(t):
            jax.block_until_ready(tensor.box_of(t).pending())


def from_environment() -> None:
    global _chosen
    name = os.environ.get(ENV, "").strip().lower()
    if name:
        if name not in HANDLERS:
            raise RuntimeError(f"{ENV}={name!r} is not a jaxdev eager mode: use one of {', '.join(MODES)}")
        _set(name)
        _chosen = True


def platform_default() -> str:
    """The eager mode a program that never chose one runs in: fused on an accelerator, op on CPU."""
    return "op" if jax.default_backend() == "cpu" else "fused"


def on_first_tensor() -> None:
    """torch.jax._lazy_init: the device's first tensor is being made; the platform's default mode
    applies from here on unless one was chosen."""
    if not _chosen and ACTIVE.name == "op":
        _set(platform_default())


def _after_optimizer_step(optimizer, args, kwargs) -> None:
    ACTIVE.handler.flush()


def install() -> None:
    """The end of every `optimizer.step()` is a flush point; JAXDEV_EAGER picks the starting mode."""
    from torch.optim.optimizer import register_optimizer_step_post_hook

    register_optimizer_step_post_hook(_after_optimizer_step)
    from_environment()
