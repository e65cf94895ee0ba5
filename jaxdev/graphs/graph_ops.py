"""A compiled graph's ops run as ops: traced node by node into the graph's program (`NodeRunner`), or
run eagerly on the device (a graph that cannot be traced, a failed value check's rerun, fused eager's
recording), with dispatch as the graph was recorded."""

from __future__ import annotations

import contextlib

import torch
import torch.fx

from jaxdev.graphs import planned
from jaxdev.parallel import compiled_collectives
from jaxdev.tracing import UntraceableGraph

_JAX_TYPE = "jax"


class NodeRunner(torch.fx.Interpreter):
    """Runs the graph node by node, so a failure names the op that caused it, each new result laid out
    as the graph was planned (graphs/planned.py)."""

    def __init__(self, gm, spmd=None):
        super().__init__(gm)
        self.seen: set[int] = set()  # storages of the inputs and of the results so far
        self.spmd = spmd  # inside a shard_map: the functional collectives become XLA's (compiled_collectives.py)
        self.node = None

    def call_function(self, target, args, kwargs):
        if self.spmd is not None and compiled_collectives.is_collective(target):
            return self.spmd.lower(self.node, args, kwargs, self.env)
        return super().call_function(target, args, kwargs)

    def run_node(self, n):
        self.node = n
        try:
            out = super().run_node(n)
        except UntraceableGraph:
            raise
        except Exception as e:  # any failure while tracing: the eager run is the reference
            raise UntraceableGraph(n, f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}") from e
        if n.op == "call_function":
            return planned.as_planned(n, out, self.seen)
        if isinstance(out, torch.Tensor):
            self.seen.add(out.untyped_storage().data_ptr())
        return out


def versions_kept(program, args, run):
    """`run()`, the graph's ops run as ops on `args`: where AOTAutograd bumps the written inputs'
    version counters after the call (`caller_bumps`), the counters the ops bumped are set back."""
    if not program.caller_bumps:
        return run()
    tensors = [a for a in args if isinstance(a, torch.Tensor) and not a.is_inference()]
    versions = [t._version for t in tensors]
    out = run()
    torch._C._autograd._unsafe_set_version_counter(tensors, versions)
    return out


@contextlib.contextmanager
def plain_dispatch():
    """Kernels see the graph's ops as recorded: no autocast (the graph already holds its casts)."""
    with torch.no_grad(), torch.autocast(_JAX_TYPE, enabled=False), torch.autocast("cpu", enabled=False):
        yield
