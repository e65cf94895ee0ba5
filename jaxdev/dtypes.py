"""The one table between torch dtypes and JAX dtypes.

JAX runs with x64 on (set in `jaxdev.device`), so every entry below is exact: a tensor's torch
dtype and its jax array's dtype always correspond one to one.
"""

from __future__ import annotations

import functools
import math
import platform

import jax
import jax.numpy as jnp
import numpy as np
import torch

from jaxdev import tracing

TORCH_TO_JAX: dict[torch.dtype, np.dtype] = {
    torch.bool: jnp.dtype(jnp.bool_),
    torch.uint8: jnp.dtype(jnp.uint8),
    torch.uint16: jnp.dtype(jnp.uint16),
    torch.uint32: jnp.dtype(jnp.uint32),
    torch.uint64: jnp.dtype(jnp.uint64),
    torch.int8: jnp.dtype(jnp.int8),
    torch.int16: jnp.dtype(jnp.int16),
    torch.int32: jnp.dtype(jnp.int32),
    torch.int64: jnp.dtype(jnp.int64),
    torch.float16: jnp.dtype(jnp.float16),
    torch.bfloat16: jnp.dtype(jnp.bfloat16),
    torch.float32: jnp.dtype(jnp.float32),
    torch.float64: jnp.dtype(jnp.float64),
    torch.complex64: jnp.dtype(jnp.complex64),
    torch.complex128: jnp.dtype(jnp.complex128),
    torch.float8_e4m3fn: jnp.dtype(jnp.float8_e4m3fn),
    torch.float8_e5m2: jnp.dtype(jnp.float8_e5m2),
    torch.float8_e4m3fnuz: jnp.dtype(jnp.float8_e4m3fnuz),
    torch.float8_e5m2fnuz: jnp.dtype(jnp.float8_e5m2fnuz),
}
JAX_TO_TORCH: dict[np.dtype, torch.dtype] = {v: k for k, v in TORCH_TO_JAX.items()}

# The names PyTorch's own messages give dtypes (c10::ScalarType): "expected Long but got Float".
_SCALAR_NAMES = {
    torch.bool: "Bool", torch.uint8: "Byte", torch.int8: "Char", torch.int16: "Short", torch.int32: "Int",
    torch.int64: "Long", torch.float16: "Half", torch.bfloat16: "BFloat16", torch.float32: "Float",
    torch.float64: "Double", torch.complex32: "ComplexHalf", torch.complex64: "ComplexFloat",
    torch.complex128: "ComplexDouble", torch.uint16: "UInt16", torch.uint32: "UInt32", torch.uint64: "UInt64",
    torch.float8_e4m3fn: "Float8_e4m3fn", torch.float8_e5m2: "Float8_e5m2",
    torch.float8_e4m3fnuz: "Float8_e4m3fnuz", torch.float8_e5m2fnuz: "Float8_e5m2fnuz",
}  # fmt: skip

_HALF = (jnp.dtype(jnp.float16), jnp.dtype(jnp.bfloat16))


def scalar_name(dtype: torch.dtype) -> str:
    """The name PyTorch's error messages give a dtype: Float, Long, ComplexDouble, ..."""
    return _SCALAR_NAMES.get(dtype, str(dtype))


def name(dtype: torch.dtype) -> str:
    """float32, int64, ...: the dtype's name in torch's namespace."""
    return str(dtype).removeprefix("torch.")


def opmath(jdt) -> np.dtype:
    """The dtype an op computes in: float16/bfloat16 in float32, rounded once at the end, as
    PyTorch's CPU kernels do ("opmath"); every other dtype in itself."""
    return jnp.dtype(jnp.float32) if jdt in _HALF else jdt


# Same-width integer dtypes used to move bytes of dtypes numpy cannot hold (bfloat16, float8)
# between torch and numpy without any conversion of values.
_BIT_CARRIER = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}


def needs_carrier(dtype: torch.dtype) -> bool:
    """torch.Tensor.numpy() refuses these (bfloat16, wide unsigned ints, float8)."""
    return dtype in (torch.bfloat16, torch.uint16, torch.uint32, torch.uint64) or (
        dtype.is_floating_point and dtype.itemsize == 1
    )


