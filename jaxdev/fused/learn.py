"""What one recorded op gives, learned by evaluating its kernel abstractly.

The kernel runs once under `jax.eval_shape`, on twins of its tensor arguments: same sizes, strides and
offsets, on storages whose boxes hold tracers. That runs every check the kernel makes on shapes,
dtypes and arguments (a wrong call raises here, at the call, as eagerly), and gives the layout of its
results and which argument storages it writes, with no XLA work. What it learns is kept in the trie
(recorder.Trie) for every later call with the same key.
"""

from __future__ import annotations

import warnings

import jax
import jax.numpy as jnp
import torch

from jaxdev import dtypes, rng, tensor, tracing
from jaxdev.fused import boxes
from jaxdev.tensor import BOXES, Box

_LOGICAL = Box.__dict__["logical"]  # the slot's descriptor
_DATA_DEPENDENT = (torch.Tag.dynamic_output_shape, torch.Tag.data_dependent_output)


class NotRecordable(Exception):
    pass


class Learned:
    """`eager`: the op runs eagerly, after the pending work. Otherwise:
    `out`: ("one", spec) | ("none", None) | (tuple or list, [spec, ...]), a spec being None,
    ("arg", i) (the i-th tensor argument itself, as in-place ops return), ("view", i, dtype, shape, stride,
    offset) (a tensor on the i-th tensor argument's storage), ("value", v) (a Python number
    computed from shapes alone), ("new", m, dtype, shape,
    stride, offset) (a tensor on the op's m-th new storage) or ("fresh", m, dtype, shape) (the first
    tensor on it, contiguous and spanning it all, of the storage's dtype); `storages[m]`: (numel, dtype) of that
    storage; `firsts[m]`: (position in the output or None, (dtype, shape, stride, offset)) of the first
    result on it; `writes`: the tensor arguments whose storages the op writes; `cut`: the size bound
    once cut a segment after this op (recorder._cut); `plan`: results.make's native plan for it (None
    until its first make, False where Python makes its results)."""

    __slots__ = ("bumps", "cut", "eager", "firsts", "out", "plan", "reason", "storages", "warned", "writes")

    def __init__(self, eager=False, reason=""):
        self.eager, self.reason, self.cut = eager, reason, False
        self.out, self.storages, self.firsts, self.writes = ("none", None), [], {}, []
        self.bumps: list = []  # tensor arguments whose version the kernel itself bumps
        self.plan = None
        self.warned: list = []  # the warnings its evaluation gave, until the call that learnt it gives them


def learn(op, fn, args, kwargs, tensors: list) -> Learned:
    """What the op gives. A kernel that warns runs eagerly: per-op mode warns at every call, as the
    kernel decides (a warning given once, or at each call under torch.set_warn_always), which a replayed
    op would not; its evaluation's warnings are kept for the call that learnt it (recorder._eagerly:
    the kernel already said them, and may say them only once)."""
    if any(tag in op.tags for tag in _DATA_DEPENDENT) and not _integer_index(op, args):
        return Learned(eager=True, reason="its results' shapes depend on values")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")  # every one the kernel gives; the filters decide when it is given again
        try:
            learned = _abstract(fn, args, kwargs, tensors)
        except Exception as e:  # it cannot be evaluated without values: it runs eagerly, which raises if it must
            learned = Learned(eager=True, reason=_why_eager(e))
    if caught:
        if not learned.eager:
            learned = Learned(eager=True, reason=f"its kernel warns: {str(caught[0].message).splitlines()[0]}")
        learned.warned = list(caught)
    return learned


# What JAX raises where a kernel reads a value on the host (a copy to the CPU, .item(), a value check)
_NEEDS_VALUES = (
    jax.errors.ConcretizationTypeError,
    jax.errors.TracerArrayConversionError,
    jax.errors.TracerBoolConversionError,
    jax.errors.TracerIntegerConversionError,
)


def _why_eager(e: Exception) -> str:
    """The reason fused eager's counts give for an op its abstract evaluation refused."""
    if isinstance(e, _NEEDS_VALUES):
        return f"it reads values on the host ({type(e).__name__})"
    return f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"


_LEARNED: dict = {}  # an op's local key -> what learn found (see cached)


def cached(key: tuple, op, fn, args, kwargs, tensors: list) -> Learned:
    """What the op gives (learn), asked once per local key: the op's key with its storages numbered
    by first appearance among its own arguments, with their sizes. What an op gives depends on its own
    arguments alone, not on where in a segment it comes, so an op met at a new place (the next token of
    a decoding loop) is not evaluated again."""
    local, storages = [], {}
    tensor_parts = iter(tensors)
    for part in key:
        if type(part) is tuple and part and type(part[0]) is tuple:
            t = next(tensor_parts)
            slot = storages.setdefault(part[0], len(storages))
            box = BOXES.get(boxes.address(t))
            local.append((slot, part[1], box.numel if box is not None else None))
        else:
            local.append(part)
    local = tuple(local)
    found = _LEARNED.get(local)
    if found is None:
        found = _LEARNED[local] = learn(op, fn, args, kwargs, tensors)
    return found


_INDEX = torch.ops.aten.index.Tensor


def _integer_index(op, args) -> bool:
    """`x[idx]` with integer index tensors: tagged dynamic (a boolean mask's result size depends on its
    values) but its size is known from the shapes alone, so it is recorded (`cache[position]`)."""
    return (
        op is _INDEX
        and len(args) == 2
        and all(i is None or (isinstance(i, torch.Tensor) and i.dtype not in _MASKS) for i in args[1])
    )


_MASKS = (torch.bool, torch.uint8)


