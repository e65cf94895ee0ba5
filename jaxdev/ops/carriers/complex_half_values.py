"""The ARITHMETIC path of complex32 on jax (see jaxdev/ops/carriers/complex_half.py): an op CPU computes for
ComplexHalf runs as its complex64 kernel on decoded values, its results rounded back to half parts.

What CPU does, and so this: TensorIterator casts a computing op's inputs to the common dtype first, so
where that is complex32 every other floating input and every Python number (alpha too) is rounded to
half before the op (measured: 1 + 2049.0 is 2048 + 0j in complex32, not 2050); c10::complex<Half>
computes each operation in float and rounds its result to half (a + alpha * b rounds alpha * b first).
Which result is complex32 (or float16: abs, real views) is what PyTorch's meta kernels say, or where
they cannot (nonzero, item), what the decoded run gives less the widening decoding made.
"""

from __future__ import annotations

import functools
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import torch
from torch._prims_common import ELEMENTWISE_TYPE_PROMOTION_KIND, elementwise_dtypes

from jaxdev import tensor
from jaxdev.ops.carriers import bit_dtypes
from jaxdev.ops.carriers import complex_half_bits as ch

_C32 = torch.complex32
_WIDE = (torch.float32, torch.float64, torch.bfloat16, torch.complex64, torch.complex128)
# Ops whose inputs TensorIterator casts to a common dtype before computing (the rest store values).
_ROUNDING = frozenset(
    "aten::" + op
    for op in (
        "add.Tensor", "add.Scalar", "add_.Tensor", "add_.Scalar", "add.out", "sub.Tensor", "sub.Scalar",
        "sub_.Tensor", "sub_.Scalar", "sub.out", "mul.Tensor", "mul.Scalar", "mul_.Tensor", "mul_.Scalar",
        "mul.out", "eq.Tensor", "eq.Scalar", "ne.Tensor", "ne.Scalar", "addcmul", "addcmul_", "addcmul.out",
    )
)  # fmt: skip
# op -> the position of the tensor its alpha scales: c10::complex<Half> rounds alpha * it to half first.
_ALPHA = {
    **dict.fromkeys(("aten::add.Tensor", "aten::add_.Tensor", "aten::add.out"), 1),
    **dict.fromkeys(("aten::sub.Tensor", "aten::sub_.Tensor", "aten::sub.out"), 1),
    **dict.fromkeys(("aten::index_add", "aten::index_add_", "aten::index_add.out"), 3),
}
_ADDCMUL = frozenset({"aten::addcmul", "aten::addcmul_", "aten::addcmul.out"})
_NUMBER = (int, float, complex)


def _meta(value, key=None):
    if isinstance(value, torch.Tensor):
        return torch.empty_strided(value.shape, value.stride(), dtype=value.dtype, device="meta")
    if isinstance(value, (list, tuple)):
        return type(value)(_meta(v) for v in value)
    if key == "device":
        return torch.device("meta")
    if key == "generator":
        return None
    return value


def _flat(result) -> list:
    if isinstance(result, (list, tuple)):
        return [x for r in result for x in _flat(r)]
    return [result]


def expected_dtypes(op, args, kwargs) -> list | None:
    """The dtypes of op's results on CPU (flat), from its meta kernel; None where it has none or its
    result depends on values. A meta kernel's own error about the arguments (dtypes that must match,
    shapes) is CPU's: raised as it is, before decoding could make complex32 pass for complex64."""
    try:
        with warnings.catch_warnings(), torch.no_grad():
            warnings.simplefilter("ignore")
            result = op(*(_meta(a) for a in args), **{k: _meta(v, k) for k, v in kwargs.items()})
    except (RuntimeError, IndexError, ValueError) as e:
        if "meta" in str(e).lower() or "data-dependent" in str(e).lower():
            return None
        raise
    except Exception:  # no meta kernel, data-dependent output (nonzero, item): decided from the values
        return None
    return [r.dtype if isinstance(r, torch.Tensor) else None for r in _flat(result)]


