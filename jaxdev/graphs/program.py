"""An FX graph of aten ops, run as one jitted JAX program over its inputs' storages.

AOTAutograd hands the `jax` backend functional graphs of aten ops (a forward, a backward, or an
inference graph). `GraphProgram` runs one of them inside `jax.jit` through jaxdev's own kernels —
one set of kernels, two execution modes. Tracing builds, for each input, a jax tensor with the
input's real sizes, strides and offset whose storage box holds a JAX tracer instead of an array;
every aten op of the graph then reaches its usual kernel through the dispatcher, and the kernels'
jnp calls become one XLA program.

Storages, not tensors, are what cross the program's boundary, so the aliasing model stays exact:
* inputs that share a storage (views of one base) share one traced box, so a write through one is
  seen by the others, as in eager mode;
* a write into an input (BatchNorm's running stats, an optimizer's in-place update, `copy_` into a
  buffer) is found by the box's write counter; the program returns the storage's new values and the
  runner stores them into the real box and bumps the inputs' version counters;
* an output on an input's storage is rebuilt as a view of the real storage; outputs that share a
  new storage are rebuilt on one new storage.

Shapes are static in XLA: a call whose inputs differ in layout (sizes, strides, offsets, dtypes,
aliasing, or Python scalars such as the sizes dynamo passes under `dynamic=True`) gets its own
specialisation, traced and compiled once and cached.

A graph that cannot be traced (an op whose kernel needs concrete values, an op that runs through the
CPU fallback) runs eagerly on the device, op by op, with one warning that names the op: slower, and
exactly right.
"""

from __future__ import annotations

import functools
import os
import threading
import time
import warnings

import jax
import jax.numpy as jnp
import torch
import torch.fx

from jaxdev import eager_modes, rng, tensor, tracing
from jaxdev.graphs import graph_ops, outputs, planned, program_cache
from jaxdev.graphs import inputs as graph_inputs
from jaxdev.graphs.inputs import Guard, Inputs, Matched
from jaxdev.parallel import compiled_collectives
from jaxdev.programs import compile_effort
from jaxdev.tensor import BOXES, Box
from jaxdev.tracing import UntraceableGraph

_JAX_TYPE = "jax"
# A program whose value check failed is being rerun eagerly, where its kernels raise (thread-local).
_rerun = threading.local()


class EagerGraphWarning(UserWarning):
    """A compiled graph runs eagerly on the device because one of its ops cannot be traced."""


class STATS:
    """Programs traced and compiled in this process, and the seconds their first calls took (trace,
    XLA compile or persistent-cache load, first run): what jaxdev adds to a first compiled step."""

    programs = 0
    seconds = 0.0
    calls = 0  # graph calls that ran as their own program (not joined to fused eager's segment)


class RecompileLimitWarning(UserWarning):
    """A compiled graph met more input layouts than the recompile limit: new ones run op by op."""


def _limit() -> int:
    """Programs one graph may build, one per input layout: dynamo's own recompile limit (8 by
    default), which bounds dynamo's graphs but not the sizes a `dynamic=True` graph is called with."""
    import torch._dynamo.config

    return torch._dynamo.config.recompile_limit


def checks_enabled() -> bool:
    return os.environ.get("JAXDEV_COMPILE_CHECKS", "1") != "0"


# A call's value-check flag is read at the next call or sync (tracing.defer_check). Where the program
# runs on an accelerator its host copy starts at once, so that the read finds the flag on the host; on
# a CPU device the flag is host memory already, and the asynchronous copy cost the LM's batch-1 forward
# ~40 us of its ~550 (benchmarks/compiled_latency.py --compare prefetch).
PREFETCH_ON_CPU = False
# A call is matched to a specialisation's layout natively first (jaxdev/csrc/graph_match.cpp): where
# placing its arguments, hashing the placement and dynamo's tensor check took ~80 us of the LM's batch-1
# forward in Python (benchmarks/compiled_latency.py --compare match). False: Inputs and Guard only.
NATIVE_MATCH = True


