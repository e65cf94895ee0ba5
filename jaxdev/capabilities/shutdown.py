"""A fast interpreter exit: the garbage collector skips the libraries' import-time heap.

What holds a finishing process is CPython's finalization, not jaxdev's threads or handlers (the cache
trimmer is a daemon thread, jaxdev registers no atexit work, JAX writes persistent-cache entries when
it compiles them). After the atexit handlers CPython 3.11 runs one full garbage collection, then
three more while it destroys the modules and the interpreter, each traversing every tracked object
still alive. A jaxdev process holds a large heap: torch, jax and jaxdev's modules (258,000 tracked
objects after `import torch`; 238,000 for torch and jax alone), and torch._dynamo and sympy, which
the first op whose layout is computed on fake tensors imports (387,000 after a few eager ops). Each
full pass over that heap took 0.3 s on 2 loaded cores: 1.2-1.7 s from a script's last line to its
exit after eager ops, 1.5-2.2 s after torch.compile, 0.7-1.0 s for torch and jax alone. Frozen as
below: 0.44 s and 0.58 s (175,000 objects left to traverse after eager ops and a torch.compile).

So the last step of `import jaxdev` freezes what exists then (`gc.freeze()`): the modules and
registrations of torch, jax and jaxdev, which live until exit anyway. Later collections, during the
run and at exit, traverse only the objects created after it: the program's own, and modules imported
later (full collections during the run get cheaper too). The program's objects are collected and
finalized as before; what is skipped is collecting reference cycles among the frozen import-time
objects, memory the OS takes back at exit, and `gc.get_objects()` no longer lists them. A program
that imports torch (and so jaxdev) after building objects of its own freezes those too: a cycle
among them is then never collected, nor finalized at exit. JAXDEV_FAST_EXIT=0 turns this off.
"""

from __future__ import annotations

import gc
import os
import sys

ENV = "JAXDEV_FAST_EXIT"
_OFF = ("0", "off", "false", "no")


def enabled() -> bool:
    return os.environ.get(ENV, "1").strip().lower() not in _OFF


def install() -> None:
    """Freeze the heap; call last in jaxdev's import."""
    if not enabled():
        return
    # Garbage cycles still in the young generations (cheap to find) must not be frozen for good.
    gc.collect(1)
    # CPython destroys a module whose last reference was sys.modules (__main__ among them) before
    # it wipes the modules still alive, and leaves its globals to the collector; a frozen globals
    # dict would never be collected, so a program's unclosed files and other globals would not be
    # finalized. A frozen self-referencing list, never collected, keeps every module imported so
    # far alive until CPython wipes its globals (sets them to None), as it does for any module.
    keep = list(sys.modules.values())
    keep.append(keep)
    gc.freeze()