def _common_is_half(name: str, args, kwargs) -> bool:
    """Whether a computing op's common dtype is complex32 (its inputs are then rounded to it)."""
    if name not in _ROUNDING:
        return False
    values = [a for a in args if isinstance(a, (torch.Tensor, *_NUMBER)) and not isinstance(a, bool)]
    values = values[:3] if name.startswith("aten::addcmul") else values[:2]
    if not values:
        return False
    try:
        _, result = elementwise_dtypes(*values, type_promotion_kind=ELEMENTWISE_TYPE_PROMOTION_KIND.DEFAULT)
    except Exception:
        return False
    return result is _C32


def _rounded_tensor(t: torch.Tensor) -> torch.Tensor:
    """t's values as CPU casts them to complex32, as complex64 (real dtypes: float16 values; an integer
    goes through float as c10's conversion does)."""
    if t.dtype.is_complex:
        return ch.decoded(ch.encoded(t, False)) if t.dtype is not _C32 else ch.decoded(t)
    return t.to(torch.float32).to(torch.float16)


def _written(op) -> tuple[set[int], set[str]]:
    """The positions and names of the arguments `op` writes into (self of an in-place op, out=)."""
    positions, names = set(), set()
    for i, argument in enumerate(op._schema.arguments):
        if argument.alias_info is not None and argument.alias_info.is_write:
            (names if argument.kwarg_only else positions).add(i)
            names.add(argument.name)
    return positions, names


def _converted(value, writes: bool, rounding: bool, name: str, written: dict):
    """value with complex32 tensors decoded (the ones written into recorded in `written`) and, when
    rounding, every other floating tensor and number rounded to half. (Module-level: a nested
    recursive function is a reference cycle, which would keep its tensors until a collection.)"""
    if isinstance(value, (list, tuple)):
        return type(value)(_converted(v, False, rounding, name, written) for v in value)
    if isinstance(value, torch.Tensor):
        if value.dtype is _C32:
            stand_in = ch.decoded(value)
            if writes:
                written[id(stand_in)] = value
            return stand_in
        if rounding and not writes and value.dtype not in (torch.bool, torch.float16):
            return _rounded_tensor(value)
        if value.dtype is torch.float16 and name == "aten::complex":
            return value.float()  # complex32 parts: exact as float
        return value
    if rounding and isinstance(value, _NUMBER) and not isinstance(value, bool):
        return ch.rounded_number(value)
    return value


def _inputs(op, args, kwargs, rounding: bool):
    """args and kwargs converted (_converted), and the complex32 tensors written into, by their
    stand-in's id."""
    positions, names = _written(op)
    written: dict[int, torch.Tensor] = {}
    name = op.name()
    new_args = [_converted(a, i in positions, rounding, name, written) for i, a in enumerate(args)]
    new_kwargs = {}
    for key, value in kwargs.items():
        if key == "dtype" and value is _C32:
            new_kwargs[key] = torch.complex64
        else:
            new_kwargs[key] = _converted(value, key in names, rounding, name, written)
    return new_args, new_kwargs, written


def _half_product(a, b) -> torch.Tensor:
    """a * b as c10::complex<Half> gives it (a complex product computed in float, so inf * 0 parts
    make NaN, rounded to half), as complex64; a number b is a complex<Half> there."""
    b = complex(ch.rounded_number(b)) if isinstance(b, _NUMBER) else b
    return ch.decoded(ch.encoded(torch.mul(a, b), False))


def _summed(name: str, fn):
    """`fn`'s overload computing a + b part by part, as complex<Half>'s += does, where b is the product
    rounded first (a kernel's own `a + 1 * b` would multiply NaN into the other part)."""

    def run(a, b, *rest, out=None, **kwargs):
        parts = [t if t.dtype.is_complex else t.to(torch.complex64) for t in (a, b)]
        value = torch.view_as_complex(torch.view_as_real(parts[0]) + torch.view_as_real(parts[1]))
        if name.split(".")[0].endswith("_"):
            return a.copy_(value)
        if out is not None:
            return out.resize_(value.shape).copy_(value)
        return value

    return run


