"""torch.complex32 (ComplexHalf, torch.chalf) on jax, served as CPU PyTorch serves it.

JAX has no complex type of two float16 parts. A complex32 tensor lies over a storage whose box holds
uint32 (dtypes.STORED_AS): the bytes of c10::complex<Half>, the real part's float16 bits low, the
imaginary part's high (little-endian), so the storage, its views (view_as_real, view(dtype), untyped
storages) and its copies stay byte for byte CPU's.

CPU gives ComplexHalf few kernels (about the ops listed below); jax serves the same:
  BYTE_MOVES   ops that only move elements (clone, copies, cat, indexing, where, flip's row copies...):
               run on uint32 aliases of the tensors when every moved argument is complex32 (where,
               cat and stack cast other values to complex32 first), so the bits are CPU's exactly
               (NaN payloads included). So do the stores of a number (fill_, masked_fill,
               index_fill, constant_pad_nd: complex_half_values.STORES) with the number's bits, and
               neg / conj_physical / conj views, computed on the bits as CPU's kernels give them.
  ARITHMETIC   ops that compute (add, mul, abs, isnan, eq, copies to and from other dtypes,
               factories...): each complex32 argument is decoded to complex64 (exact), every other
               floating argument and number rounded to half first where the op's common dtype is
               complex32 (TensorIterator casts its inputs to it; CPU rounds a Python number too),
               the complex64 kernel runs, and each result whose dtype is complex32 on CPU is rounded
               part by part to float16 (float16 for a float result such as abs's). A complex32
               argument the op writes gets the rounded values back through its own strides.
Every other op refuses in one sentence as CPU does (`"sum" not implemented for 'ComplexHalf'`):
dtypes.to_jax_dtype raises ComplexHalfError on reading a complex32 tensor, which the registry names
with the op. New complex32 results warn once that ComplexHalf support is experimental, as CPU's
empty_generic does (each time under torch.set_warn_always(True)).
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from jaxdev import dtypes, tensor
from jaxdev.ops.carriers import bit_dtypes, complex_half_values
from jaxdev.ops.carriers.complex_half_bits import (
    aliased,
    bits_of,
    conj_bits,
    neg_bits,
    placed,
    tensors_of,
    value_tensors,
    warn_experimental,
)

_C32 = torch.complex32
_CARRIER = torch.uint32
_DENSE_WIDE = (torch.float32, torch.float64, torch.bfloat16, torch.complex64, torch.complex128)


def _names(*ops: str) -> frozenset:
    return frozenset("aten::" + op for op in ops)


# Ops that move elements only -> the arguments holding the elements moved (by position; out= too):
# the uint32 bits are moved when every one of them is complex32 (indices, masks, conditions aside).
BYTE_MOVES: dict[str, tuple[int, ...]] = {
    **dict.fromkeys(_names("copy_", "_copy_from", "_copy_from_and_resize"), (0, 1)),
    **dict.fromkeys(_names("index_put_", "index_put", "_index_put_impl_"), (0, 2)),
    **dict.fromkeys(_names("index_copy_", "index_copy"), (0, 3)),
    "aten::where.self": (1, 2),
    **dict.fromkeys(
        _names(
            "clone", "_to_copy", "cat", "cat.out", "stack", "stack.out", "index_select", "index.Tensor",
            "repeat", "roll", "tril", "triu", "tril_", "triu_", "narrow_copy", "permute_copy", "t_copy",
            "diagonal_copy", "expand_copy", "unfold_copy", "zero_", "flip", "masked_select", "diag_embed",
            "alias_copy", "view_copy", "transpose_copy", "squeeze_copy", "unsqueeze_copy", "select_copy.int",
            "slice_copy.Tensor", "detach_copy",
        ),
        (0,),
    ),
}  # fmt: skip

# Ops CPU computes for ComplexHalf: served on complex64 values, rounded back.
ARITHMETIC = _names(
    "add.Tensor", "add.Scalar", "add_.Tensor", "add_.Scalar", "add.out", "sub.Tensor", "sub.Scalar",
    "sub_.Tensor", "sub_.Scalar", "sub.out", "mul.Tensor", "mul.Scalar", "mul_.Tensor", "mul_.Scalar",
    "mul.out", "neg", "neg_", "neg.out", "_conj_physical", "conj_physical_", "conj_physical.out", "abs",
    "abs.out", "isnan", "isinf", "eq.Tensor", "eq.Scalar", "ne.Tensor", "ne.Scalar", "sgn", "sgn_",
    "sgn.out", "addcmul", "addcmul_", "addcmul.out", "fill_.Scalar", "fill_.Tensor", "masked_fill.Scalar",
    "masked_fill_.Scalar", "masked_fill.Tensor", "masked_fill_.Tensor", "index_fill_.int_Scalar",
    "index_fill.int_Scalar", "index_add_", "index_add", "any", "all", "any.dim", "all.dim", "any.dims",
    "all.dims", "any.out", "all.out", "any.dims_out", "all.dims_out", "any.all_out", "all.all_out", "count_nonzero",
    "count_nonzero.dim_IntList", "nonzero", "_local_scalar_dense", "constant_pad_nd", "complex",
    "normal_", "uniform_", "randn", "rand", "randn.generator", "rand.generator", "randn_like", "rand_like",
    "empty.memory_format", "empty.out", "empty_strided", "empty_like", "empty_permuted", "zeros", "ones",
    "full", "zeros_like", "ones_like", "full_like", "new_zeros", "new_ones", "new_full", "new_empty",
    "new_empty_strided", "scalar_tensor",
)  # fmt: skip
ARITHMETIC = ARITHMETIC | frozenset(BYTE_MOVES)  # with other dtypes among their values, they convert as copies do


# --- bits <-> values ----------------------------------------------------------------------------


# --- which path -----------------------------------------------------------------------------------


def involves(args, kwargs) -> bool:
    """Whether a call has a complex32 tensor argument or asks for dtype=complex32 (the hot path of
    every call of the ops served here: one dtype test per tensor argument, 0.3 us for two)."""
    tensor_type, c32 = torch.Tensor, _C32
    for value in args:
        if isinstance(value, tensor_type):
            if value.dtype is c32:
                return True
        elif isinstance(value, (list, tuple)):
            for t in value:
                if isinstance(t, tensor_type) and t.dtype is c32:
                    return True
    if kwargs:
        for key, value in kwargs.items():
            if value is c32 and key == "dtype":
                return True
            if isinstance(value, tensor_type) and value.dtype is c32:
                return True
    return False


def _on_bits(name: str, args, kwargs) -> bool:
    """A byte move of complex32 values only, which the uint32 bits serve exactly."""
    if name not in BYTE_MOVES or kwargs.get("dtype", _C32) not in (_C32, None):
        return False
    if name.startswith(("aten::index_put", "aten::_index_put_impl_")):
        accumulate = args[3] if len(args) > 3 else kwargs.get("accumulate", False)
        if accumulate:
            return False
    moved = [args[i] for i in BYTE_MOVES[name] if i < len(args)] + [kwargs.get("out")]
    tensors = [t for value in moved for t in tensors_of(value)]
    if not all(t.dtype is _C32 for t in tensors):
        return False
    written = args[0] if name.split(".")[0].endswith("_") else args[1] if name in _COPY_FROM else kwargs.get("out")
    return not any(t.is_conj() or t.is_neg() for t in tensors_of(written))


_PROMOTING = frozenset({"aten::where.self", "aten::cat", "aten::stack"})  # (they cast to a common dtype)
_COPY_FROM = frozenset({"aten::_copy_from", "aten::_copy_from_and_resize"})  # (self, dst): dst is written
# Ops that flip signs: computed on the bits as CPU's kernels give them (a fused program would
# otherwise fold the float round trip that quiets a NaN away).
_SIGN_OPS = {
    "aten::_conj_physical": conj_bits,
    "aten::conj_physical_": conj_bits,
    "aten::neg": neg_bits,
    "aten::neg_": neg_bits,
}


def _signs_flipped(name: str, t: torch.Tensor) -> torch.Tensor:
    value = aliased(placed(_SIGN_OPS[name](bits_of(t)), t.stride()), _C32)
    if name.endswith("_"):
        return t.copy_(value)
    warn_experimental()
    return value


# Ops whose source must have self's dtype: (self's position, the source's, CPU's message).
_SAME_DTYPE = {
    **dict.fromkeys(
        _names("index_add", "index_add_"),
        (0, 3, "index_add_(): self ({}) and source ({}) must have the same scalar type"),
    ),
    **dict.fromkeys(
        _names("index_copy", "index_copy_"),
        (0, 3, "index_copy_(): self and source expected to have the same dtype, but got (self) {} and (source) {}"),
    ),
    **dict.fromkeys(
        _names("index_put", "index_put_", "_index_put_impl_"),
        (
            0,
            2,
            "Index put requires the source and destination dtypes match, got {} for the destination and {} for the source.",
        ),
    ),
}


def _check_same_dtype(name: str, args) -> None:
    """CPU's refusal of a source of another dtype, which decoding to complex64 would hide."""
    rule = _SAME_DTYPE.get(name)
    if rule is None or len(args) <= max(rule[0], rule[1]):
        return
    self, source = args[rule[0]], args[rule[1]]
    if isinstance(source, torch.Tensor) and source.dtype is not self.dtype:
        raise RuntimeError(rule[2].format(dtypes.scalar_name(self.dtype), dtypes.scalar_name(source.dtype)))