class UnsupportedError(TypeError):
    """A tensor jaxdev cannot hold by design (not a bug): the coverage auditor counts a cell whose
    jax run raises this as `unsupported`, apart from failures."""


class UnsupportedDtypeError(UnsupportedError):
    """A dtype that has no JAX equivalent (quantized, complex32, bits, ...)."""


class PlatformDtypeError(RuntimeError):
    """A dtype whose programs this platform's XLA cannot compile (complex128 on a TPU): jax tensors of
    it are refused there. A RuntimeError, not an UnsupportedError (a TypeError): a TypeError raised
    inside `tensor * 2j` makes Python answer 'unsupported operand type(s)' instead of this message.
    The coverage auditor counts it as `unsupported`."""


class UnsupportedLayoutError(UnsupportedError):
    """A non-strided layout (sparse COO/CSR/CSC/BSR/BSC, mkldnn): jax tensors are dense and strided."""


# Dtypes with no JAX type whose tensors jax still holds, as raw bytes of these carriers: CPU PyTorch
# gives them no arithmetic either, only ops that move bytes (jaxdev/ops/carriers/bit_dtypes.py).
BYTE_CARRIERS: dict[torch.dtype, torch.dtype] = {
    torch.bits1x8: torch.uint8,
    torch.bits2x4: torch.uint8,
    torch.bits4x2: torch.uint8,
    torch.bits8: torch.uint8,
    torch.bits16: torch.uint16,
    torch.float4_e2m1fn_x2: torch.uint8,
}


# What a storage of each such dtype holds: the raw carriers above, and complex32 as uint32 (the bytes of
# c10::complex<Half>: real float16 bits low, imaginary high), served by jaxdev/ops/carriers/complex_half.py.
STORED_AS: dict[torch.dtype, torch.dtype] = {**BYTE_CARRIERS, torch.complex32: torch.uint32}


class ComplexHalfError(NotImplementedError):
    """An op CPU gives no ComplexHalf kernel either (sum, exp, div...): raised where a kernel reads a
    complex32 tensor's values; the registry names the op (`"sum" not implemented for 'ComplexHalf'`)."""

    def naming(self, op) -> NotImplementedError:
        kernel = op.name().removeprefix("aten::").split(".")[0]
        return NotImplementedError(f"\"{kernel}\" not implemented for 'ComplexHalf'")


class RawBytesDtypeError(NotImplementedError):
    """An op that needs arithmetic on a dtype jax holds only as raw bytes. CPU raises NotImplementedError
    there too; a TypeError would make `x == y` answer False (Python's fallback for a refused __eq__)."""


# platform (jax.default_backend()) -> dtype -> why this platform's XLA cannot hold tensors of it
# (jaxdev/ops/kit/capabilities.py fills it through `refuse`: complex128 on a TPU)
PLATFORM_REFUSALS: dict[str, dict[torch.dtype, str]] = {}
# the dtypes some platform refuses (complex128): only asking for one of them asks the platform, which
# starts JAX's backend (a CPU-only script, or one that calls jax.distributed.initialize after `import
# jaxdev`, must not find it started by a float32 request)
REFUSED_SOMEWHERE: set[torch.dtype] = set()


def refuse(platform: str, refusals: dict[torch.dtype, str]) -> None:
    """Tensors of these dtypes are refused on `platform`, each with its sentence."""
    PLATFORM_REFUSALS.setdefault(platform, {}).update(refusals)
    REFUSED_SOMEWHERE.update(refusals)
    refused_here.cache_clear()


@functools.cache
def refused_here() -> dict[torch.dtype, str]:
    """The dtypes this process's platform cannot hold, with why (PLATFORM_REFUSALS); {} on CPU."""
    return PLATFORM_REFUSALS.get(jax.default_backend(), {})