def _products_first(name: str, fn, args, kwargs):
    """a + alpha * b and a + value * t1 * t2 as c10::complex<Half> computes them: each product rounded
    to half before the sum (alpha and value are complex<Half> there too)."""
    if name in _ADDCMUL and len(args) >= 3:
        product = _half_product(_half_product(args[1], kwargs.get("value", 1)), args[2])
        kwargs = {k: v for k, v in kwargs.items() if k != "value"}
        return _summed(name, fn), [args[0], product], kwargs
    at = _ALPHA.get(name)
    alpha = kwargs.get("alpha", 1)
    if at is None or alpha == 1 or len(args) <= at or not isinstance(args[at], torch.Tensor):
        return fn, args, kwargs
    # sub is add of -alpha on CPU (sub_check, then add_stub with -alpha)
    scaled = _half_product(args[at], -alpha if name.startswith("aten::sub") else alpha)
    kwargs = {k: v for k, v in kwargs.items() if k != "alpha"}
    if at == 1:
        return _summed(name, fn), [args[0], scaled, *args[2:]], kwargs
    return fn, [*args[:at], scaled, *args[at + 1 :]], kwargs


def on_complex64(op, fn, args, kwargs):
    """`fn` on complex64 values standing in for the complex32 arguments; results as CPU types them."""
    name = op.name()
    expected = expected_dtypes(op, args, kwargs)
    rounding = _common_is_half(name, args, kwargs)
    widened = not any(t.dtype in _WIDE for t in ch.value_tensors(args, kwargs))
    new_args, new_kwargs, written = _inputs(op, args, kwargs, rounding)
    if rounding or name.startswith("aten::index_add"):
        fn, new_args, new_kwargs = _products_first(name, fn, new_args, new_kwargs)
    result = fn(*new_args, **new_kwargs)
    for stand_in_id, original in written.items():
        stand_in = next(t for t in (*_flat(new_args), *_flat(list(new_kwargs.values()))) if id(t) == stand_in_id)
        ch.write_back(original, stand_in)
    flat = iter(expected) if expected is not None else None
    return _typed(result, flat, written, widened)


def _typed(r, flat, written: dict, widened: bool):
    """Result `r` as CPU types it: complex32 (encoded) or float16 where CPU's is, the written
    arguments themselves for their stand-ins."""
    if isinstance(r, (list, tuple)):
        return type(r)(_typed(x, flat, written, widened) for x in r)
    want = next(flat) if flat is not None else None
    if not isinstance(r, torch.Tensor):
        return r
    if id(r) in written:
        return written[id(r)]
    if want is None and widened and r.dtype in (torch.complex64, torch.float32):
        want = _C32 if r.dtype is torch.complex64 else torch.float16
    if want is _C32:
        return ch.encoded(r)
    if want is not None and want != r.dtype:
        return r.to(want)
    return r


# Ops that store one number into complex32 elements -> the number's position: run on the uint32 bits
# with the number as CPU casts it to complex<Half>, so the elements left alone keep their bits
# (a signalling NaN among them stays one, as on CPU).
STORES = {
    "aten::fill_.Scalar": 1,
    "aten::fill_.Tensor": 1,
    "aten::masked_fill.Scalar": 2,
    "aten::masked_fill_.Scalar": 2,
    "aten::masked_fill.Tensor": 2,
    "aten::masked_fill_.Tensor": 2,
    "aten::index_fill_.int_Scalar": 3,
    "aten::index_fill.int_Scalar": 3,
    "aten::constant_pad_nd": 2,
}


def number_bits(value) -> int:
    """The complex<Half> bits of a Python number as CPU casts it (each part through float to half)."""
    c = complex(ch.rounded_number(value))
    re, im = (int(np.float16(p).view(np.uint16)) for p in (c.real, c.imag))
    return re | (im << 16)


