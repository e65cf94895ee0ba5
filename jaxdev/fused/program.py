"""A recorded segment as one cached XLA program.

The segment's ops become an FX graph over its inputs (each op called through the dispatcher, as a
compiled graph's ops are), and `jaxdev/graphs/program.py` traces and jits it: inputs that share a
storage share one traced box, writes into inputs come back as the storages' new values, random ops
draw from the device's state as eagerly, value checks are deferred to the next sync. The graph
returns the first result on each new storage that is still alive at the flush; intermediates that
died are never materialised. A program is cached on the trie node where its segment ended, per set
of live results, and per input layout inside (GraphProgram's specialisations).

Each op is checked while tracing: its results must have the layout recorded for them (recorder's
results were made from it). A segment that cannot run as one program runs op by op, with one warning.
"""

from __future__ import annotations

import functools
import operator
import warnings

import jax
import numpy as np
import torch
import torch.fx
from jax._src.lax.lax import _convert_element_type  # weak_type= has no public spelling

from jaxdev import eager_modes, native, rng, tensor, tracing
from jaxdev.fused import boxes as fused_boxes
from jaxdev.fused import literals, offsets
from jaxdev.fused.learn import NotRecordable
from jaxdev.fused.stats import STATS
from jaxdev.graphs import outputs
from jaxdev.graphs import program as compiled
from jaxdev.programs import compile_effort
from jaxdev.tensor import BOXES

_native_layout = getattr(native.module, "fused_layout", None)  # _layout's loop (jaxdev/csrc/fused_flush.cpp)
_native_arrays = getattr(native.module, "graph_arrays", None)  # _arrays_donated's (jaxdev/csrc/graph_inputs.cpp)


class FusedGraphWarning(UserWarning):
    """Pending fused-eager ops ran one by one because they could not run as one program."""


def run(seg, alive: tuple) -> list:
    """The values of the segment's live new storages, in the order of `seg.pending`."""
    fused = seg.trie.programs.get(alive)
    if fused is None:
        fused = seg.trie.programs[alive] = _Fused(seg, alive)
    return fused.run(seg, alive)


class _Fused:
    def __init__(self, seg, alive):
        self.reason = None
        self.key = self.spec = None  # the last call's input key and its specialisation (_layout reuses it)
        try:
            self.graph = compiled.GraphProgram(_graph(seg, alive), name="fused eager")
        except NotRecordable as e:
            self._give_up(str(e))

    def _give_up(self, reason: str) -> None:
        self.reason = reason
        warnings.warn(f"jaxdev fused eager: pending ops run one by one: {reason}", FusedGraphWarning, stacklevel=5)

    def run(self, seg, alive) -> list:
        if self.reason is None:
            args, inputs = _layout(seg, self.key)
            try:
                # the last call's key itself where nothing differs: no ~500-part key hashed again
                spec = self.spec if inputs.key is self.key else self.graph.specialisations.get(inputs.key)
                if spec is None:
                    spec = self.graph.specialisations[inputs.key] = compiled.Specialisation(self.graph, args, inputs)
                    if spec.spmd is None:  # kernels' numbers as data, as per-op (literals.py)
                        spec.jitted = literals.jit(spec._trace)
                    STATS.programs += 1
                else:
                    STATS.hits += 1
                self.key, self.spec = inputs.key, spec
                return _call(spec, inputs, seg.numbers)
            except tracing.UntraceableGraph as e:
                self.key = self.spec = None
                self.graph.specialisations.pop(inputs.key, None)
                self._give_up(str(e).splitlines()[0])
        return _eagerly(seg, alive)


