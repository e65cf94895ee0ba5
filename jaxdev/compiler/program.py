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

import contextlib
import os
import warnings

import jax
import jax.numpy as jnp
import torch
import torch.fx

from jaxdev import rng, tensor, tracing
from jaxdev.tensor import BOXES, Box

_JAX_TYPE = "jax"


class EagerGraphWarning(UserWarning):
    """A compiled graph runs eagerly on the device because one of its ops cannot be traced."""


class UntraceableGraph(Exception):
    def __init__(self, node: torch.fx.Node | None, reason: str):
        self.node = node
        self.reason = reason
        where = f"{_op_name(node)} (graph node {node.name!r})" if node is not None else "the graph"
        super().__init__(f"{where} cannot run inside one XLA program: {reason}")


def _op_name(node: torch.fx.Node) -> str:
    target = node.target
    if isinstance(target, torch._ops.OpOverload):
        return target.name()
    return getattr(target, "__name__", str(target))


def checks_enabled() -> bool:
    return os.environ.get("JAXDEV_COMPILE_CHECKS", "1") != "0"


# --- the layout of one call's inputs -------------------------------------------------------------


class _Storage:
    """One storage reached by the inputs: a jax box, or a CPU storage moved in for the call."""

    __slots__ = ("storage", "box", "cpu", "numel", "dtype")

    def __init__(self, storage, box: Box | None, cpu: torch.Tensor | None, numel: int, dtype: torch.dtype):
        self.storage, self.box, self.cpu, self.numel, self.dtype = storage, box, cpu, numel, dtype

    def array(self) -> jax.Array:
        return self.box.array if self.box is not None else tensor.from_cpu(self.cpu)

    def store(self, value: jax.Array) -> None:
        if self.box is not None:
            self.box.array = value
            self.box.writes += 1
        else:
            self.cpu.copy_(tensor.to_cpu(value, self.dtype))


def _layout(args):
    """(key, storages, metas). The key fixes everything a traced program depends on: each tensor's
    storage group, dtype, sizes, strides, offset and lazy conj/neg bits, and every other argument."""
    key, metas = [], []
    storages: list[_Storage] = []
    index: dict[int, int] = {}
    for a in args:
        if not isinstance(a, torch.Tensor):
            key.append(a)
            metas.append(None)
            continue
        st = a.untyped_storage()
        ptr = st.data_ptr()
        g = index.get(ptr)
        if g is None:
            g = index[ptr] = len(storages)
            if a.device.type == _JAX_TYPE:
                box = tensor.box_of(a)
                storages.append(_Storage(st, box, None, box.numel, box.dtype))
            elif a.device.type == "cpu":
                # CPU inputs (an optimizer's step count) are traced as device values, so the program
                # does not bake them in as constants; writes are copied back after each call.
                numel = st.nbytes() // a.element_size()
                flat = torch.empty(0, dtype=a.dtype).set_(st, 0, (numel,), (1,))
                storages.append(_Storage(st, None, flat, numel, a.dtype))
            else:
                raise UntraceableGraph(None, f"an input lives on {a.device}")
        s = storages[g]
        meta = (g, a.dtype, tuple(a.shape), a.stride(), a.storage_offset(), a.is_conj(), a.is_neg())
        metas.append(meta)
        key.append((meta, s.numel, s.dtype, s.box is not None))
    return tuple(key), storages, metas


# --- tracing ---------------------------------------------------------------------------------------


class _NodeRunner(torch.fx.Interpreter):
    """Runs the graph node by node, so a failure names the op that caused it."""

    def run_node(self, n):
        try:
            return super().run_node(n)
        except UntraceableGraph:
            raise
        except Exception as e:  # any failure while tracing: the eager run is the reference
            raise UntraceableGraph(n, f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}") from e


@contextlib.contextmanager
def _plain_dispatch():
    """Kernels see the graph's ops as recorded: no autocast (the graph already holds its casts)."""
    with torch.no_grad(), torch.autocast(_JAX_TYPE, enabled=False), torch.autocast("cpu", enabled=False):
        yield


def _expected_devices(gm: torch.fx.GraphModule) -> list[str | None]:
    """The device FakeTensor gave each graph output (CPU inputs are traced on jax, see _layout)."""
    devices = []
    for node in gm.graph.find_nodes(op="output"):
        values = node.args[0] if isinstance(node.args[0], (list, tuple)) else [node.args[0]]
        for v in values:
            val = v.meta.get("val") if isinstance(v, torch.fx.Node) else None
            devices.append(val.device.type if isinstance(val, torch.Tensor) else None)
    return devices


