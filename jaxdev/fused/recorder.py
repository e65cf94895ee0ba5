"""Recording ops into the pending segment, and flushing it (see jaxdev/fused/__init__.py)."""

from __future__ import annotations

import itertools
import threading
import warnings

import torch

from jaxdev import eager_modes, tensor
from jaxdev.fused import at_once, boxes, context, cow, learn, number_keys, numbers, offsets, program, replay, results
from jaxdev.fused.numbers import Number
from jaxdev.fused.stats import STATS
from jaxdev.ops.registry import DYNAMIC_NUMBERS
from jaxdev.tensor import BOXES, Box

_address = boxes.address

# A segment this long is flushed: a loop that never reads a value still runs in bounded programs. From
# half of it on, a segment is cut after an op where an earlier segment was cut by the bound (see _cut).
MAX_OPS = 4096
# A place in the trie followed by this many different ops keeps changing from call to call (a Python
# number that changes every step): what follows it runs op by op instead of compiling every time.
MAX_BRANCHES = 3

_SCALARS = frozenset(
    {int, float, bool, complex, str, type(None), torch.dtype, torch.device, torch.layout, torch.memory_format}
)
_lock = threading.RLock()
# A replayed segment's placeholder index is rebuilt when a key first reads it (an input's slot), not at
# every keyed op: `.item()` of a result after the LM's ~64 replayed forward ops rebuilt ~78 entries its
# key never reads. False rebuilds it at each keyed op (benchmarks/fused_read.py --read item).
LAZY_REFRESH = True


class NotRecordable(Exception):
    pass


class In:
    """An argument that is an input of the program: placeholder `index`."""

    __slots__ = ("index",)

    def __init__(self, index: int):
        self.index = index


class Made:
    """An argument on a storage that node `node` made (its `m`-th new storage), with its own layout."""

    __slots__ = ("m", "meta", "node")

    def __init__(self, node: int, m: int, meta: tuple):
        self.node, self.m, self.meta = node, m, meta


class Trie:
    """What was learned about an op reached by one path of ops (see learn.Learned), and what follows."""

    __slots__ = ("children", "expect", "expected", "learned", "programs", "storming")

    def __init__(self, learned=None):
        self.children: dict = {}
        self.learned = learned
        self.programs: dict = {}
        self.storming: set = set()  # ops that run eagerly here: they change from call to call
        self.expect: dict = {}  # id(op) -> the child it led to last (replay.py: guarded, not keyed)
        self.expected = None  # what replaying this op needs (replay.Expected)


ROOT = Trie()
_CHANGING: set = set()  # ops that were called with ever new numbers somewhere (warned about once)
_VARIANTS: dict = {}  # (op, its tensors' layouts and non-float arguments) -> the sets of floats it had


_SERIALS = itertools.count()


