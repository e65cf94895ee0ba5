"""complex32 values and the bits that hold them (see jaxdev/ops/carriers/complex_half.py): a complex32
tensor's uint32 bits (`bits_of`, with its conj and neg bits applied as CPU computes them), decoded to
complex64 (exact) and encoded back part by part to float16, written back through a tensor's strides;
numbers rounded as CPU casts them; and the warning CPU gives as it makes a complex32 result."""

from __future__ import annotations

import functools
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import torch

from jaxdev import tensor
from jaxdev.ops.carriers import bit_dtypes
from jaxdev.ops.kit.jit import program

_C32 = torch.complex32
_CARRIER = torch.uint32

_EXPERIMENTAL = "ComplexHalf support is experimental and many operators don't support it yet."


_warned = False


def warn_experimental() -> None:
    global _warned
    if not _warned or torch.is_warn_always_enabled():
        _warned = True
        warnings.warn(_EXPERIMENTAL, UserWarning, stacklevel=3)


@program
def _decode(u: jax.Array) -> jax.Array:
    parts = [jax.lax.bitcast_convert_type((u >> s).astype(jnp.uint16), jnp.float16) for s in (0, 16)]
    return jax.lax.complex(parts[0].astype(jnp.float32), parts[1].astype(jnp.float32))


@program
def _encode(c: jax.Array) -> jax.Array:
    """Each part rounded to float16, a NaN quieted as the float round trip quiets it on CPU (said
    outright: a fused program may fold float16 -> float32 -> float16 away)."""
    c = c.astype(jnp.complex64)
    halves = [
        jax.lax.bitcast_convert_type(p.astype(jnp.float16), jnp.uint16).astype(jnp.uint32) for p in (c.real, c.imag)
    ]
    re, im = (jnp.where(((h & 0x7C00) == 0x7C00) & ((h & 0x3FF) != 0), h | 0x200, h) for h in halves)
    return re | (im << 16)


def aliased(t: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """t's elements read as `dtype` (same item size): t's storage, sizes, strides and offset."""
    return bit_dtypes.retyped(t, dtype)


def placed(array: jax.Array, strides) -> torch.Tensor:
    """A new jax tensor holding `array` laid out with `strides` where they are dense, else contiguous."""
    if array.ndim > 1 and tensor.dense_permutation(tuple(array.shape), tuple(strides)) is not None:
        return tensor.wrap_strided(array, tuple(strides))
    return tensor.wrap(array)


@program
def conj_bits(u: jax.Array) -> jax.Array:
    """CPU's conj of complex<Half> bits: the real half as it is (a signalling NaN stays one), the
    imaginary half negated through float: its sign flipped (a NaN's too, and quieted)."""
    im = u >> 16
    nan = ((im & 0x7C00) == 0x7C00) & ((im & 0x3FF) != 0)
    return (u & 0xFFFF) | ((jnp.where(nan, im | 0x200, im) ^ 0x8000) << 16)


@program
def neg_bits(u: jax.Array) -> jax.Array:
    """CPU's negation of complex<Half> bits: each half through float, its sign flipped, a NaN quieted."""
    halves = [(u >> s) & 0xFFFF for s in (0, 16)]
    nan = [((h & 0x7C00) == 0x7C00) & ((h & 0x3FF) != 0) for h in halves]
    re, im = (jnp.where(n, h | 0x200, h) ^ 0x8000 for h, n in zip(halves, nan))
    return re | (im << 16)


def bits_of(t: torch.Tensor) -> jax.Array:
    """The uint32 bits of jax complex32 tensor `t`'s values, its conj/neg bits applied as CPU's
    conj and neg compute them."""
    value = tensor.read(aliased(t, _CARRIER))
    if t.is_neg():
        value = neg_bits(value)
    return conj_bits(value) if t.is_conj() else value


def decoded(t: torch.Tensor) -> torch.Tensor:
    """A complex64 copy of complex32 `t` (exact: every half is a float), laid out as t where dense."""
    if not tensor.is_jax(t):
        return t.to(torch.complex64)
    return placed(_decode(bits_of(t)), t.stride())


def encoded(r: torch.Tensor, warn: bool = True) -> torch.Tensor:
    """A new complex32 tensor of r's values (complex or real), each part rounded to float16; `warn`: a
    result the caller sees (CPU warns as it makes one)."""
    if warn:
        warn_experimental()
    if not tensor.is_jax(r):
        return r.to(_C32)
    value = tensor.read(r)
    return aliased(placed(_encode(value), r.stride()), _C32)


def write_back(dest: torch.Tensor, value: torch.Tensor) -> None:
    """Store complex `value` (dest's shape) into complex32 `dest`, rounded, through dest's strides."""
    if not tensor.is_jax(dest):
        dest.copy_(value)
        return
    if tuple(dest.shape) != tuple(value.shape):
        dest.resize_(value.shape)
    array = tensor.read(value).astype(jnp.complex64)
    if dest.is_neg():
        array = -array
    if dest.is_conj():
        array = jnp.conj(array)
    tensor.write(aliased(dest, _CARRIER), _encode(array))


def tensors_of(value):
    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, (list, tuple)):
        for v in value:
            if isinstance(v, torch.Tensor):
                yield v


def value_tensors(args, kwargs):
    """The tensors holding values (floating or complex; not indices, masks or conditions)."""
    for value in (*args, *kwargs.values()):
        for t in tensors_of(value):
            if t.dtype.is_floating_point or t.dtype.is_complex:
                yield t


@functools.lru_cache(maxsize=256)
def rounded_number(value):
    """A Python number as CPU casts it to complex32 (each part through float to float16)."""

    def half(x: float) -> float:
        return float(np.float16(np.float32(x)))

    if isinstance(value, complex):
        return complex(half(value.real), half(value.imag))
    return half(value) if isinstance(value, float) else value
