"""torch.compile's log notes kept out of a benchmark's output (issue 28 item 5). No jaxdev import:
cuda_reference.py imports compile_step, which imports this, in a process without jaxdev."""

from __future__ import annotations

import logging
import warnings

_COMPILER_LOGGERS = ("torch._dynamo", "torch._inductor", "torch._functorch", "torch.fx.experimental.symbolic_shapes")


class quiet_compilers:
    """Inside, torch.compile's own logging below ERROR is not printed (dynamo's "Profiler record
    function ... will be ignored" when it compiles `optimizer.step`, inductor's notes), nor, with
    `warnings_too`, Python warnings. The benchmarks run the torch.compile(backend="inductor") rows
    with both, so their output is the numbers; jaxdev's compiled rows with the loggers only, so that
    jaxdev's own warnings still show."""

    def __init__(self, warnings_too: bool = True):
        self.warnings_too = warnings_too

    def __enter__(self):
        self._levels = [(log, log.level) for log in map(logging.getLogger, _COMPILER_LOGGERS)]
        for log, _ in self._levels:
            log.setLevel(logging.ERROR)
        self._warnings = warnings.catch_warnings() if self.warnings_too else None
        if self._warnings is not None:
            self._warnings.__enter__()
            warnings.simplefilter("ignore")
        return self

    def __exit__(self, *exc) -> None:
        if self._warnings is not None:
            self._warnings.__exit__(*exc)
        for log, level in self._levels:
            log.setLevel(level)


def quietly(fn, warnings_too: bool = True):
    """`fn` run inside quiet_compilers on every call."""

    def run(*args, **kwargs):
        with quiet_compilers(warnings_too):
            return fn(*args, **kwargs)

    return run
