"""What kernels read besides their arguments, in every recorded op's key, and set around its program.

A kernel reads some of the process's settings when it runs: the default dtype (a Python float's type),
torch.use_deterministic_algorithms with fill_uninitialized_memory (an empty tensor filled with NaN), its
warn_only (an alert that raises or warns), torch.get_num_threads() (which elements CPU's scalar tail
computes, cpu_numerics.cpu_threads), the float32 matmul precision (a product's passes) and
torch.set_warn_always (whether a warning given once is given again). Per-op mode reads them at every
call. Fused eager runs a kernel when its op is first met (learn) and when the
segment's program is traced, and replays both after; so
* the settings are the second part of every op's key (`now()`): an op met under other settings is
  another op, learnt and compiled under them (a segment's program built without the deterministic fill
  replayed with it: zeros where CPU and per-op mode give NaN);
* a segment holds ops of one setting: a change between two ops flushes the ops before it (recorder);
* the program is traced under the settings its ops were recorded with (`applied`), should they have
  changed between the last op and the flush.
The native module computes the tuple (jaxdev/csrc/fused_context.cpp, the same object while nothing in
it changed) and its replay guard compares it; without the module, `_python` builds the same values.
"""

from __future__ import annotations

import contextlib

import torch

from jaxdev import native


def _python() -> tuple:
    return (
        torch.get_default_dtype(),
        torch._C._get_deterministic_algorithms(),
        torch._C._get_deterministic_algorithms_warn_only(),
        torch._C._get_deterministic_fill_uninitialized_memory(),
        torch.get_num_threads(),
        torch.get_float32_matmul_precision(),
        torch.is_warn_always_enabled(),
    )


now = getattr(native.module, "fused_context", None) or _python


@contextlib.contextmanager
def applied(recorded: tuple | None):
    """The settings `recorded` (a `now()` of the segment's ops) while the block runs, where they differ
    from the current ones; restored after."""
    current = now()
    if recorded is None or recorded is current or recorded == current:
        yield
        return
    _set(recorded)
    try:
        yield
    finally:
        _set(current)


def _set(settings: tuple) -> None:
    dtype, deterministic, warn_only, fill, threads, precision, warn_always = settings
    torch.set_default_dtype(dtype)
    torch.use_deterministic_algorithms(deterministic, warn_only=warn_only)
    torch.utils.deterministic.fill_uninitialized_memory = fill
    if torch.get_num_threads() != threads:  # resizes the thread pool: only where it differs
        torch.set_num_threads(threads)
    torch.set_float32_matmul_precision(precision)
    torch.set_warn_always(warn_always)