def _abstract(fn, args, kwargs, tensors: list) -> Learned:
    index: dict[int, int] = {}
    stored: list[tuple[int, torch.dtype]] = []
    shapes = []
    for t in tensors:
        address = boxes.address(t)
        if address not in index:
            index[address] = len(stored)
            box = BOXES[address]
            stored.append((box.numel, box.dtype))
            shapes.append(_stored_shape(box, t))
    structs = [jax.ShapeDtypeStruct(shape, dtypes.to_jax_dtype(d)) for shape, (_, d) in zip(shapes, stored)]
    learned = Learned()
    positions = [index[boxes.address(t)] for t in tensors]

    def abstract(arrays, base):
        made = [Box(a, numel, dtype) for a, (numel, dtype) in zip(arrays, stored)]
        storages = [tensor.new_storage(b) for b in made]
        twins = [
            tensor.tensor_on_storage(storages[p], t.dtype, t.shape, t.stride(), t.storage_offset())
            for t, p in zip(tensors, positions)
        ]
        before = [_where(t) for t in twins]
        versions = [t._version for t in twins]
        swap = iter(twins)
        targs = _swapped(args, swap)
        tkwargs = {k: _swapped(v, swap) for k, v in kwargs.items()}
        with rng.traced(base):
            out = fn(*targs, **tkwargs)
        if [_where(t) for t in twins] != before:
            raise NotRecordable("it changes an argument's sizes, strides or storage")
        _describe(learned, out, twins, {s.data_ptr() for s in storages})
        learned.writes = [i for i, p in enumerate(positions) if made[p].writes]
        # In-place foreach kernels bump their tensors' versions themselves (they have no ADInplaceOrView
        # kernel): the recorder does what the kernel did, or autograd would miss the write.
        learned.bumps = [i for i, (t, v) in enumerate(zip(twins, versions)) if t._version != v]

    tracing.checks.depth += 1
    try:
        # Outside inference mode: twins made in it are inference tensors, whose versions cannot be read (every
        # op under torch.inference_mode() had run eagerly, one program each)
        with (
            tracing.eager_layouts(True),
            tensor.scratch(),
            torch.inference_mode(False),
            torch.no_grad(),
            torch.autocast("jax", enabled=False),
        ):
            jax.eval_shape(abstract, structs, jax.ShapeDtypeStruct((3,), jnp.int64))
    finally:
        tracing.checks.depth -= 1
    return learned


def _stored_shape(box: Box, t: torch.Tensor) -> tuple:
    """The shape of the array `box` holds (or will hold): kernels take a tensor that is its whole box's
    array as it is (tensor.plain_array), so the twin's box must hold it in the same shape."""
    held = box._array  # the slots themselves: `array` or `logical` of a deferred box would run the segment
    if type(box) is not Box and type(held).__name__ == "_Unset":
        whole = t.dtype is box.dtype and not t.storage_offset() and t.is_contiguous() and t.numel() == box.numel
        return tuple(t.shape) if whole else (box.numel,)
    if held is None or _LOGICAL.__get__(box) is not None:
        return (box.numel,)
    return tuple(held.shape)


def _where(t: torch.Tensor) -> tuple:
    return (t.untyped_storage().data_ptr(), t.shape, t.stride(), t.storage_offset())


def _swapped(a, twins):
    if isinstance(a, torch.Tensor):
        return next(twins)
    if type(a) is list or type(a) is tuple:
        return type(a)(_swapped(x, twins) for x in a)
    return a


def _describe(learned: Learned, out, twins: list, inputs: set) -> None:
    new: dict[int, int] = {}

    def spec(o, position):
        if o is None:
            return None
        if type(o) in (int, float, bool):  # a number the kernel computed from shapes (attention's max_q)
            return ("value", o)
        if not isinstance(o, torch.Tensor):
            raise NotRecordable(f"it returns a {type(o).__name__}")
        for i, t in enumerate(twins):
            if o is t:
                return ("arg", i)
        address = o.untyped_storage().data_ptr()
        if o.device.type != "jax" or o.is_conj() or o.is_neg():
            raise NotRecordable("it returns a tensor on another device or with a conj/neg bit")
        if address in inputs:  # a view of an argument (a compiled forward graph saves `t(weight)`)
            i = next(i for i, t in enumerate(twins) if t.untyped_storage().data_ptr() == address)
            return ("view", i, o.dtype, o.shape, o.stride(), o.storage_offset())
        m = new.get(address)
        meta = (o.dtype, o.shape, o.stride(), o.storage_offset())
        if m is None:
            m = new[address] = len(learned.storages)
            box = BOXES[address]
            learned.storages.append((box.numel, box.dtype))
            learned.firsts[m] = (position, meta)
            if _whole(o, box):  # the common case, made at the call in one native step (boxes.new_pending_tensor)
                return ("fresh", m, o.dtype, tuple(o.shape))
        return ("new", m, *meta)

    if out is None:
        learned.out = ("none", None)
    elif isinstance(out, torch.Tensor):
        learned.out = ("one", spec(out, None))
    elif type(out) is tuple or type(out) is list:
        learned.out = (type(out), [spec(o, i) for i, o in enumerate(out)])
    else:
        raise NotRecordable(f"it returns a {type(out).__name__}")


def _whole(o: torch.Tensor, box: Box) -> bool:
    """`o` is a contiguous tensor of its box's dtype spanning the whole box from offset 0, with the strides
    a new contiguous tensor gets (a size-1 dim's stride included), and not empty."""
    shape = tuple(o.shape)
    strides, step = [], 1
    for n in reversed(shape):
        strides.append(step)
        step *= n
    return (
        o.dtype == box.dtype
        and o.storage_offset() == 0
        and 0 < step == box.numel
        and o.stride() == tuple(reversed(strides))
    )
