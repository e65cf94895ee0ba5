"""torch.optim's foreach calls replayed natively per key (issue 37 items 4 and 6): the learning side.

The native kernel (jaxdev/csrc/foreach_ops.cpp) keys each call of a foreach overload jaxdev/ops/foreach.py
runs as one program by all that its kernel's `_run` decides from: every tensor's dtype, device and
sizes (each a plain tensor whose box holds its jax array), each number's kind, whether alpha is 1,
inference mode, and fused eager's context. The numbers' values are not in the key: `_run` passes them
to the program as data (Adam's step sizes change every step). A key met before is replayed without a
Python frame: the same program (donating the selfs' buffers where `_run` would), its results stored into
the selfs' boxes with their versions bumped, or made new tensors. On the LM's optimizer step the Python
kernel cost 2-3x its program's own call (benchmarks/op_stream.py).

A key not met yet runs the Python kernel, and `learning` watches it: `_run` reports the program it
chose between (`ran`: without and with donation) and the numbers it passed. It learns only where the
kernel's whole effect was that one program (`_run` reported once, no warning shown) and the numbers are
the ones the native key read; otherwise the Python kernel runs every time. Fused and sync eager see
every op in Python (the native kernels step aside), as they do for the memo kernels.
"""

from __future__ import annotations

import numpy as np

from jaxdev import native, tensor
from jaxdev.core import boxes
from jaxdev.ops.kit import memo

# Foreach overloads whose kernels report what they ran (`replayed`, by jaxdev/ops/foreach.py before it
# registers them).
OPS: set[str] = set()


class _Learning:
    runs: list | None = None  # while a call is learned: (keep, donate, numbers) for each program _run ran


LEARNING = _Learning()


class _Stats:
    slow = 0  # calls of a replayed overload's Python kernel (a key not met yet, or one never learned)
    learned = 0  # keys learned


STATS = _Stats()


def replayed(op) -> None:
    """`op` (a foreach overload whose kernel calls `ran`) gets the native kernel when it is registered."""
    OPS.add(op.name())


def wanted(op) -> bool:
    return native.module is not None and op.name() in OPS


def ran(keep, donate, numbers: list) -> None:
    """Told by `_run` after its program ran: the program without and with donation, and its numbers."""
    if LEARNING.runs is not None:
        LEARNING.runs.append((keep, donate, tuple(numbers)))


def install(op, fn) -> None:
    """`op`'s native kernel (registry._register), `fn` (the Python kernel) its slow path."""
    from jaxdev.ops.kit.native_kernels import slow_path

    memo.setup()
    if not _setup:
        # the boxes' namespace: the kernel reads its scratch depth (tensor.in_scratch) where it runs
        native.module.set_foreach(tensor.EXPORTED, vars(boxes), np.asarray, np.float64)
        _setup.append(True)
    index: list[int] = []
    inplace = op._schema.name.endswith("_")
    register = native.module.register_foreach_kernel
    slow_path(op, learning(fn, index), lambda slow: index.append(register(op.name(), slow, inplace)))


_setup: list = []


def learning(fn, index: list):
    """`fn` as the native kernel's slow path: where the kernel is learning this call (foreach_begin),
    what `_run` ran is watched and learned."""
    begin, learn = native.module.foreach_begin, native.module.foreach_learn

    def kernel(*args, **kwargs):
        STATS.slow += 1
        if not begin(index[0]):
            return fn(*args, **kwargs)
        runs, previous = [], LEARNING.runs
        LEARNING.runs = runs
        try:
            with memo.warnings_shown() as seen:
                out = fn(*args, **kwargs)
        finally:
            LEARNING.runs = previous
        if not seen and len(runs) == 1:
            keep, donate, numbers = runs[0]
            made = () if out is None else tuple(t.dtype for t in out)
            STATS.learned += learn(index[0], keep, donate, numbers, made)
        return out

    kernel.__qualname__ = getattr(fn, "__qualname__", "kernel")
    kernel.__wrapped__ = fn
    return kernel