class Segment:
    """The ops recorded since the last flush."""

    def __init__(self):
        self.trie = ROOT
        self.nodes: list[tuple] = []  # (op, args refs, kwargs refs, learned, kernel)
        self.inputs: list[torch.Tensor] = []  # one per placeholder
        self.input_metas: list[tuple] = []  # (storage, (dtype, shape, stride, offset)) when recorded
        self.placeholders: dict[tuple, int] = {}
        self.slots: dict[int, tuple] = {}  # storage address -> ("i", k) | ("p", node, m)
        self.pending: list[tuple[Box, int, int]] = []  # (box, node, m), in order of creation
        self.written: list[Box] = []
        self.stored = 0  # input storages so far
        self.numbers: list[float] = []  # the values of the Number arguments (and of Moved offsets)
        self.moving: dict | None = None  # tensor positions of the op being keyed to record as Moved
        self.uploads: set = set()  # the kinds of host-to-device copies made during the segment (_upload)
        self.serial = next(_SERIALS)
        self.stale = False  # ops were replayed since `placeholders` was last kept up (replay.py)
        self.context = None  # what its ops' kernels read besides their arguments (context.py): one for all

    def refresh(self) -> None:
        """`placeholders` rebuilt from the inputs, after replayed ops added inputs without it."""
        slots = self.slots
        address = boxes.storage_address
        self.placeholders = {(slots[address(s)], meta): i for i, (s, meta) in enumerate(self.input_metas)}
        self.stale = False

    # --- building an op's key -----------------------------------------------------------------

    def ref(self, a, key: list, tensors: list):
        if isinstance(a, torch.Tensor):
            tensors.append(a)
            if self.moving is not None and len(tensors) - 1 in self.moving:
                return self._moved_ref(a, key, len(tensors) - 1)
            return self._tensor_ref(a, key)
        cls = type(a)
        if cls is Number:
            key.append((Number,))
            return a
        if cls is list or cls is tuple:
            key.append((cls, len(a)))
            ref = self.ref
            out = [ref(x, key, tensors) for x in a]
            return out if cls is list else tuple(out)
        if cls is float:  # by bits where == is not (0.0 == -0.0, nan != nan): number_keys.py
            key.append((float, a) if a and a == a else number_keys.float_part(a))
            return a
        if cls is complex:
            key.append(number_keys.complex_part(a))
            return a
        if cls in _SCALARS:
            key.append((cls, a))
            return a
        raise NotRecordable(f"an argument of type {cls.__name__}")

    def _tensor_ref(self, t: torch.Tensor, key: list):
        # No device test (the hot path's dearest call): only jax storages have jaxdev's fake addresses
        # (above 2**52, beyond any real mapping), so a tensor elsewhere has no slot and no box.
        if t.is_conj() or t.is_neg():
            raise NotRecordable("a tensor with a conj/neg bit")
        offset = t.storage_offset()
        address = _address(t)  # boxes.address: leaves a copy-on-write storage shared
        meta = (t.dtype, t.shape, t.stride(), offset)
        slot = self.slots.get(address)
        if slot is None:
            box = BOXES.get(address)
            if type(box) is not Box and type(box) is not boxes.WrittenBox:
                if t.device.type != "jax":
                    raise NotRecordable("a tensor on another device")
                raise NotRecordable("a storage jaxdev does not hold as one box")
            slot = self.slots[address] = ("i", self.stored)
            self.stored += 1
        key.append((slot, meta))
        if slot[0] == "p":
            return Made(slot[1], slot[2], meta)
        if self.stale and LAZY_REFRESH:
            self.refresh()
        index = self.placeholders.get((slot, meta))
        if index is None:
            index = self.placeholders[(slot, meta)] = len(self.inputs)
            self.inputs.append(t)
            self.input_metas.append((t.untyped_storage(), meta))
        return In(index)

    def _moved_ref(self, t: torch.Tensor, key: list, position: int) -> offsets.Moved:
        """`t` read at an offset given to the program as data (jaxdev/fused/offsets.py): its whole
        storage is the placeholder, and the key holds its layout without the offset."""
        _, flat = offsets.base_meta(t)
        base = self._tensor_ref(flat, [])
        grid = offsets.grid(t, self.moving[position])  # keyed: the offsets it admits are on its grid
        key.append((self.slots[boxes.address(t)], (t.dtype, t.shape, t.stride(), offsets.MOVED, grid)))
        self.numbers.append(float(t.storage_offset()))
        return offsets.Moved(base.index, len(self.numbers) - 1, position, t.dtype, tuple(t.shape), t.stride(), grid)

    def mark(self) -> tuple:
        return len(self.inputs), len(self.slots), len(self.placeholders), self.stored, len(self.numbers), self.stale

    def undo(self, mark: tuple) -> None:
        """Forget what building a key added since `mark` (the op is not recorded after all): a program
        is cached by its segment's trie path, and must not meet placeholders that path does not have."""
        inputs, slots, placeholders, self.stored, numbers, stale = mark
        del self.inputs[inputs:], self.input_metas[inputs:], self.numbers[numbers:]
        for key in list(self.slots)[slots:]:
            del self.slots[key]
        if stale:  # the index was stale at the mark (and may have been rebuilt since): rebuilt when next read
            self.stale = True
            return
        for key in list(self.placeholders)[placeholders:]:
            del self.placeholders[key]

    def lift(self, args: tuple, kwargs: dict, lifted: tuple) -> tuple[tuple, dict]:
        """`args` and `kwargs` with the floats at `lifted` (positions, keyword names) as Numbers (numbers.py)."""
        return numbers.lift(self.numbers, args, kwargs, lifted)


_segment = Segment()


def record(op, fn, args, kwargs):
    """A kernel call in fused mode: replayed where the trie expects it (replay.py), else keyed and
    recorded, or run eagerly after the pending work."""
    with _lock:
        seg = _segment
        child = seg.trie.expect.get(id(op))  # by id: an OpOverload's hash is a Python call (replay.expect)
        if child is not None:
            tensors = replay.match(seg, child, args, kwargs)
            if tensors is not None:
                seg.stale = True
                if seg.context is None:  # the guard matched the key's context: the current one
                    seg.context = child.expected.key[1]
                STATS.replayed += 1
                return _recorded(seg, child, tensors, child.expected.node)
        # Asked after the guard: a replayed call is never fresh (its key, which holds what makes a call
        # fresh, is a recorded call's), and the sets' lookups hash the op in Python.
        if op is at_once.TO_COPY:  # a read or an upload runs at once, without its key (at_once.py)
            if at_once.reads(args, kwargs):
                return _eagerly(fn, args, kwargs, op, at_once.READS)
            if at_once.UPLOADS_AT_ONCE and at_once.uploads(args, kwargs):
                return _upload(fn, args, kwargs)
        if not at_once.fresh(op, args, kwargs):
            return _keyed_record(seg, op, fn, args, kwargs)
    return at_once.run_fresh(fn, args, kwargs)