def to_jax_dtype(dtype: torch.dtype) -> np.dtype:
    try:
        jdt = TORCH_TO_JAX[dtype]
        if dtype in REFUSED_SOMEWHERE:
            refusals = refused_here()
            if dtype in refusals:
                raise PlatformDtypeError(refusals[dtype])
        return jdt
    except KeyError:
        if dtype in BYTE_CARRIERS:
            raise RawBytesDtypeError(
                f"dtype {dtype} is not supported by this op on device 'jax': it holds raw bits, which jax "
                "tensors only make, zero, copy, clone, concatenate, select and view, as CPU does"
            ) from None
        if dtype is torch.complex32:
            raise ComplexHalfError(
                "this op is not implemented for 'ComplexHalf' (torch.complex32) on device 'jax', as on CPU"
            ) from None
        raise UnsupportedDtypeError(
            f"dtype {dtype} is not supported on device 'jax': JAX has no equivalent type"
        ) from None


def to_torch_dtype(dtype) -> torch.dtype:
    try:
        return JAX_TO_TORCH[jnp.dtype(dtype)]
    except KeyError:
        raise UnsupportedDtypeError(f"JAX dtype {dtype} has no torch equivalent") from None


def cpu_to_numpy(t: torch.Tensor) -> np.ndarray:
    """A C-contiguous numpy copy of a CPU tensor's values, typed with the matching JAX dtype."""
    if t.layout != torch.strided:
        raise UnsupportedLayoutError(
            f"layout {t.layout} is not supported on device 'jax': jaxdev holds dense strided tensors only"
        )
    jdt = to_jax_dtype(t.dtype)
    t = t.detach().resolve_conj().resolve_neg().contiguous()
    if needs_carrier(t.dtype):
        return t.view(_BIT_CARRIER[t.element_size()]).numpy().copy().view(jdt)
    return t.numpy().copy()


def numpy_to_cpu(a: np.ndarray, dtype: torch.dtype) -> torch.Tensor:
    """A CPU tensor holding a copy of `a` (whose dtype corresponds to `dtype`)."""
    a = np.array(a, order="C", copy=True)  # keeps 0-dim arrays 0-dim, unlike ascontiguousarray
    if needs_carrier(dtype):
        carrier = _BIT_CARRIER[dtype.itemsize]
        return torch.from_numpy(a.view(torch.empty((), dtype=carrier).numpy().dtype)).view(dtype)
    return torch.from_numpy(a)


# The C++ names of the floating and complex types, alike in every spelling CPU prints below (they differ
# in the integer types').
FLOATING_CPP_NAMES = {
    torch.float16: "c10::Half",
    torch.bfloat16: "c10::BFloat16",
    torch.float32: "float",
    torch.float64: "double",
    torch.complex64: "c10::complex<float>",
    torch.complex128: "c10::complex<double>",
}

# c10's TypeMeta names (C++'s own type names), as CPU prints a scalar type in the structured kernels'
# "Expected out tensor to have dtype ..." and in the random samplers' dtype errors.
_TYPE_META_NAMES = {
    torch.bool: "bool",
    torch.uint8: "unsigned char",
    torch.int8: "signed char",
    torch.int16: "short int",
    torch.int32: "int",
    torch.int64: "long int",
    **FLOATING_CPP_NAMES,
}


def type_meta_name(dtype: torch.dtype) -> str:
    return _TYPE_META_NAMES.get(dtype, str(dtype))


# The C++ type names of c10's "value cannot be converted to type T without overflow".
_C_TYPE_NAMES = {
    torch.uint8: "uint8_t",
    torch.uint16: "uint16_t",
    torch.uint32: "uint32_t",
    torch.uint64: "uint64_t",
    torch.int8: "int8_t",
    torch.int16: "int16_t",
    torch.int32: "int",
    torch.int64: "int64_t",
    **FLOATING_CPP_NAMES,
    torch.float8_e4m3fn: "c10::Float8_e4m3fn",
    torch.float8_e4m3fnuz: "c10::Float8_e4m3fnuz",
    torch.float8_e5m2: "c10::Float8_e5m2",
    torch.float8_e5m2fnuz: "c10::Float8_e5m2fnuz",
}
# float8 formats without infinities: c10's checked conversion refuses an infinite value for them
_NO_INF = (torch.float8_e4m3fn, torch.float8_e4m3fnuz, torch.float8_e5m2fnuz)


