"""Per-op eager's commonest kernels replayed natively per key (issue 37 item 4): the learning side.

The native kernel (jaxdev/csrc/memo_ops.cpp) keys each call of an op in OPS by all its kernel reads:
its arguments' metadata, numbers and storages' boxes, and fused eager's context (default dtype,
deterministic algorithms, threads, matmul precision, warn-always). A key met before is replayed without
a Python frame: the one jitted program the Python kernel ran for it, called on the arguments' stored
arrays, its outputs made into the op's results as the kernel made them. On the LM's op stream the
Python kernel and the dispatcher's boxing into it cost 3x the program's own call (addmm: 30 us against
6; benchmarks/op_stream.py).

A key not met yet runs the Python kernel, and `learning` watches it: what it passes to `on_views`'s
program (`record`), and whether it warns. It learns only where the kernel's whole effect was that one
call: every array fed to the program is one argument's stored array (or a view offset constant), every
result a fresh tensor over one of its outputs (or over an array the kernel makes once: `CONSTANTS`), no
second program through on_views, no warning shown (a replayed op would not warn again). Anything else
runs the Python kernel every time. So an op belongs in OPS only if its kernel's checks read shapes,
dtypes and numbers alone (never a tensor's values: those would be skipped) and it writes nothing: pure
functions of what the key holds.
"""

from __future__ import annotations

import contextlib
import warnings

import jax
import torch

from jaxdev import dtypes, eager_modes, native, tensor

# Ops whose kernels are such functions (each read for value checks, writes and randomness).
OPS = frozenset(
    {
        "aten::add.Tensor",
        "aten::sub.Tensor",
        "aten::mul.Tensor",
        "aten::addmm",
        "aten::mm",
        "aten::bmm",
        "aten::sum.dim_IntList",
        "aten::gelu",
        "aten::gelu_backward",
        "aten::_log_softmax",
        "aten::_softmax",
        "aten::_log_softmax_backward_data",
        "aten::_softmax_backward_data",
        "aten::native_layer_norm",
        "aten::native_layer_norm_backward",
        "aten::cat",
        "aten::_scaled_dot_product_fused_attention_overrideable",
        "aten::_scaled_dot_product_fused_attention_overrideable_backward",
        "aten::slice_backward",
    }
)

# id -> array: arrays a kernel makes once and puts in fresh results at every call (attention's
# placeholders), which a replay may do too.
CONSTANTS: dict[int, jax.Array] = {}


def constant(array: jax.Array) -> jax.Array:
    """`array`, made once by a kernel and kept for the life of the process, marked as such."""
    CONSTANTS[id(array)] = array
    return array


class _Recording:
    calls: list | None = None  # while a kernel is learned: each program call on_views made


RECORDING = _Recording()


class _Stats:
    slow = 0  # per-op mode's calls of a memo op's Python kernel (a key not met yet, or one never learned)
    learned = 0  # keys learned


STATS = _Stats()


def not_learned() -> None:
    """Said by a kernel that hands this call to other ops (a composite): a memo kernel learning it must
    not take their programs for the call's own."""
    if RECORDING.calls is not None:
        RECORDING.calls.append(None)


def record(program, values, extra, offsets=()):
    """`program(*values, *extra)` for on_views while a kernel is being learned, noted with the positions
    of `values` that are view offsets (constants of the key)."""
    out = program(*values, *extra)
    RECORDING.calls.append((program, values, extra, offsets, out))
    return out


def wanted(op) -> bool:
    return native.module is not None and op.name() in OPS


def install(op, fn, fast=None):
    """`op`'s native kernel (registry._register), `fn` (the Python kernel) its slow path: `fast(slow)`
    installs an op's own (an elementwise op's fast kernel, clone's), the memo kernel another where the
    op is in OPS; the memo kernel is the fast kernel's slow path where both are (add.Tensor of a view)."""
    from jaxdev.ops.kit.native_kernels import defined, slow_path

    if op.name() not in OPS:
        slow_path(op, fn, fast)
        return
    setup()
    index: list[int] = []
    under = defined(op) if fast is not None else op.name()  # where the memo kernel goes
    learn = learning(fn, index)
    slow_path(op, learn, lambda slow: index.append(native.module.register_memo_kernel(under, slow)), "jaxdev_memo")
    if fast is not None:
        fast(under)


def setup() -> None:
    """What the native memo (and foreach) kernels read, given once."""
    if not _setup:
        # jax's concrete array class, named without making an array (which would start the backend and
        # compile at import); it has no public spelling
        from jax._src.array import ArrayImpl

        native.module.set_memo(ArrayImpl, tensor.SHARDED_ENTRIES)
        _setup.append(ArrayImpl)


_setup: list = []