class Specialisation:
    """The graph traced and compiled for one input layout."""

    def __init__(self, program: GraphProgram, args, inputs: Inputs):
        self.program = program
        self.arg_meta = inputs.metas
        self.static_args = [None if isinstance(a, torch.Tensor) else a for a in args]
        self.storage_meta = [(b.numel, b.dtype) for b in inputs.boxes]
        # The shape each storage's array had at the first call: later calls pass that shape, so a
        # box reshaped by an eager read does not retrace the program.
        self.array_shapes = [a.shape for a in inputs.arrays()]
        # Filled in by the trace (the first call):
        self.outputs: list[tuple] = []
        self.new_storages: list[tuple[int, torch.dtype]] = []
        self.mutated: list[int] = []
        self.bumped: list[int] = []  # arguments whose version counter a call bumps
        self.wrapped: list[bool] = []  # new storages whose one output the native wrap makes (outputs.sole_outputs)
        self.draws = 0
        # Set by the first call: whether calls read the program's check flag (JAXDEV_COMPILE_CHECKS, read
        # once, not at every call), and start its host copy at once (not on a CPU device)
        self.read_checks = True
        self.prefetch = True
        self.keyed = False  # its native key made (GraphProgram._guard)
        self.spmd = compiled_collectives.plan(program.gm)  # a graph with collectives: one program per rank
        self.jitted = jax.jit(self._trace) if self.spmd is None else self.spmd.jit(self._trace)

    def _trace(self, arrays, rng_base):
        with tensor.scratch():
            return self._trace_graph(arrays, rng_base)

    def _trace_graph(self, arrays, rng_base):
        boxes = [Box(a, numel, dtype) for a, (numel, dtype) in zip(arrays, self.storage_meta)]
        storages = [tensor.new_storage(b) for b in boxes]
        inputs = []
        for meta, static in zip(self.arg_meta, self.static_args):
            inputs.append(static if meta is None else outputs.on_storage(storages[meta[0]], meta[1:]))
        input_ptrs = [t.untyped_storage().data_ptr() if isinstance(t, torch.Tensor) else None for t in inputs]

        tracing.start_checks(snapshot=lambda: [(b._array, b.logical) for b in boxes])
        try:
            with graph_ops.plain_dispatch(), rng.traced(rng_base) as drawn:
                outs = graph_ops.NodeRunner(self.program.gm, self.spmd).run(*inputs)
                draws = drawn.draws
        finally:
            checks = tracing.finish_checks()
            states = tracing.states_at_checks()

        for t, ptr in zip(inputs, input_ptrs):
            if isinstance(t, torch.Tensor) and t.untyped_storage().data_ptr() != ptr:
                raise UntraceableGraph(None, "the graph replaces an input's storage (resize_ or set_)")

        by_ptr = {s.data_ptr(): g for g, s in enumerate(storages)}
        given = {id(t): i for i, t in enumerate(inputs) if isinstance(t, torch.Tensor)}
        new_index: dict[int, int] = {}
        new_arrays, new_meta, specs = [], [], []
        outs = outs if isinstance(outs, (list, tuple)) else [outs]
        wanted = self.program.output_devices
        for i, o in enumerate(outs):
            if not isinstance(o, torch.Tensor):
                if tracing.is_traced(o):
                    raise UntraceableGraph(None, "the graph returns a traced Python scalar")
                specs.append(("value", o))
                continue
            if o.device.type != _JAX_TYPE:
                specs.append(("constant", o.detach().clone()))
                continue
            arg = given.get(id(o))
            if arg is not None and inputs[arg] is o:  # an argument returned as it is (a primal saved for backward)
                specs.append(("arg", arg))
                continue
            meta = (o.dtype, o.shape, o.stride(), o.storage_offset(), o.is_conj(), o.is_neg())
            ptr = o.untyped_storage().data_ptr()
            if ptr in by_ptr:
                specs.append(("input", by_ptr[ptr], meta))
                continue
            k = new_index.get(ptr)
            if k is None:
                k = new_index[ptr] = len(new_arrays)
                box = BOXES[ptr]
                new_arrays.append(box.array)
                new_meta.append((box.numel, box.dtype))
            specs.append(("new", k, meta, i < len(wanted) and wanted[i] == "cpu"))

        mutated = [g for g, b in enumerate(boxes) if b.writes]
        self.outputs, self.new_storages, self.mutated = specs, new_meta, mutated
        self.wrapped = (
            outputs.sole_outputs(specs, new_arrays, new_meta) if self.program.wrap_outputs else [False] * len(new_meta)
        )
        self.bumped = [i for i, m in enumerate(self.arg_meta) if m is not None and m[0] in set(mutated)]
        self.draws = draws
        flag = jnp.any(jnp.stack([jnp.asarray(c) for c in checks])) if checks else None
        if not checks_enabled():  # no check is read: nothing may hang on one (JAXDEV_COMPILE_CHECKS=0)
            return new_arrays, [boxes[g].array for g in mutated], flag
        either: dict = {}  # (first, last) check -> their flags or-ed, made once for all storages
        return new_arrays, [outputs.as_before_failure(checks, states, boxes, g, either) for g in mutated], flag

    def run(self, args, inputs: Inputs, first: bool = False):
        arrays = inputs.arrays_as(self.array_shapes)
        # A program that draws nothing never reads the state: a constant already on the device, not
        # the state's three numbers moved there at every call.
        base = rng.traced_base() if first or self.draws or self.spmd is not None else outputs.no_draws(arrays)
        was = compile_effort.enter_whole()  # a graph's program: XLA's default effort
        try:
            # the program from jaxdev's disk cache, or traced, exported and stored there
            if first and self.spmd is None:
                program_cache.install(self, inputs, arrays, base)
            new_arrays, mutated, flag = self.jitted(arrays, base)
        finally:
            compile_effort.exit_whole(was)
        if first:
            self.read_checks = checks_enabled()
            self.prefetch = flag is not None and outputs.on_accelerator(flag)
        if self.draws:
            rng.advance(self.draws)
        if flag is not None and self.read_checks:  # read at the next call or sync (outputs.hold)
            prefetch = self.prefetch or PREFETCH_ON_CPU
            outputs.hold(self, flag, prefetch, functools.partial(self._raise_eagerly, arrays, base))
        if self.mutated:
            inputs.store(self.mutated, mutated)
            if not self.program.caller_bumps:
                torch._C._increment_version([args[i] for i in self.bumped])
        return outputs.rebuild(self, new_arrays, args, inputs)

    def _raise_eagerly(self, arrays, base) -> None:
        """A check of the call on `arrays` failed: run that call eagerly, where the kernel raises."""
        if self.spmd is not None:  # its eager run would wait in collectives that no other rank joins
            raise RuntimeError(
                f"jaxdev: the compiled {self.program.name} program flagged invalid input values (an index out "
                "of range, ...); it holds collectives, so it is not rerun eagerly to name the op: run it eagerly"
            )
        storages = [tensor.new_storage(Box(a, numel, dtype)) for a, (numel, dtype) in zip(arrays, self.storage_meta)]
        inputs = [
            s if m is None else outputs.on_storage(storages[m[0]], m[1:])
            for m, s in zip(self.arg_meta, self.static_args)
        ]
        _rerun.on = True  # graphs recorded into it (fused eager) rerun op by op too, so they raise
        try:
            with graph_ops.plain_dispatch(), rng.traced(jnp.asarray(base)):
                self.program.gm(*inputs)
        finally:
            _rerun.on = False
        raise RuntimeError(
            f"jaxdev: the compiled {self.program.name} program flagged invalid input values that its eager run accepted"
        )