def _real_overflows(v, dtype: torch.dtype) -> bool:
    if dtype.is_floating_point:
        if isinstance(v, float) and not math.isfinite(v):
            return math.isinf(v) and dtype in _NO_INF  # NaN converts to a float type, inf where it has one
        top = float(torch.finfo(dtype).max)
        return v < -top or v > top
    info = torch.iinfo(dtype)
    if isinstance(v, float):
        return math.isnan(v) or v < info.min or v > info.max
    if info.min == 0 and v < 0:  # negative integers wrap into unsigned types, within their range
        return -v > info.max
    return v < info.min or v > info.max


def scalar_overflows(value, dtype: torch.dtype) -> bool:
    """c10's checked Scalar::to<T>: the value does not fit `dtype` (fill_, full, masked_fill, clamp,
    scatter and where with a scalar, add's alpha)."""
    if dtype == torch.bool or dtype not in _C_TYPE_NAMES or isinstance(value, bool):
        return False
    if dtype.is_complex:
        part = torch.float32 if dtype == torch.complex64 else torch.float64
        parts = (value.real, value.imag) if isinstance(value, complex) else (value,)
        return any(_real_overflows(p, part) for p in parts)
    if isinstance(value, complex):
        if value.imag != 0:
            return True
        value = value.real
    return _real_overflows(value, dtype)


def overflow_mask(v, dtype: torch.dtype):
    """Traceable `scalar_overflows` of an array `v` (None: nothing can overflow `dtype`)."""
    if dtype == torch.bool or dtype not in _C_TYPE_NAMES or v.dtype == jnp.bool_ or dtype in _UNCHECKED_ARRAYS:
        return None  # (uint16/32/64 and float8: arrays are not checked against them; Python scalars are)
    if dtype.is_complex:
        top = float(torch.finfo(torch.float32 if dtype == torch.complex64 else torch.float64).max)
        parts = (jnp.real(v), jnp.imag(v)) if jnp.iscomplexobj(v) else (v,)
        return functools.reduce(jnp.logical_or, [jnp.isfinite(p) & (jnp.abs(p) > top) for p in parts])
    r = jnp.real(v) if jnp.iscomplexobj(v) else v
    if dtype.is_floating_point:
        over = jnp.isfinite(r) & (jnp.abs(r.astype(jnp.float64)) > float(torch.finfo(dtype).max))
    elif jnp.issubdtype(r.dtype, jnp.floating):
        info, wide = torch.iinfo(dtype), r.astype(jnp.float64)
        over = jnp.isnan(wide) | (wide < info.min) | (wide > info.max)
    elif r.dtype == jnp.uint64:
        over = r > torch.iinfo(dtype).max
    else:
        info, wide = torch.iinfo(dtype), r.astype(jnp.int64)
        low = -info.max if info.min == 0 else info.min  # negative integers wrap into unsigned types
        over = (wide < low) | (wide > info.max)
    return over | (jnp.imag(v) != 0) if jnp.iscomplexobj(v) else over


def check_array_fits(v, dtype: torch.dtype) -> None:
    """`check_scalar` for a 0-dim Scalar array (traced or not): CPU's overflow error where it does
    not fit `dtype`, deferred to the program's checks when traced."""
    bad = overflow_mask(v, dtype)
    if bad is not None:
        message = f"value cannot be converted to type {_C_TYPE_NAMES[dtype]} without overflow"
        tracing.check_values(bad, lambda: RuntimeError(message))


def check_scalar(value, dtype: torch.dtype) -> None:
    """Raise CPU's error when a Python scalar does not fit `dtype`."""
    if isinstance(value, (int, float, complex)) and scalar_overflows(value, dtype):
        raise RuntimeError(f"value cannot be converted to type {_C_TYPE_NAMES[dtype]} without overflow")


_UNCHECKED_ARRAYS = (
    torch.uint16,
    torch.uint32,
    torch.uint64,
    torch.float8_e4m3fn,
    torch.float8_e4m3fnuz,
    torch.float8_e5m2,
    torch.float8_e5m2fnuz,
)


# --- converting values as CPU PyTorch does ---------------------------------------------------------

