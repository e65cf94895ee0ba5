"""The compiled path's counters for this process, read by the backend, the AOTAutograd cache's output
code, tests and benchmarks (a module of its own: output_code.py imports torch._inductor, which the
readers need not)."""

from __future__ import annotations


class STATS:
    """This process's AOTAutograd cache traffic for the jax backend (graphs, not steps)."""

    hits = 0  # compiled graphs (forward+backward pairs, or inference graphs) loaded from disk
    compiled = 0  # graphs AOTAutograd traced here (a miss, or the cache off)