class _Specialisation:
    """The graph traced and compiled for one input layout."""

    def __init__(self, program: GraphProgram, args, storages: list[_Storage], metas):
        self.program = program
        self.arg_meta = metas
        self.static_args = [None if isinstance(a, torch.Tensor) else a for a in args]
        self.storage_meta = [(s.numel, s.dtype) for s in storages]
        # The shape each storage's array had at the first call: later calls pass that shape, so a
        # box reshaped by an eager read does not retrace the program.
        self.array_shapes = [s.array().shape for s in storages]
        # Filled in by the trace (the first call):
        self.outputs: list[tuple] = []
        self.new_storages: list[tuple[int, torch.dtype]] = []
        self.mutated: list[int] = []
        self.draws = 0
        self.checked = False
        self.jitted = jax.jit(self._trace)

    def _trace(self, arrays, rng_base):
        before = set(BOXES)
        try:
            return self._trace_graph(arrays, rng_base)
        finally:
            # Storages made during the trace hold tracers: never leave them where eager code looks.
            for addr in [a for a in BOXES if a not in before]:
                torch.UntypedStorage._free_weak_ref(BOXES.pop(addr).weak)

    def _trace_graph(self, arrays, rng_base):
        boxes = [Box(a, numel, dtype) for a, (numel, dtype) in zip(arrays, self.storage_meta)]
        storages = [tensor.new_storage(b) for b in boxes]
        inputs = []
        for meta, static in zip(self.arg_meta, self.static_args):
            if meta is None:
                inputs.append(static)
                continue
            g, dtype, shape, stride, offset, conj, neg = meta
            t = tensor.tensor_on_storage(storages[g], dtype, shape, stride, offset)
            if conj:
                torch._C._set_conj(t, True)
            if neg:
                torch._C._set_neg(t, True)
            inputs.append(t)
        input_ptrs = [t.untyped_storage().data_ptr() if isinstance(t, torch.Tensor) else None for t in inputs]

        tracing.start_checks()
        try:
            with _plain_dispatch(), rng.traced(rng_base) as drawn:
                outs = _NodeRunner(self.program.gm).run(*inputs)
                draws = drawn.draws
        finally:
            checks = tracing.finish_checks()

        for t, ptr in zip(inputs, input_ptrs):
            if isinstance(t, torch.Tensor) and t.untyped_storage().data_ptr() != ptr:
                raise UntraceableGraph(None, "the graph replaces an input's storage (resize_ or set_)")

        by_ptr = {s.data_ptr(): g for g, s in enumerate(storages)}
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
            meta = (o.dtype, tuple(o.shape), o.stride(), o.storage_offset(), o.is_conj(), o.is_neg())
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
            to_cpu = i < len(wanted) and wanted[i] == "cpu"
            specs.append(("new", k, meta, to_cpu))

        mutated = [g for g, b in enumerate(boxes) if b.writes]
        self.outputs, self.new_storages, self.mutated = specs, new_meta, mutated
        self.draws = draws
        self.checked = bool(checks)
        flag = jnp.any(jnp.stack([jnp.asarray(c) for c in checks])) if checks else None
        return new_arrays, [boxes[g].array for g in mutated], flag

    def run(self, args, storages: list[_Storage]):
        arrays = [s.array() for s in storages]
        for i, (a, shape) in enumerate(zip(arrays, self.array_shapes)):
            if a.shape != shape:
                arrays[i] = a.reshape(shape)
        new_arrays, mutated, flag = self.jitted(arrays, rng.traced_base())
        if self.draws:
            rng.advance(self.draws)
        if flag is not None and checks_enabled() and bool(flag):
            # A value check failed: the eager kernels raise the exception CPU would.
            self.program.run_eagerly(args)
            raise RuntimeError("jaxdev: a compiled program flagged invalid values that eager mode accepted")
        for g, value in zip(self.mutated, mutated):
            storages[g].store(value)
        if self.mutated:
            changed = set(self.mutated)
            for a, meta in zip(args, self.arg_meta):
                if meta is not None and meta[0] in changed:
                    torch.autograd.graph.increment_version(a)
        return self._rebuild(new_arrays, storages)

    def _rebuild(self, new_arrays, storages: list[_Storage]):
        made = [tensor.new_storage(Box(a, numel, dtype)) for a, (numel, dtype) in zip(new_arrays, self.new_storages)]
        results = []
        for spec in self.outputs:
            kind = spec[0]
            if kind == "value":
                results.append(spec[1])
            elif kind == "constant":
                results.append(spec[1].clone())
            elif kind == "new":
                _, k, meta, to_cpu = spec
                t = _on_storage(made[k], meta)
                results.append(t.cpu() if to_cpu else t)
            else:
                _, g, meta = spec
                s = storages[g]
                if s.box is not None:
                    results.append(_on_storage(s.storage, meta))
                else:
                    dtype, shape, stride, offset = meta[:4]
                    results.append(torch.empty(0, dtype=dtype).set_(s.storage, offset, shape, stride))
        return results


def _on_storage(storage, meta) -> torch.Tensor:
    dtype, shape, stride, offset, conj, neg = meta
    t = tensor.tensor_on_storage(storage, dtype, shape, stride, offset)
    if conj:
        torch._C._set_conj(t, True)
    if neg:
        torch._C._set_neg(t, True)
    return t


class GraphProgram:
    """A boxed callable for AOTAutograd: `program(args) -> list of outputs`."""

    def __init__(self, gm: torch.fx.GraphModule, name: str = "graph"):
        self._boxed_call = True  # an instance attribute: wrappers copy __dict__, not class attributes
        self.gm = gm
        self.name = name
        self.output_devices = _expected_devices(gm)
        self.specialisations: dict[tuple, _Specialisation] = {}
        self.eager_reason: str | None = None

    def __call__(self, args):
        args = list(args)
        if self.eager_reason is None:
            try:
                key, storages, metas = _layout(args)
                spec = self.specialisations.get(key)
                if spec is None:
                    spec = self.specialisations[key] = _Specialisation(self, args, storages, metas)
                return spec.run(args, storages)
            except UntraceableGraph as e:
                self.eager_reason = str(e)
                warnings.warn(
                    f"jaxdev: this compiled {self.name} graph runs op by op on the device: {e}",
                    EagerGraphWarning,
                    stacklevel=2,
                )
        return self.run_eagerly(args)

    def run_eagerly(self, args):
        with _plain_dispatch():
            out = self.gm(*args)
        return list(out) if isinstance(out, (list, tuple)) else [out]