# Floating -> integer conversion of values outside the integer's range (and NaN) is undefined in C++;
# what CPU PyTorch gives is what x86's truncating conversions (cvttss2si/cvttsd2si) give, which return
# the "integer indefinite" value (the type's minimum) for NaN and anything out of range. c10's
# static_cast_with_inter_type converts to uint8 through int64; the compiler converts to int8, int16
# and uint16 through int32. So, measured on this machine's CPU PyTorch for float16/bfloat16/float32/
# float64/complex sources, contiguous and strided, vectorised lengths and scalar tails alike:
#   int64: trunc, INT64_MIN if NaN or out of range; int32: the same in int32;
#   int8/int16/uint16: the int32 result, wrapped (its low bits); uint8: the int64 result, wrapped.
# XLA saturates instead (300.0 -> uint8 255 where CPU gives 44). uint32/uint64 are not emulated: CPU
# gives different values for the same input in its vectorised and scalar loops there. Other hosts
# (ARM saturates in hardware) keep XLA's conversion.
_X86 = platform.machine().lower() in ("x86_64", "amd64", "i386", "i686", "x86")
_CONVERT_THROUGH = {
    jnp.dtype(jnp.int64): jnp.dtype(jnp.int64),
    jnp.dtype(jnp.uint8): jnp.dtype(jnp.int64),
    jnp.dtype(jnp.int32): jnp.dtype(jnp.int32),
    jnp.dtype(jnp.int16): jnp.dtype(jnp.int32),
    jnp.dtype(jnp.int8): jnp.dtype(jnp.int32),
    jnp.dtype(jnp.uint16): jnp.dtype(jnp.int32),
}


_E4M3FN = jnp.dtype(jnp.float8_e4m3fn)
_FLOAT8 = frozenset(
    jnp.dtype(t) for t in (jnp.float8_e4m3fn, jnp.float8_e4m3fnuz, jnp.float8_e5m2, jnp.float8_e5m2fnuz)
)


def convert(x, jdt):
    """`x.astype(jdt)` (traceable) with CPU PyTorch's conversion of floating values to integers
    (see above); complex values to real types keep their real part, to bool test both parts."""
    jdt = jnp.dtype(jdt)
    if x.dtype == jdt:
        return x
    if jdt == jnp.bool_:
        return x != 0  # a complex value is True when either part is nonzero (or NaN)
    if jnp.issubdtype(x.dtype, jnp.complexfloating) and not jnp.issubdtype(jdt, jnp.complexfloating):
        x = jnp.real(x)
    if jdt in _FLOAT8 and jnp.issubdtype(x.dtype, jnp.integer):
        # c10 makes a float8 of an integer through float (XLA's CPU conversion of int8 gave -64 for
        # every value, and of uint8 250 gave 192)
        x = x.astype(jnp.float32)
    if jdt == _E4M3FN and jnp.issubdtype(x.dtype, jnp.floating):
        # c10's float8_e4m3fn saturates: a finite or infinite value past its largest, 448, converts to
        # +-448 (XLA: NaN); NaN stays NaN
        x = jnp.where(jnp.isnan(x), x, jnp.clip(x, -448.0, 448.0))
    if jdt in _HALF and x.dtype == jnp.float64:
        # c10::Half and c10::BFloat16 are built from float: a double rounds to float first, then to
        # the half. XLA's one-step convert rounds twice on most x86 CPUs and once on those with native
        # float16 (AVX512-FP16), so the step through float32 is written here (issue 41)
        x = x.astype(jnp.float32)
    through = _CONVERT_THROUGH.get(jdt) if _X86 else None
    if through is None or not jnp.issubdtype(x.dtype, jnp.floating):
        return x.astype(jdt)
    if x.dtype in _HALF:
        x = x.astype(jnp.float32)  # exact: CPU converts c10::Half/BFloat16 through float
    t = jnp.trunc(x)
    top = float(2 ** (through.itemsize * 8 - 1))
    inside = (t >= -top) & (t < top)  # False for NaN
    wide = jnp.where(inside, jnp.where(inside, t, 0).astype(through), jnp.iinfo(through).min)
    return wide.astype(jdt)  # integer narrowing wraps, as C++'s does