def _refuse(kernel: str) -> NotImplementedError:
    return NotImplementedError(f"\"{kernel}\" not implemented for 'ComplexHalf'")


def serving(op, fn: Callable) -> Callable:
    """`fn`, serving complex32 as CPU does when `op` is one CPU computes for ComplexHalf; any other op
    is `fn` itself (a complex32 argument then refuses through dtypes.to_jax_dtype)."""
    name = op.name()
    if name not in ARITHMETIC:
        return fn

    def kernel(*args, **kwargs):
        if not involves(args, kwargs) and not (name == "aten::complex" and _half_parts(args, kwargs)):
            return fn(*args, **kwargs)
        _check_same_dtype(name, args)
        if name in _SIGN_OPS and len(args) == 1 and tensor.is_jax(args[0]) and args[0].dtype is _C32:
            return _signs_flipped(name, args[0])
        if name in ("aten::_to_copy", "aten::copy_"):
            converted = complex_half_values.half_conversion(name, args, kwargs)
            if converted is not None:
                return converted
        if name in _PROMOTING:
            args, kwargs = complex_half_values.promoted_moves(name, args, kwargs)
        if name == "aten::flip" and not bit_dtypes.flip_copies_rows(args, kwargs):
            raise _refuse("flip_cpu")
        if _on_bits(name, args, kwargs):
            return on_bits(fn, args, kwargs)
        stored = complex_half_values.stored_as_bits(name, args, kwargs)
        if stored is not None:
            return on_bits(fn, *stored)
        if name == "aten::complex" and _jax_halves(args):
            return complex_half_values.complex_of_halves(*args)
        return complex_half_values.on_complex64(op, fn, args, kwargs)

    kernel.__qualname__ = fn.__qualname__
    kernel.__name__ = getattr(fn, "__name__", "kernel")
    kernel.__wrapped__ = fn
    return kernel