def stored_as_bits(name: str, args, kwargs):
    """args with the stored number as complex<Half> bits, where `name` stores one into a complex32
    self that has no conj/neg bit; else None."""
    at = STORES.get(name)
    if at is None or not args or args[0].dtype is not _C32 or args[0].is_conj() or args[0].is_neg():
        return None
    value = args[at] if len(args) > at else kwargs.get("value", 0)
    if isinstance(value, torch.Tensor):
        if value.dim() != 0:
            return None  # (the kernel words its own error)
        value = value.item()
    if not isinstance(value, _NUMBER):
        return None
    bits = number_bits(value)
    if name.endswith(".Tensor"):
        bits = torch.tensor(bits, dtype=torch.uint32)
    if len(args) > at:
        return [*args[:at], bits, *args[at + 1 :]], kwargs
    return list(args), {**kwargs, "value": bits}


def complex_of_halves(real: torch.Tensor, imag: torch.Tensor) -> torch.Tensor:
    """torch.complex of float16 parts as CPU's complex<Half>(re, im): the halves' bits side by side."""
    re, im = (jax.lax.bitcast_convert_type(tensor.read(t), jnp.uint16).astype(jnp.uint32) for t in (real, imag))
    re, im = jnp.broadcast_arrays(re, im)
    ch.warn_experimental()
    return bit_dtypes.retyped(tensor.wrap(re | (im << 16)), _C32)


def _plain_copy(kwargs) -> bool:
    """A _to_copy that only changes the dtype of a jax tensor (no other device, layout or format)."""
    device = kwargs.get("device")
    return (
        (device is None or torch.device(device).type == "jax")
        and kwargs.get("layout") in (None, torch.strided)
        and not kwargs.get("pin_memory")
        and kwargs.get("memory_format") in (None, torch.preserve_format)
    )


def _real_halves(t: torch.Tensor) -> jax.Array:
    """The real halves of complex32 `t` as float16, their bits as they are (CPU's complex<Half> to Half
    cast: a signalling NaN stays one; through float it would be quieted)."""
    warnings.warn("Casting complex values to real discards the imaginary part", UserWarning, stacklevel=3)
    return jax.lax.bitcast_convert_type((ch.bits_of(t) & 0xFFFF).astype(jnp.uint16), jnp.float16)


def half_conversion(name: str, args, kwargs) -> torch.Tensor | None:
    """_to_copy / copy_ of complex32 into float16 on jax as CPU casts it (_real_halves); else None.
    (float16 to complex32 goes through float on CPU too: the complex64 path.)"""
    if name == "aten::copy_":
        dst, src = args[0], args[1] if len(args) > 1 else None
        if dst.dtype is torch.float16 and isinstance(src, torch.Tensor) and src.dtype is _C32 and tensor.is_jax(src):
            try:
                if torch.broadcast_shapes(src.shape, dst.shape) != dst.shape:
                    return None  # (the kernel words copy_'s error)
            except RuntimeError:
                return None
            tensor.write(dst, jnp.broadcast_to(_real_halves(src), tuple(dst.shape)))
            return dst
        return None
    self, dtype = args[0], kwargs.get("dtype")
    if len(args) == 1 and tensor.is_jax(self) and _plain_copy(kwargs) and self.dtype is _C32 and dtype is torch.float16:
        return ch.placed(_real_halves(self), self.stride())
    return None


def promoted_moves(name: str, args, kwargs):
    """where/cat/stack whose result is complex32 with values of other dtypes: those cast to complex32
    first, as TensorIterator and cat cast them, so that the complex32 values move as bits."""
    if name == "aten::where.self" and len(args) == 3:
        if torch.result_type(args[1], args[2]) is not _C32:
            return args, kwargs
        return [args[0], *(t if t.dtype is _C32 else t.to(_C32) for t in args[1:])], kwargs
    if name in ("aten::cat", "aten::stack") and args and isinstance(args[0], (list, tuple)):
        tensors = [t for t in args[0] if isinstance(t, torch.Tensor) and t.numel()]
        if not tensors or functools.reduce(torch.promote_types, (t.dtype for t in tensors)) is not _C32:
            return args, kwargs
        return [[t if t.dtype is _C32 else t.to(_C32) for t in args[0]], *args[1:]], kwargs
    return args, kwargs