def _recorded(seg: Segment, child: Trie, tensors: list, node: tuple):
    """The op at `child` is in the segment: its results, made as learned."""
    STATS.recorded += 1
    seg.trie = child
    learned = child.learned
    out = results.make(seg, learned, tensors)
    seg.nodes.append(node)
    if len(seg.nodes) >= MAX_OPS >> 1 and (learned.cut or len(seg.nodes) >= MAX_OPS):
        _cut(learned)
    return out


def _keyed_record(seg: Segment, op, fn, args, kwargs):
    """record's way for a call the trie did not expect: its whole key, looked up among the children."""
    if seg.stale and not LAZY_REFRESH:
        seg.refresh()
    settings = context.now()
    if settings is not seg.context:
        if seg.nodes and settings != seg.context:  # settings changed: the ops before ran under the old ones
            flush()
            return record(op, fn, args, kwargs)
        seg.context = settings
    key: list = [op, settings]  # kernels read them: the default dtype for Python floats (int.eq_(0.5)) ...
    tensors: list = []
    lifted, klifted, mark = args, kwargs, seg.mark()
    positions = numbers.where(DYNAMIC_NUMBERS.get(op), args, kwargs)
    if positions:
        lifted, klifted = seg.lift(args, kwargs, positions)
    try:  # the op's key (what _keyed builds, inline on this hot path)
        refs = seg.ref(lifted, key, tensors)
        krefs = {k: seg.ref(v, key, tensors) for k, v in klifted.items()} if kwargs else {}
    except NotRecordable as e:
        seg.undo(mark)
        if op is at_once.TO_COPY and at_once.uploads(args, kwargs):
            return _upload(fn, args, kwargs)
        return _eagerly(fn, args, kwargs, op, str(e))
    key = tuple(key) if not kwargs else (*key, tuple(kwargs))
    child = seg.trie.children.get(key)
    moved = None
    if child is None:  # new here: offsets that moved since an earlier segment become program data
        moved = offsets.moving(key, op, tensors, seg.serial)
        if moved:
            seg.undo(mark)
            key, refs, krefs, tensors = _keyed(seg, op, args, kwargs, moved)
            child = seg.trie.children.get(key)
            STATS.moved += 1
    if child is None:
        if op in seg.trie.storming:
            seg.undo(mark)
            return _eagerly(fn, args, kwargs, op, "the ops here change from call to call")
        child = Trie(learn.cached(key, op, fn, args, kwargs, tensors))
        if moved and offsets.has_views(child.learned):  # its results' offsets are learned: keep it static
            seg.undo(mark)
            offsets.keep_static(key, tensors)
            return record(op, fn, args, kwargs)
        if _segment is not seg:  # learning ran the segment (it must not): record into the new one
            _add_child(seg.trie, key, child, op)
            return record(op, fn, args, kwargs)
        _add_child(seg.trie, key, child, op)
    if child.learned.eager or (child.learned.writes and _writes_inference_tensor(child.learned, tensors)):
        seg.undo(mark)
        reason = child.learned.reason or "it writes an inference tensor (the kernel refuses that)"
        return _eagerly(fn, args, kwargs, op, reason, child.learned)
    if child.learned.writes and cow.unshare(op, args, kwargs, child.learned.writes, tensors, seg, mark, flush):
        return record(op, fn, args, kwargs)  # keyed again, on the storages it now writes
    node = (op, refs, krefs, child.learned, fn)
    if not moved:
        replay.expect(seg.trie, child, seg, key, node, positions, mark[0], tensors)
    return _recorded(seg, child, tensors, node)


def _keyed(seg: Segment, op, args, kwargs, moved: dict) -> tuple:
    """The op's key in the trie, its argument references and its tensor arguments, as record builds
    them, with the tensors at the positions `moved` recorded as offsets.Moved."""
    key: list = [op, seg.context]  # as _keyed_record's
    tensors: list = []
    positions = numbers.where(DYNAMIC_NUMBERS.get(op), args, kwargs)
    if positions:
        args, kwargs = seg.lift(args, kwargs, positions)
    seg.moving = moved
    try:
        refs = seg.ref(args, key, tensors)
        krefs = {k: seg.ref(v, key, tensors) for k, v in kwargs.items()} if kwargs else {}
    finally:
        seg.moving = None
    return (tuple(key) if not kwargs else (*key, tuple(kwargs))), refs, krefs, tensors


def _cut(learned) -> None:
    """The size bound. Cut at the MAX_OPS-th op, a loop that never flushes (no read, no optimizer.step())
    would end each segment at another op of its body (a 7-op body and a bound of 64: 7 cut points), and
    each would be a new program. So an op where the bound once cut is marked (its Learned: the op with its
    arguments' layouts, wherever it comes), and a segment past half the bound is cut right after a marked
    op: the next segments start where the last began, hold the same ops and replay its program."""
    learned.cut = True
    flush()