def _jax_halves(args) -> bool:
    return len(args) == 2 and all(tensor.is_jax(t) and t.dtype is torch.float16 for t in args)


def _half_parts(args, kwargs) -> bool:
    """complex(real, imag) of float16 parts: a complex32 result."""
    return any(t.dtype is torch.float16 for t in value_tensors(args, kwargs))


def _carried(value, originals: dict):
    """value with each complex32 tensor replaced by its uint32 alias (recorded in `originals`).
    (Module-level, as every helper here that recurses: a nested recursive function is a reference
    cycle, which would keep its tensors alive until the next garbage collection.)"""
    if isinstance(value, (list, tuple)):
        return type(value)(_carried(v, originals) for v in value)
    if not isinstance(value, torch.Tensor) or value.dtype is not _C32:
        return value
    if value.is_conj() or value.is_neg():
        if not tensor.is_jax(value):
            value = value.resolve_conj().resolve_neg()
        else:  # (never an argument written into: _on_bits)
            alias = placed(bits_of(value), value.stride())
            originals[id(alias)] = value
            return alias
    alias = aliased(value, _CARRIER)
    originals[id(alias)] = value
    return alias


def _labelled(r, originals: dict):
    if isinstance(r, (tuple, list)):
        return type(r)(_labelled(x, originals) for x in r)
    if not isinstance(r, torch.Tensor):
        return r
    if id(r) in originals:
        return originals[id(r)]  # an in-place op returns its own argument
    if r.dtype is _CARRIER:
        warn_experimental()
        return aliased(r, _C32)
    return r


def on_bits(fn: Callable, args, kwargs):
    """`fn` on uint32 aliases of the complex32 arguments, its uint32 results labelled complex32."""
    originals: dict[int, torch.Tensor] = {}
    args = [_carried(a, originals) for a in args]
    kwargs = {k: (_CARRIER if k == "dtype" and v is _C32 else _carried(v, originals)) for k, v in kwargs.items()}
    return _labelled(fn(*args, **kwargs), originals)