@contextlib.contextmanager
def warnings_shown():
    """The warnings shown inside (a list), each still shown through whatever shows warnings now: a
    call that warned is not learned (a replay would not warn again)."""
    shown = warnings._showwarnmsg
    seen: list = []

    def showing(message):
        seen.append(message)
        return shown(message)

    warnings._showwarnmsg = showing
    try:
        yield seen
    finally:
        warnings._showwarnmsg = shown


def learning(fn, index: list):
    """`fn` as the memo kernel's slow path: where the native kernel is learning this call (memo_begin
    gives the arguments' stored arrays it keyed), the call is watched and what it did is learned."""
    begin, learn = native.module.memo_begin, native.module.memo_learn
    active = eager_modes.ACTIVE

    def kernel(*args, **kwargs):
        # In fused or sync mode every native kernel takes its slow path unkeyed (set_python_kernels): no
        # frame is open to learn from, so the call goes straight on (a fused forward's ~40 replayed memo
        # ops: ~30-40 us less of the LM's ~2.1 ms batch-1 recording, benchmarks/fused_read.py's model).
        if active.on:
            return fn(*args, **kwargs)
        STATS.slow += 1
        arrays = begin(index[0])
        if arrays is None:
            return fn(*args, **kwargs)
        calls, previous = [], RECORDING.calls
        RECORDING.calls = calls
        try:
            with warnings_shown() as seen:
                out = fn(*args, **kwargs)
        finally:
            RECORDING.calls = previous
        if not seen and len(calls) == 1 and calls[0] is not None:
            learned = _learned(calls[0], arrays, args, kwargs, out)
            if learned is not None:
                STATS.learned += learn(index[0], *learned)
        return out

    kernel.__qualname__ = getattr(fn, "__qualname__", "kernel")
    kernel.__wrapped__ = fn
    return kernel


def _learned(call, arrays: tuple, args, kwargs, out):
    """(program, several, plan, gives) for memo_learn, or None where the call was more than that."""
    program, values, extra, offsets, result = call
    plan = []
    for j, v in enumerate((*values, *extra)):
        if j in offsets or v is None or type(v) in (int, float, bool):
            plan.append((v,))
            continue
        hits = [i for i, a in enumerate(arrays) if a is v]
        if not hits:  # made otherwise (another program's output): not this call's arguments
            return None
        plan.append(hits[0])  # arguments holding the same array do so under this key at every call
    several = isinstance(result, (tuple, list))
    outputs = tuple(result) if several else (result,)
    gives = _gives(outputs, out, _storages(args, kwargs))
    return None if gives is None else (program, several, tuple(plan), gives)


def _storages(args, kwargs) -> set:
    found = set()
    for a in (*args, *kwargs.values()):
        for t in a if isinstance(a, (list, tuple)) else (a,):
            if isinstance(t, torch.Tensor):
                found.add(torch._C._data_address(t))
    return found


def _gives(outputs: tuple, out, inputs: set):
    gives, made = [], []  # made: the tensor (or None) results so far, as the replay counts them
    for r in out if isinstance(out, tuple) else (out,):
        if type(r) is int:
            gives.append(("i", r))
            continue
        if r is None:
            give = ("n",)
        elif any(r is m for m in made):  # the very tensor again (attention's placeholders)
            give = ("r", next(k for k, m in enumerate(made) if m is r))
        elif type(r) is torch.Tensor and tensor.is_jax(r):
            give = _give(r, outputs, inputs)
        else:
            give = None
        if give is None:
            return None
        gives.append(give)
        made.append(r)
    return tuple(gives)


def _give(r: torch.Tensor, outputs: tuple, inputs: set):
    """How a replay makes result `r`: a fresh tensor on a storage of its own, holding one program output
    (contiguous, or laid out by wrap_strided) or a CONSTANTS array; None otherwise."""
    address = torch._C._data_address(r)
    box = tensor.BOXES.get(address)
    if address in inputs or type(box) is not tensor.Box or r.storage_offset() or r.is_conj() or r.is_neg():
        return None
    if box.dtype is not r.dtype:
        return None
    held = box.logical[0] if box.logical is not None else box.array
    if box.logical is None and (r.stride() != tensor.contiguous_strides(tuple(r.shape)) or held.shape != r.shape):
        return None
    hits = [k for k, o in enumerate(outputs) if o is held]
    if len(hits) == 1:
        if box.logical is None:
            return ("w", hits[0], r.dtype)
        shape, strides, perm = box.logical[1:]
        if dtypes.JAX_TO_TORCH.get(held.dtype) is r.dtype and shape == tuple(r.shape) and strides == r.stride():
            return ("s", hits[0], (r.dtype, shape, strides, perm))  # as wrap_strided lays it out
        return None
    if not hits and box.logical is None and CONSTANTS.get(id(held)) is held:
        return ("c", held, r.dtype)
    return None