def _call(spec, inputs, numbers: list) -> list:
    if "fused_checks" not in spec.__dict__ and isinstance(spec.jitted, literals.Lifted):
        _trace_first(spec, inputs, numbers)
    arrays, reshaped, donated = _arrays_donated(spec, inputs, numbers)
    donated = () if reshaped else donated
    base = rng.traced_base()
    # eager layouts, XLA's default effort (a step's program): set without generators, as a compiled call does
    was, layouts, tracing.checks.eager_layouts = compile_effort.enter_whole(), tracing.checks.eager_layouts, True
    try:
        _count(spec, donated)
        if donated:
            run, kept = _donating(spec, donated)
            given, rest = [arrays[g] for g in donated], [arrays[g] for g in kept]
            arrays = arrays if spec.fused_checks else None  # a failed check's rerun: _raise_eagerly
            new_arrays, mutated, flag = run(given, rest, base)
        else:
            new_arrays, mutated, flag = spec.jitted(arrays, base)
    finally:
        tracing.checks.eager_layouts = layouts
        compile_effort.exit_whole(was)
    spec.fused_checks = flag is not None
    if not _new_outputs(spec):
        raise tracing.UntraceableGraph(None, "a result came out on an input's storage")
    if spec.draws:
        rng.advance(spec.draws)
    if flag is not None and "fused_prefetch" not in spec.__dict__:  # asked once, as a compiled call asks
        spec.fused_read = compiled.checks_enabled()
        spec.fused_prefetch = outputs.on_accelerator(flag)
    if flag is not None and spec.fused_read:  # held as a compiled call's flag is (outputs.hold)
        prefetch = spec.fused_prefetch or compiled.PREFETCH_ON_CPU
        outputs.hold(spec, flag, prefetch, functools.partial(_raise_eagerly, spec, arrays, base, donated))
    if spec.mutated:
        inputs.store(spec.mutated, mutated)  # version counters were bumped when the ops were recorded
    return list(new_arrays)


def _arrays_donated(spec, inputs, numbers: list) -> tuple[list, bool, tuple]:
    """_arrays, and the _candidates held by their boxes alone (tested before the call's own references
    exist), in one native pass where every storage is a plain jax one and none is sharded."""
    candidates, boxes = _candidates(spec, inputs), inputs.boxes
    if candidates and _native_arrays and not inputs.cpu and type(boxes) is list and not tensor.SHARDED_ENTRIES:
        got = _native_arrays(boxes, spec.array_shapes, candidates, tensor.EXPORTED, tracing.Tracer)
        if got is not None:
            return (*_arrays(spec, inputs, numbers, got[:2]), got[2])
    donated = tensor.sole_holders(boxes, candidates) if candidates else ()
    return (*_arrays(spec, inputs, numbers), donated)


def _arrays(spec, inputs, numbers: list, got: tuple | None = None) -> tuple[list, bool]:
    """The program's input arrays, and whether one was reshaped to the shape it was traced with
    (`got`: the boxes' arrays and whether each has its traced shape, already read)."""
    shapes = spec.array_shapes
    arrays, same = got or inputs.arrays_checked(shapes)
    if numbers:  # the last storage is the numbers' stand-in: the values go in as host data (see _numbers)
        arrays[-1] = np.asarray(numbers, np.float64)
        same = same and arrays[-1].shape == shapes[-1]
    reshaped = False
    if not same:
        for i, (a, shape) in enumerate(zip(arrays, shapes)):
            if a.shape != shape:
                arrays[i], reshaped = a.reshape(shape), True
    return arrays, reshaped


def _trace_first(spec, inputs, numbers: list) -> None:
    """A new program's trace, before anything compiles: whether it has value checks (its third result)
    and what it overwrites, so that a first call that may donate compiles only the donating program.
    It compiled the plain one first and the donating one at the next call: an optimizer step's program
    twice (AdamW over 100 tensors on a TPU: 25.7 s, then 23.5 s more at the second step)."""
    arrays, _ = _arrays(spec, inputs, numbers)
    base = rng.traced_base()
    with tracing.eager_layouts(True):
        tree = spec.jitted.out_tree(arrays, base)
        spec.fused_checks = tree.children()[2] != jax.tree.structure(None)
        if spec.fused_checks:  # the storages its check flag is computed from (the rest may be donated)
            spec.fused_check_inputs = frozenset(
                i for i in spec.jitted.inputs_of_last_output(arrays, base) if i < len(arrays)
            )
    del arrays  # _arrays_donated counts the references to each input's array
    if not _new_outputs(spec):  # before a donating call gives the inputs the eager rerun needs away
        raise tracing.UntraceableGraph(None, "a result came out on an input's storage")


def _new_outputs(spec) -> bool:
    """Every output of the traced program is on a new storage, in order (asked once per program)."""
    plain = spec.__dict__.get("fused_new_outputs")
    if plain is None:
        plain = spec.fused_new_outputs = all(o[0] == "new" and o[1] == i for i, o in enumerate(spec.outputs))
    return plain