def _nested() -> bool:
    """Inside a kernel, a flush or a trace: a graph called there runs as it is."""
    return eager_modes.inside() or tracing.tracing_now() or tensor.in_scratch()


class _GraphOp:
    """What fused eager's recorder keys, names and tags a compiled graph's call by (an op's stand-in)."""

    __slots__ = ("_name", "gm")
    tags = ()

    def __init__(self, program: GraphProgram):
        self._name = f"compiled {program.name} graph"
        self.gm = program.gm  # which arguments it writes (fused/cow.py)

    def name(self) -> str:
        return self._name


class GraphProgram:
    """A boxed callable for AOTAutograd: `program(args) -> list of outputs`."""

    def __init__(self, gm: torch.fx.GraphModule, name: str = "graph", wrap_outputs: bool = False, caller_bumps=False):
        self._boxed_call = True  # an instance attribute: wrappers copy __dict__, not class attributes
        self.gm = gm
        self.name = name
        # AOTAutograd's runtime wrapper bumps the version counter of each input a forward or inference
        # graph writes (keep_input_mutations), once, as eager's write does: then the program does not.
        self.caller_bumps = caller_bumps
        # outputs made by the native wrap where they can be (outputs.sole_outputs); fused eager takes its
        # programs' arrays as they are
        self.wrap_outputs = wrap_outputs
        self.output_devices = planned.expected_devices(gm)
        self.specialisations: dict[tuple, Specialisation] = {}
        self.guards: dict[tuple, list[tuple[Guard, Specialisation]]] = {}  # by Inputs.placed
        self.keys: list[tuple[object, Specialisation]] = []  # native keys (graph_match.cpp), one per specialisation
        self.eager_reason: str | None = None
        self.limit_warned = False
        self.op = _GraphOp(self)

    def __getstate__(self):
        """AOTAutograd's cache pickles a program as its graph: nothing traced or compiled. Node
        metadata does not survive pickling, so what the trace reads of it is kept: the output
        devices, and each node's planned layout (`planned.py`) as a meta tensor."""
        vals = [planned.planned_val(n.meta.get("val")) for n in self.gm.graph.nodes]
        return {
            "gm": self.gm,
            "name": self.name,
            "wrap_outputs": self.wrap_outputs,
            "caller_bumps": self.caller_bumps,
            "output_devices": self.output_devices,
            "vals": vals,
        }

    def __setstate__(self, state):
        self.__init__(state["gm"], state["name"], state.get("wrap_outputs", False), state.get("caller_bumps", False))
        self.output_devices = state["output_devices"]
        nodes = list(self.gm.graph.nodes)
        if len(nodes) == len(state["vals"]):  # the same graph, node for node
            for node, val in zip(nodes, state["vals"]):
                if val is not None:
                    node.meta["val"] = val

    def __call__(self, args):
        args = list(args)
        mode = eager_modes.ACTIVE
        if mode.on and self.eager_reason is None and not _nested():
            return mode.handler.graph(self, args)  # fused eager: the call joins the pending segment
        return self.run(args)

    def recorded(self, *args):
        """The graph as fused eager calls it: its ops inline while fused eager traces or evaluates it,
        else (it could not be recorded) the compiled program as outside fused mode."""
        if tracing.tracing_now() or tensor.in_scratch():
            # Through fx's interpreter, not gm's own forward: a flush can come inside a compiled frame,
            # where dynamo would compile the graph module's forward as user code.
            # Its ops lay out their results as the graph planned them (meta strides), as when compiled alone.
            with tracing.eager_layouts(False), graph_ops.plain_dispatch():
                out = graph_ops.versions_kept(self, args, lambda: torch.fx.Interpreter(self.gm).run(*args))
            return list(out) if isinstance(out, (list, tuple)) else [out]
        if getattr(_rerun, "on", False):
            return self.run_eagerly(list(args))
        return self.run(list(args))

    def run(self, args):
        STATS.calls += 1
        if self.eager_reason is None:
            try:
                if NATIVE_MATCH:
                    for key, spec in self.keys:
                        got = graph_inputs.native_match(key, args)
                        if got is not None:
                            return spec.run(args, Matched(got))
                inputs = Inputs(args, full=False)
                spec = self._guarded(inputs)
                if spec is None:
                    inputs.complete(args)
                    spec = self.specialisations.get(inputs.key)
                    if spec is None:
                        if len(self.specialisations) >= _limit():
                            self._warn_limit()
                            return self.run_eagerly(args)
                        return self._first_call(args, inputs)
                    self._guard(inputs, spec)
                return spec.run(args, inputs)
            except UntraceableGraph as e:
                self.eager_reason = str(e).splitlines()[0]  # torch.fx appends the node's source lines
                warnings.warn(
                    f"jaxdev: this compiled {self.name} graph runs op by op on the device: {self.eager_reason}",
                    EagerGraphWarning,
                    stacklevel=2,
                )
        return self.run_eagerly(args)

    def _first_call(self, args, inputs: Inputs):
        began = time.perf_counter()
        spec = self.specialisations[inputs.key] = Specialisation(self, args, inputs)
        out = spec.run(args, inputs, first=True)  # traces (or loads) and compiles
        STATS.programs += 1
        STATS.seconds += time.perf_counter() - began
        self._guard(inputs, spec)
        return out

    def _guarded(self, inputs: Inputs) -> Specialisation | None:
        """The specialisation for a call placed as `inputs` whose tensors pass its guard."""
        for guard, spec in self.guards.get(inputs.placed, ()):
            if guard.passes(inputs.tensors):
                return spec
        return None

    def _guard(self, inputs: Inputs, spec: Specialisation) -> None:
        """Later calls placed and laid out as `inputs` find `spec` by its guard. A guard fails where
        the key would not (another dispatch state: autocast, inference mode), which adds one more:
        a bounded number per placement."""
        entries = self.guards.setdefault(inputs.placed, [])
        guard = Guard.of(inputs.tensors) if len(entries) < 2 * _limit() else None
        if guard is not None:
            entries.append((guard, spec))
        if not inputs.cpu and not spec.keyed and spec.spmd is None:  # CPU inputs are placed in Python
            spec.keyed = True
            key = graph_inputs.native_key(spec.arg_meta, spec.static_args, spec.storage_meta, spec.array_shapes)
            if key is not None:
                self.keys.append((key, spec))

    def _warn_limit(self) -> None:
        if not self.limit_warned:
            self.limit_warned = True
            warnings.warn(
                f"jaxdev: this compiled {self.name} graph was called with {_limit()} input layouts (sizes, "
                "strides, dtypes; under dynamic=True every new size is one), each compiled as its own XLA "
                "program; calls with a new layout now run op by op on the device. The limit is dynamo's "
                "own, torch._dynamo.config.recompile_limit: raise it to compile more",
                RecompileLimitWarning,
                stacklevel=3,
            )

    def run_eagerly(self, args):
        with graph_ops.plain_dispatch():
            out = graph_ops.versions_kept(self, args, lambda: self.gm(*args))
        return list(out) if isinstance(out, (list, tuple)) else [out]
