"""The dynamo backend `"jax"`: `torch.compile(model, backend="jax")`.

AOTAutograd captures the forward and backward (or inference) graphs as aten ops over jax tensors;
each graph becomes one `GraphProgram`, a jitted JAX program run through jaxdev's own kernels.
AOTAutograd keeps what a backend should not redo: autograd (its partitioned graphs hand the backward
what the forward saved), functionalization, and the epilogue that applies input mutations of training
graphs and regenerates outputs that alias inputs. Inference graphs keep their input mutations inside
(`keep_inference_input_mutations`), so a BatchNorm in eval-with-update or a buffer `copy_` is one
program, written back by the program's runner.

AOTAutograd's results are cached on disk between processes (`aot_cache.py`): a second process
compiling the same model skips AOTAutograd's tracing and partitioning.
"""

from __future__ import annotations

from jaxdev.compiler import aot_cache, scalar_lists
from jaxdev.compiler.stats import STATS
from jaxdev.graphs.program import GraphProgram

NAME = "jax"


def _compiler(kind: str):
    def compile_graph(gm, example_inputs):
        STATS.compiled += kind != "backward"
        scalar_lists.batch(gm)  # before the program pickles it: a cached graph is the rewritten one
        return aot_cache.wrap(GraphProgram(gm, kind, wrap_outputs=True, caller_bumps=kind != "backward"))

    compile_graph.__name__ = f"jax_{kind}_compiler"
    return aot_cache.serializable(compile_graph)


def _aot_backend():
    """A fresh AOTAutograd backend per dynamo graph, not one cached: for a SerializableAOTDispatchCompiler
    bw_compiler, torch's aot_autograd wraps `compiler_fn` in its `_wrapped_bw_compiler` again on every
    call (torch/_dynamo/backends/common.py), so a shared one nested one more wrapper per compiled graph
    and raised RecursionError after ~490 graphs in one process (the coverage gate's workers)."""
    from torch._dynamo.backends.common import aot_autograd

    return aot_autograd(
        fw_compiler=_compiler("forward"),
        bw_compiler=_compiler("backward"),
        inference_compiler=_compiler("inference"),
        keep_inference_input_mutations=True,
    )


def jax_backend(gm, example_inputs, **kwargs):
    """Dynamo backend: compile the graph dynamo captured into jitted JAX programs."""
    with aot_cache.caching():
        return _aot_backend()(gm, example_inputs, **kwargs)