def _writes_inference_tensor(learned, tensors: list) -> bool:
    """Outside inference mode, a write into an inference tensor raises PyTorch's error in the kernel
    (foreach ops) or the dispatcher; the twins abstract evaluation ran on carry no such flag."""
    return not torch.is_inference_mode_enabled() and any(tensors[i].is_inference() for i in learned.writes)


def _add_child(parent: Trie, key, child: Trie, op) -> None:
    """A new op after `parent`. The same op on the same tensors met with ever new floats its kernel reads
    in Python (a clamp bound that changes every step; numbers.py lifts the others) would compile a new
    program every time: once it has had more
    than MAX_BRANCHES sets of floats anywhere, a new place it reaches runs it eagerly instead (the ops
    around it stay fused). Places already learned keep their programs."""
    parent.children[key] = child
    tensors, floats = [op], []
    for part in key[2:]:
        if type(part) is tuple and type(part[0]) is tuple:
            tensors.append(part[1])  # the layout alone: which storage it is depends on where the segment began
        elif type(part) is tuple and part[0] is float:
            floats.append(part)  # a float that changes (a step size, a scale) makes a variant
        else:
            tensors.append(part)  # sizes, dims, flags: a new one is a new computation, compiled as per-op would
    seen = _VARIANTS.setdefault(tuple(tensors), set())
    if len(seen) <= MAX_BRANCHES:
        seen.add(tuple(floats))
    limit = 1 if op in _CHANGING else MAX_BRANCHES  # seen changing once: taken at its second set here
    if len(seen) > limit and op not in parent.storming:
        parent.storming.add(op)
        if op not in _CHANGING:
            _CHANGING.add(op)
            warnings.warn(
                f"jaxdev fused eager: {op.name()} is called with other numbers every time (a step size that "
                "changes every step?); it runs op by op where it does, the ops around it stay fused",
                stacklevel=4,
            )


def _upload(fn, args, kwargs):
    """A host-to-device copy runs at once and needs no flush: it reads host memory alone and makes a
    new storage no pending op can read, so the segment goes on. STATS.uploads counts them. The same
    copy (dtype and sizes) met again in a segment with ops recorded since is a loop's next step (a
    decoding loop's position tensor): the segment is cut there, so each step is one program that the
    next steps replay (their cache writes at a new position are program data: offsets.py), instead of
    the whole loop unrolled into one program compiled anew for every length."""
    STATS.uploads += 1
    kind = (args[0].dtype, tuple(args[0].shape), kwargs.get("dtype"))
    if kind in _segment.uploads and _segment.nodes:
        flush()  # the same copy again with ops between: a loop's next step starts here (see above)
    _segment.uploads.add(kind)
    with eager_modes.as_is():
        return fn(*args, **kwargs)


def _eagerly(fn, args, kwargs, op, reason: str, learned=None):
    where = (op.name(), reason)
    STATS.eager[where] = STATS.eager.get(where, 0) + 1
    flush()
    if learned is not None and learned.warned:
        return _eagerly_learnt(fn, args, kwargs, learned)
    with eager_modes.as_is():
        return fn(*args, **kwargs)


def _eagerly_learnt(fn, args, kwargs, learned):
    """The eager run of the call that learnt a warning op (learn.learn): its warnings, and those its
    evaluation gave that the run does not give again (a kernel that warns once said it then)."""
    learnt, learned.warned = learned.warned, []
    try:
        with eager_modes.as_is(), warnings.catch_warnings(record=True) as ran:
            warnings.simplefilter("always")
            return fn(*args, **kwargs)
    finally:
        said = {(str(w.message), w.category) for w in ran}
        for w in [*ran, *(w for w in learnt if (str(w.message), w.category) not in said)]:
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno, source=w.source)


def flush() -> None:
    """Run the pending ops as one program and give every live result its value."""
    global _segment
    with _lock:
        seg = _segment
        _segment = Segment()
        if not seg.nodes:
            return
        boxes.unwrite_all(seg.written)
        alive = boxes.alive(seg.pending)
        STATS.flushes += 1
        with eager_modes.as_is(), context.applied(seg.context):  # the settings its ops were recorded under
            try:
                values = program.run(seg, alive)
            except BaseException as error:
                for box, _, _ in seg.pending:
                    if boxes.is_deferred(box):
                        boxes.fail(box, f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}")
                tensor.raise_if_out_of_memory(error)  # torch.OutOfMemoryError, as per-op mode raises it
                raise
        boxes.settle_all(seg.pending, alive, values)


def pending_ops() -> int:
    return len(_segment.nodes)