def _candidates(spec, inputs) -> tuple:
    """The input storages a call may give to its program (XLA donation) where nothing but their boxes
    holds their arrays (tensor.sole_holders): those it overwrites (known once traced), on the device,
    which its value checks do not read. A failed check reruns the call's ops eagerly to raise the op's
    own error (_raise_eagerly); the checks read none of the donated storages, so zeros in their place
    leave every check, and so that error, as it was. A training step (an embedding's indices and cross
    entropy's targets checked) then updates its parameters and optimizer state in place, as one without
    checks does."""
    if not spec.mutated:
        return ()
    read = ()
    if spec.__dict__.get("fused_checks", True):
        read = spec.__dict__.get("fused_check_inputs")
        if read is None:  # checks not traced apart (a program that is not literals.jit's): nothing given
            return ()
    cpu = inputs.cpu
    return tuple(g for g in spec.mutated if g not in read and g not in cpu)


def _donating(spec, donated: tuple):
    """spec's program with the storages `donated` given to it, and the indices of the storages kept; one
    jit per set, traced once each (the indices kept with it: an optimizer step's call gives ~300 of
    ~400 storages, and sorting them out by membership every call cost 0.8 ms)."""
    cache = spec.__dict__.setdefault("fused_donating_kept", {})
    entry = cache.get(donated)
    if entry is None:
        given = {g: i for i, g in enumerate(donated)}
        order = [("d", given[g]) if g in given else ("k", None) for g in range(len(spec.storage_meta))]

        def merged(given, kept, base):
            rest = iter(kept)
            return spec._trace([given[i] if kind == "d" else next(rest) for kind, i in order], base)

        kept = [g for g in range(len(spec.storage_meta)) if g not in given]
        entry = cache[donated] = (literals.jit(merged, donate_argnums=(0,)), kept)
    return entry


def _count(spec, donated: tuple) -> None:
    """STATS.programs counts the programs compiled: a spec's first, plain or donating, when the spec was
    made; each other one (another set donated, or none) at its first call."""
    taken = spec.__dict__.setdefault("fused_taken", set())
    if taken and donated not in taken:
        STATS.programs += 1
    taken.add(donated)


def _raise_eagerly(spec, arrays, base, donated: tuple) -> None:
    """A check of the call on `arrays` failed: its ops run eagerly, where the failing kernel raises
    (zeros in the donated storages' places, whose buffers the program took: no check reads them, see
    _candidates; the numbers' host data uploaded). The zeros are made here, on failure, and not as
    placeholders at every call: 230 of them cost a training step 1.3 ms of host time."""
    donated = set(donated)
    arrays = [
        jax.numpy.zeros(a.shape, a.dtype) if g in donated else jax.device_put(a) if isinstance(a, np.ndarray) else a
        for g, a in enumerate(arrays)
    ]
    with eager_modes.as_is():
        spec._raise_eagerly(arrays, base)


def _layout(seg, previous: tuple | None = None) -> tuple[list, compiled.Inputs]:
    """The placeholders' tensors (then the numbers' stand-in) and their compiled.Inputs, from what the
    recorder saw, not asked of every tensor again: each input on the storage and at the place recorded (an
    alias where it no longer is), a jax storage with its box and no conj/neg bit (the recorder took no
    other). `previous`: the key of the program's last call, the key itself where this one's equals it."""
    same, offset = False, len(seg.inputs) + bool(seg.numbers)  # where previous' storage parts start
    if _native_layout is None:
        placed = None
    elif previous is None:
        placed = _native_layout(seg.inputs, seg.input_metas)
    else:  # its metas made of the same objects, as a replayed segment's are: reused (fused_flush.cpp)
        placed = _native_layout(seg.inputs, seg.input_metas, previous, offset)
    if placed is not None:  # every input where it was recorded, every storage boxed: checked natively
        args, (metas, storages, boxes, same), unboxed = list(seg.inputs), placed, False
    else:
        args, metas, storages, boxes, unboxed = _placed(seg)
    if unboxed:
        args = [*args, _numbers(len(seg.numbers))] if seg.numbers else args
        return args, compiled.Inputs(args)
    if seg.numbers:
        t = _numbers(len(seg.numbers))
        args.append(t)
        metas.append((len(storages), t.dtype, t.shape, t.stride(), 0, False, False))
        storages.append(t.untyped_storage())
        boxes.append(tensor.box_of(t))
        same = same and previous[offset - 1] == metas[-1] and previous[-1] == (boxes[-1].numel, boxes[-1].dtype, False)
    inputs = compiled.Inputs.__new__(compiled.Inputs)
    if same and len(previous) == offset + len(boxes):
        inputs.key = previous
    else:
        inputs.key = (*metas, *((b.numel, b.dtype, False) for b in boxes))
    inputs.metas, inputs.storages, inputs.boxes, inputs.cpu = metas, storages, boxes, {}
    inputs.shared = ()  # a written copy-on-write storage was made its own when recorded (fused/cow.py)
    return args, inputs


