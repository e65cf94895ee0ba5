"""Fused eager as one of the eager modes: its handler in jaxdev/eager_modes.py's table."""

from __future__ import annotations

from jaxdev import eager_modes
from jaxdev.fused import recorder


class Fused(eager_modes.Mode):
    """A kernel call is recorded into the pending segment (or run eagerly after it where it cannot be),
    a compiled graph's call joins the segment as one op, so a compiled step's forward, backward and
    optimizer graphs run as one XLA program, and a flush runs the segment."""

    name = "fused"
    # The recorder's own functions, not methods that call them: one frame less on every recorded op.
    kernel = staticmethod(recorder.record)
    flush = staticmethod(recorder.flush)

    def graph(self, program, args: list):
        return recorder.record(program.op, program.recorded, tuple(args), {})


def install() -> None:
    eager_modes.register(Fused())
