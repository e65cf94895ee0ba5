"""Large `uniform_` and `normal_` fills (nn.init's kaiming, xavier and normal initialisers, nn.Linear's
and nn.Embedding's own, torch.randn) drawn a chunk at a time into the tensor's own buffer.

Drawn whole, a fill of n float32 values held at its peak the tensor's old buffer, the draw, and the
draw's scratch: on CPU JAX's threefry is a loop over rounds whose state (two uint32 arrays of n) is
double-buffered, 3 n words of scratch (XLA's memory analysis of the draw of 2^26 values: 768 MiB);
then the draw was copied into the tensor's shape beside the old buffer. An 8192x8192 float32 weight
(256 MiB) reached 4.0 times its size above what the process held before `torch.empty` (RSS high-water
mark, benchmarks/init_memory.py).

Here CHUNK values are drawn at a time and a second program writes each chunk into the tensor's buffer,
which it is given (XLA donation, where nothing else holds that buffer: tensor.sole_holder), so a fill
holds the tensor, one chunk and that chunk's scratch: 1.25 times the weight above.

The values are the whole draw's, bit for bit. With JAX's partitionable threefry (jaxdev's setting)
value i of a draw is made from the key and the counter i alone; a chunk from `start` is drawn with a key
of a PRNG implementation of jaxdev's own whose bits are threefry's on the counters start + i (JAX's
own bits for counter i), and JAX's own `uniform` / `normal` make the floats from them as in the whole
draw (`uniform_body` / `normal_body`, shared with the whole draw in random.py). Whether that holds
with the JAX in use (another version, the non-partitionable threefry, another default PRNG) is
checked once per kind and dtype, on a small draw, before the first chunked fill (`_agrees`): where it
does not, fills are drawn whole as before.
"""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.extend import random as jax_extend_random

from jaxdev import dtypes, tensor, tracing
from jaxdev.core.placement import SHARDED, SHARDED_ENTRIES
from jaxdev.ops.kit.arguments import opmath
from jaxdev.ops.kit.jit import jitted, program

CHUNK = 1 << 22  # values per chunk: 16 MiB of float32, and 48 MiB of threefry scratch on CPU
MIN_VALUES = 4 * CHUNK  # smaller fills are drawn whole: one program, no per-chunk calls


def uniform_body(key, size: int, real, low, high):
    return jax.random.uniform(key, (size,), real, low, high)


def normal_body(key, size: int, real, mean, scale):
    return jax.random.normal(key, (size,), real) * scale + mean


BODIES = {"uniform": uniform_body, "normal": normal_body}


def _offset_bits(data, bit_width, shape):
    """JAX's partitionable threefry bits (`_threefry_random_bits_partitionable`) for the counters
    start + i instead of i; `data` holds the key's two words, then start's high and low words."""
    n = math.prod(shape)
    lo = lax.iota(np.uint32, n) + data[3]
    hi = data[2] + (lo < data[3]).astype(np.uint32)  # the carry into the high word
    bits1, bits2 = jax_extend_random.threefry2x32_p.bind(data[0], data[1], hi.reshape(shape), lo.reshape(shape))
    if bit_width == 64:
        return (bits1.astype(np.uint64) << np.uint64(32)) | bits2.astype(np.uint64)
    bits = bits1 ^ bits2
    return bits if bit_width == 32 else bits.astype(np.dtype(f"uint{bit_width}"))


def _no_keys(*_):
    raise NotImplementedError("jaxdev's offset keys only draw bits")


@functools.cache
def _offset_impl():
    return jax_extend_random.define_prng_impl(
        key_shape=(4,), seed=_no_keys, split=_no_keys, fold_in=_no_keys, random_bits=_offset_bits, name="jaxdev_offset"
    )


@jitted(maxsize=32)
def _chunk(kind: str, size: int, real):
    """`size` values of the draw `kind` from counter (hi, lo) on: those values of the whole draw."""

    def draw(key, hi, lo, a, b):
        data = jnp.concatenate([jax.random.key_data(key), jnp.stack([hi, lo])])
        return BODIES[kind](jax.random.wrap_key_data(data, impl=_offset_impl()), size, real, a, b)

    return draw


@jitted(maxsize=64, donate=(0,))
def _put(shape: tuple, jdt):
    """Writes a chunk (cast to `jdt`, as the whole draw's copy casts it) into `out` from `start`; `out`
    is donated: the result is the same buffer, in the tensor's shape."""

    def put(out, chunk, start):
        flat = lax.dynamic_update_slice(out.reshape(-1), chunk.astype(jdt), (start,))
        return flat.reshape(shape)

    return put


def _words(start: int) -> tuple:
    return np.uint32(start >> 32), np.uint32(start & 0xFFFF_FFFF)


def _starts(n: int, size: int) -> list[int]:
    """Chunk starts covering n values; the last chunk ends at n, overlapping the one before: it
    rewrites the same values there (value i depends on i alone), and no program for a shorter chunk is needed."""
    return [*range(0, n - size, size), n - size]


@functools.cache
def _agrees(kind: str, real) -> bool:
    """A chunked draw gives the whole draw's values with this JAX: checked once on 209 values in chunks
    of 64, against the whole draw's program."""
    try:
        key = jax.random.key(20240607)
        a, b = (-0.5, 2.0) if kind == "uniform" else (0.25, 3.0)
        n, size = 209, 64
        want = np.asarray(program(lambda k: BODIES[kind](k, 256, real, a, b))(key))[:n]
        got = np.empty_like(want)
        for start in _starts(n, size):
            got[start : start + size] = np.asarray(_chunk(kind, size, real)(key, *_words(start), a, b))
        return want.tobytes() == got.tobytes()
    except Exception:  # another JAX's internals: draw whole
        return False


def fill(self, kind: str, key, a: float, b: float) -> bool:
    """Fill jax tensor `self` with the draw `kind` ("uniform": low, high; "normal": mean, scale) from
    `key` in chunks, as the whole draw would; False (nothing done) where it is drawn whole: a small or
    complex tensor, one that is not its whole storage, a sharded storage, a traced call."""
    n = self.numel()
    if n < MIN_VALUES or self.dtype.is_complex or tracing.is_traced(key) or tensor.in_scratch():
        return False
    box = tensor.BOXES.get(self.untyped_storage().data_ptr())
    if type(box) is not tensor.Box or box.logical is not None or (SHARDED_ENTRIES and box in SHARDED):
        return False
    if box.dtype is not self.dtype or box.numel != n or self.storage_offset() or not self.is_contiguous():
        return False
    if self.is_neg() or tracing.is_traced(box._array):
        return False
    jdt = dtypes.to_jax_dtype(self.dtype)
    real = jnp.finfo(opmath(jdt)).dtype
    if not _agrees(kind, real):
        return False
    # The old values are not needed: their buffer takes the draw where nothing else holds it.
    out = box.array if tensor.sole_holder(box) else tensor.zeros(n, jdt)
    draw, put = _chunk(kind, CHUNK, real), _put(tuple(self.shape), jdt)
    for start in _starts(n, CHUNK):
        out = put(out, draw(key, *_words(start), a, b), start)
        box.array = out  # after each chunk: the box never holds a donated (deleted) array
    box.writes += 1
    return True
