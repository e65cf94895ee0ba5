"""jaxdev's compiled graphs as AOTAutograd's cache stores them (see aot_cache.py). Imports
torch._inductor, so it is imported at the first compile, not with jaxdev."""

from __future__ import annotations

import dataclasses
from typing import Any

from torch._inductor.custom_graph_pass import CustomGraphPass
from torch._inductor.output_code import OutputCode

from jaxdev.compiler.stats import STATS
from jaxdev.programs import cache


@dataclasses.dataclass
class ProgramCode(OutputCode):
    """One jaxdev graph program as an OutputCode, called boxed (`code(args)`); it pickles as the
    program's graph (GraphProgram.__getstate__)."""

    program: Any = None

    def __post_init__(self):
        self._boxed_call = True

    def __call__(self, inputs):
        return self.program(inputs)

    def prepare_for_serialization(self) -> None:
        pass  # nothing traced or compiled is pickled

    def post_compile(self, example_inputs, constants, graph_kwargs) -> None:
        # Called on a cache hit only, once per graph: count entries by their forward or inference graph.
        if not graph_kwargs.get("is_backward"):
            STATS.hits += 1

    def set_triton_bundle(self, triton_bundle) -> None:
        pass


class Key(CustomGraphPass):
    """Never run (inductor does not run for the jax backend); its uuid keys the jax backend's
    AOTAutograd entries apart from inductor's, and by jaxdev's fingerprint."""

    def __call__(self, graph) -> None:
        pass

    def uuid(self) -> str:
        return f"jaxdev-{cache.fingerprint()}"