def _placed(seg) -> tuple:
    """_layout's inputs in Python: (tensors, metas, storages, boxes, whether a storage has no box)."""
    args, metas, storages, boxes, index, unboxed = [], [], [], [], {}, False
    for t, (storage, meta) in zip(seg.inputs, seg.input_metas):
        address = fused_boxes.storage_address(storage)  # a read: a copy-on-write storage stays shared
        if fused_boxes.address(t) != address or (t.dtype, t.shape, t.stride(), t.storage_offset()) != meta:
            t = tensor.tensor_on_storage(storage, *meta)
        args.append(t)
        g = index.get(address)
        if g is None:
            box = BOXES.get(address)
            unboxed = unboxed or box is None  # not a jax storage (cannot be while the segment holds it)
            g = index[address] = len(storages)
            storages.append(storage)
            boxes.append(box)
        metas.append((g, *meta, False, False))
    return args, metas, storages, boxes, unboxed


_NUMBERS: dict[int, torch.Tensor] = {}


def _numbers(n: int) -> torch.Tensor:
    """The stand-in for a segment's n lifted numbers in its program's layout: a float64 tensor of n.
    The call gives the program the values themselves as a NumPy array (_call), which jit moves with
    the other arguments: a jax.device_put of them cost more than the rest of a small flush."""
    t = _NUMBERS.get(n)
    if t is None:
        t = _NUMBERS[n] = tensor.wrap(jax.device_put(np.zeros(n, np.float64)))
    return t


# --- the graph -------------------------------------------------------------------------------------


def _checked(call_op, learned, n, op):
    """Node `n`'s call: the op, and a check that its new results are laid out as recorded."""

    def call(*args, **kwargs):
        out = call_op(*args, **kwargs)
        for m, (position, meta) in learned.firsts.items():
            o = out if position is None else out[position]
            numel = tensor.box_of(o).numel
            if (o.dtype, o.shape, o.stride(), o.storage_offset()) != meta or numel != learned.storages[m][0]:
                raise NotRecordable(f"{op.name()} gave a result laid out otherwise than recorded")
        return out

    call.__name__ = call.__qualname__ = f"fused_{n}_{op.name().replace('::', '_').replace('.', '_')}"
    return call


def _view_of(base: torch.Tensor, dtype, shape, stride, offset) -> torch.Tensor:
    """A tensor on `base`'s storage with the layout a recorded argument had (any view of it: a slice, a
    transpose, `.real` of a complex result)."""
    return tensor.tensor_on_storage(base.untyped_storage(), dtype, tuple(shape), tuple(stride), offset)


def _kernel_of(fn):
    return lambda *args, **kwargs: fn(*args, **kwargs)


def _with_numbers(fn, learned, n, op):
    """Node `n`'s call when some of its arguments are lifted numbers: the kernel itself, called with
    them as traced float64 scalars read from the numbers input (the dispatcher takes no tracer for a
    Scalar); its kernel reads numbers as program data (registry.DYNAMIC_NUMBERS)."""
    check = _checked(_kernel_of(fn), learned, n, op)

    def call(numbers, *args, **kwargs):
        values = tensor.read(numbers)
        if not isinstance(values, jax.core.Tracer):  # a failed check's eager rerun: the kernels take numbers
            values = values.tolist()
        return check(*_numbered(args, values), **{k: _numbered(v, values) for k, v in kwargs.items()})

    call.__name__ = call.__qualname__ = check.__name__ + "_numbers"
    return call


_NUMBER = "__jaxdev_fused_number__"  # a lifted number in the graph (FX writes its arguments as Python source)


