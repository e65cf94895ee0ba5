"""In-place pointwise ops that write into their own buffer: `x.add_(y)`, an optimizer's `lerp_`,
`addcmul_`, `mul_` on large tensors.

An in-place op's derived kernel (derived.inplace_kernel) computes the functional result into a new
buffer and then hands it to `self`'s storage: two buffers of `self`'s size live at once, and the new
one lands in memory nobody has touched lately (measured on this project's 2-core CPU machine, `x.add_(y)`
of 1 MiB: median 208 us copying, 70 us donated). Here the functional kernel runs once more,
traced inside one program that donates `self`'s buffer (XLA input/output aliasing), so the result is
written where `self`'s values were, as a CUDA in-place kernel writes them.

Only where that cannot change what the user sees:
* the op is pointwise and draws no random numbers (its traced body reads no global state a user may
  change between calls, such as the generator or the matmul precision);
* `self` spans its storage, nothing but its box holds the buffer (tensor.sole_holder), and it is
  large enough for the saved copy to matter (DONATE_BYTES);
* every other tensor argument is a jax tensor on another storage;
* the traced body states no value checks (an integer division by zero is checked on values: a failed
  check must leave `self` as it was, so those signatures keep the copying path), and tracing it
  raises nothing. A signature that fails either way is remembered and always copies.
The program computes exactly the jitted bodies the copying path runs, in one XLA program.
"""

from __future__ import annotations

import jax
import torch
from torch._ops import OpOverload

from jaxdev import dtypes, tensor, tracing
from jaxdev.ops.kit.jit import program

# Below this the copying path is kept: it costs the same there (`x.add_(y)` on this project's CPU
# machine, median us donated/copying: 4 KiB 13.4/13.3, 64 KiB 13.2/13.0, 256 KiB 35/66, 1 MiB 70/208,
# 4 MiB 207/244), and each donating program is one more compile on first use.
DONATE_BYTES = 256 << 10

_TENSOR = object()  # marks a tensor argument's place in a signature
_REFUSED: set = set()  # signatures whose traced body checks values or cannot be traced
_PROGRAMS: dict = {}  # signature -> its program (jitted: one compile per shape)
_FAMILIES: dict = {}  # signature family (see _admit) -> programs given
VALUES_PER_SIGNATURE = 4  # programs one op signature gets for distinct Python numbers


def eligible(functional: OpOverload, inplace: OpOverload) -> bool:
    """PyTorch tags some in-place overloads pointwise and leaves it to the functional one (abs_, lt_)."""
    tags = set(functional.tags) | set(inplace.tags)
    return torch.Tag.pointwise in tags and torch.Tag.nondeterministic_seeded not in tags


class _Refused(Exception):
    """The traced body states a value check, or its result breaks the in-place contract: this
    signature copies (and raises there, as eager does)."""


def try_donated(fn, op_name: str, self: torch.Tensor, args: tuple, kwargs: dict) -> bool:
    """Compute `fn(self, *args, **kwargs)` into `self`'s own buffer; False (nothing done) where that is
    not allowed, and the caller takes the copying path."""
    if self.numel() * self.element_size() < DONATE_BYTES:
        return False
    box = tensor.BOXES.get(self.untyped_storage().data_ptr())
    if box is None or not tensor.spans(self, box):
        return False
    tensors, static, kwstatic = [], [], []
    for a in args:
        if not _take(a, box, tensors, static):
            return False
    for k, v in kwargs.items():
        if not _take(v, box, tensors, kwstatic):
            return False
        kwstatic[-1] = (k, kwstatic[-1])
    # The default dtype is read while tracing (the result type of an integer tensor and a Python float).
    signature = lambda entry: (
        op_name,
        self.dtype,
        torch.get_default_dtype(),
        tuple(map(entry, static)),
        tuple((k, entry(v)) for k, v in kwstatic),
    )
    key = signature(_exact)
    try:
        if key in _REFUSED:
            return False
    except TypeError:  # an argument no signature can hold
        return False
    arrays = [tensor.read(t) for t in tensors]
    if not tensor.sole_holder(box):  # after the reads: they hold other storages' arrays only
        return False
    program = _PROGRAMS.get(key)
    if program is None:
        if not _admit(signature(_kind)):
            return False
        # The values of this first call: a later call with this key has the very same ones.
        program = _PROGRAMS[key] = _program(fn, self.dtype, tuple(static), tuple(kwstatic))
    try:
        result = program(box.array, *arrays)
    except Exception:
        if box._array.is_deleted():  # it failed running, after the buffer was given: nothing to retry
            raise
        # Refused, or raised while tracing, before anything ran: the copying path computes it, or
        # raises the eager kernel's own error.
        _REFUSED.add(key)
        return False
    box.writes += 1
    box.array = result  # never a sharded box's (sole_holder): no placement to keep
    return True


def _admit(family) -> bool:
    """A new signature gets a program unless its `family` (the signature with its Python numbers' types
    in place of their values) has had VALUES_PER_SIGNATURE already: an optimizer's step size, new every
    step, must not compile a program per step; that op keeps the copying path."""
    seen = _FAMILIES.setdefault(family, 0)
    if seen >= VALUES_PER_SIGNATURE:
        return False
    _FAMILIES[family] = seen + 1
    return True


def _exact(v):
    """A signature's entry for an argument: numbers by type and exact value, as equality does not tell
    1 from 1.0 or True (which promote differently), nor 0.0 from -0.0."""
    if isinstance(v, (bool, int, float, complex)):
        return (type(v), repr(v))
    return v


def _kind(v):
    """A family's entry for an argument: a number by its type alone."""
    return type(v) if isinstance(v, (int, float, complex)) and not isinstance(v, bool) else _exact(v)


def _take(v, box, tensors: list, static: list) -> bool:
    if isinstance(v, torch.Tensor):
        if not tensor.is_jax(v) or tensor.box_of(v) is box:
            return False
        tensors.append(v)
        static.append(_TENSOR)
        return True
    if isinstance(v, (list, tuple)) and any(isinstance(x, torch.Tensor) for x in v):
        return False
    if isinstance(v, torch.Generator):
        return False
    static.append(tuple(v) if isinstance(v, list) else v)
    return True


def _program(fn, dtype: torch.dtype, static: tuple, kwstatic: tuple):
    """`fn` on `self`'s buffer (donated) and the tensor arguments' arrays, its other arguments fixed."""

    def body(stored, *arrays):
        it = iter(arrays)
        with tensor.scratch():
            self = tensor.wrap(stored)
            values = [tensor.wrap(next(it)) if v is _TENSOR else v for v in static]
            kw = {k: (tensor.wrap(next(it)) if v is _TENSOR else v) for k, v in kwstatic}
            tracing.start_checks()
            try:
                result = fn(self, *values, **kw)
            finally:
                checks = tracing.finish_checks()
        if checks or not isinstance(result, jax.Array):
            raise _Refused
        # store_into's contract: the result has self's shape and can be cast to its dtype.
        if tuple(result.shape) != tuple(stored.shape):
            raise _Refused
        if not torch.can_cast(dtypes.to_torch_dtype(result.dtype), dtype):
            raise _Refused
        return result.astype(stored.dtype)

    return program(body, donate=(0,))
