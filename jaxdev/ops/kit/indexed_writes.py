"""In-place indexed writes that cost what they write: `index_put_` (`x[idx] = rows`, with or without
accumulate), `index_copy_`, `index_add_`, `index_fill_`, `index_reduce_`, `scatter_` and its
reductions, `masked_scatter_`, `put_`.

Each of their functional kernels ends in one jitted program whose first argument is `self`'s values
and whose result, of the same shape and dtype, replaces them (`x.at[i].set(v)`). Run as it is, that
program copies the whole storage into a new buffer to change a few rows of it: 8 rows of a 512 MiB
tensor took 0.2-0.7 s and a second 512 MiB buffer. The derived in-place kernel instead gives `self`'s
buffer to that program (XLA donation), as a slice write does (core/strided.py), and the scatter
updates the rows where they lie.

How: the in-place kernel runs the functional kernel through `computed`, which arms `self`'s array
when it may be given; the kernel's last program call goes through `into(program, x, ...)`, which
donates `x` only when it is that armed array, once. Anything else (the functional op itself, a
backward's VJP, a traced or fused program, a kernel that never reaches `into`) runs as before.

Only where nobody can see the buffer go:
* `self` spans its storage (a view of a larger storage keeps the copying path: its result is written
  back through its strides, and that write donates the storage on its own terms);
* nothing but the box holds the array (tensor.sole_holder: not exported by `to_jax`, not shared with
  another storage, not traced, not sharded);
* no other tensor argument lies on `self`'s storage (`x[idx] = x[0]`);
* `self` is large enough for the saved copy to matter (inplace.DONATE_BYTES, read at each call: each
  donating program is one more compile).
The kernels run every check that can raise (dtypes, shapes, index bounds) before their last program,
and that program returns `self`'s shape and dtype, so the store that follows cannot fail once the
buffer is given.
"""

from __future__ import annotations

import threading

import jax
import torch

from jaxdev import tensor
from jaxdev.ops.kit import inplace, jit

_armed = threading.local()  # .array: what the running in-place kernel gives away (per thread)
_DONATING: dict = {}  # a kernel's jitted program -> the same body jitted with its first argument donated


def computed(fn, self: torch.Tensor, args: tuple, kwargs: dict, others) -> jax.Array:
    """`fn(self, *args, **kwargs)`, the functional kernel of an in-place indexed write, with `self`'s
    buffer given to its last program where that cannot change what anyone sees; `others`: the
    other tensor arguments."""
    array = _givable(self, others)
    if array is None:
        return fn(self, *args, **kwargs)
    _armed.array = array
    del array  # the armed slot is the one reference this frame keeps
    try:
        return fn(self, *args, **kwargs)
    finally:
        _armed.array = None


def into(program, x: jax.Array, *args) -> jax.Array:
    """`program(x, *args)`, a kernel's last program, whose result has x's shape and dtype and replaces
    x: x's buffer is given to it when x is the array the running in-place kernel armed."""
    if x is None or x is not getattr(_armed, "array", None):
        return program(x, *args)
    _armed.array = None  # given once: a second program on x would read a deleted buffer
    run = _DONATING.get(program)
    if run is None:
        run = _DONATING[program] = jit.program(program.__wrapped__, donate=(0,))
    return run(x, *args)


def _givable(self: torch.Tensor, others) -> jax.Array | None:
    """`self`'s array where the write may give its buffer away, else None."""
    if not tensor.is_jax(self) or self.numel() * self.element_size() < inplace.DONATE_BYTES:
        return None
    address = self.untyped_storage().data_ptr()
    box = tensor.BOXES.get(address)
    # A fused eager box (a pending result) is a subclass: its array may not exist yet.
    if box is None or type(box) is not tensor.Box or not tensor.spans(self, box):
        return None
    for t in others:
        if tensor.is_jax(t) and torch._C._data_address(t) == address:  # a read: leaves copy-on-write data shared
            return None
    return box._array if tensor.sole_holder(box) else None