def _numbered(a, values):
    if isinstance(a, (list, tuple)):  # FX hands lists over as its immutable_list
        return (tuple if isinstance(a, tuple) else list)(_numbered(x, values) for x in a)
    if type(a) is not str or not a.startswith(_NUMBER):
        return a
    v = values[int(a[len(_NUMBER) :])]
    # Weakly typed, as jit makes a Python float the kernel's body gets in per-op mode: float32 operands
    # times it stay float32 (`a + b * alpha`), where a float64 one would promote them: the same bits.
    return _convert_element_type(v, weak_type=True) if isinstance(v, jax.core.Tracer) else v


def _has_numbers(ref) -> bool:
    if type(ref) is list or type(ref) is tuple:
        return any(map(_has_numbers, ref))
    if type(ref) is dict:
        return any(map(_has_numbers, ref.values()))
    return type(ref).__name__ == "Number"


def _graph(seg, alive) -> torch.fx.GraphModule:
    g = torch.fx.Graph()
    placeholders = [g.placeholder(f"input_{i}") for i in range(len(seg.inputs))]
    numbers = g.placeholder("numbers") if seg.numbers else None
    firsts: dict[tuple, tuple] = {}

    def value(ref):
        if type(ref) is list or type(ref) is tuple:
            return type(ref)(value(r) for r in ref)
        kind = type(ref).__name__
        if kind == "Number":
            return f"{_NUMBER}{ref.index}"
        if kind == "In":
            return placeholders[ref.index]
        if kind == "Moved":
            base = placeholders[ref.base]
            view = g.call_function(
                offsets.window, (numbers, base, ref.index, ref.dtype, list(ref.shape), list(ref.stride), ref.grid)
            )
            moved.append((ref, base, view))
            return view
        if kind == "Made":
            base, meta = firsts[(ref.node, ref.m)]
            if ref.meta == meta:
                return base
            dtype, shape, stride, offset = ref.meta
            return g.call_function(_view_of, (base, dtype, list(shape), list(stride), offset))
        return ref

    for n, (op, refs, krefs, learned, fn) in enumerate(seg.nodes):
        moved: list = []  # the op's Moved arguments: cut out of their storage before it (offsets.window)
        args, kwargs = value(refs), {k: value(r) for k, r in krefs.items()}
        # The kernel itself, with the arguments it was given when recorded (the dispatcher would refuse
        # some: a wrapped number arrives as a Python number, a lifted number as a tracer).
        if _has_numbers(refs) or _has_numbers(krefs):
            v = g.call_function(_with_numbers(fn, learned, n, op), (numbers, *args), kwargs)
        else:
            v = g.call_function(_checked(_kernel_of(fn), learned, n, op), args, kwargs)
        for ref, base, view in moved:  # ...and put back after it, where it wrote them
            if ref.position in learned.writes:
                g.call_function(offsets.write_back, (base, view, numbers, ref.index, ref.grid))
        for m, (position, meta) in learned.firsts.items():
            firsts[(n, m)] = (v if position is None else g.call_function(operator.getitem, (v, position)), meta)
    g.output([firsts[(node, m)][0] for (_, node, m), live in zip(seg.pending, alive) if live])
    return torch.fx.GraphModule(torch.nn.Module(), g)


# --- op by op --------------------------------------------------------------------------------------


def _eagerly(seg, alive) -> list:
    """The segment's ops one by one, their kernels called as when recorded (the dispatcher already did
    its part then: version counters, autograd's graph)."""
    inputs = _layout(seg)[0]  # as recorded (an alias where restrided since), then the numbers' stand-in
    firsts: dict[tuple, torch.Tensor] = {}

    def value(ref):
        if type(ref) is list or type(ref) is tuple:
            return type(ref)(value(r) for r in ref)
        kind = type(ref).__name__
        if kind == "Number":
            return seg.numbers[ref.index]
        if kind == "In":
            return inputs[ref.index]
        if kind == "Moved":
            return offsets.eager_view(inputs[ref.base], ref, seg.numbers)
        if kind == "Made":
            return _view_of(firsts[(ref.node, ref.m)], *ref.meta)
        return ref

    with torch.no_grad(), torch.autocast("jax", enabled=False):
        for n, (_, refs, krefs, learned, fn) in enumerate(seg.nodes):
            out = fn(*value(refs), **{k: value(r) for k, r in krefs.items()})
            for m, (position, _) in learned.firsts.items():
                firsts[(n, m)] = out if position is None else out[position]
    return [tensor.box_of(firsts[(node, m)]).array for (_, node, m), live in zip(seg.pending, alive) if live]
