"""pow in its three forms: CPU's special exponents (0, 1, +-0.5, -1, 2, 3, -2) with their own kernels,
half-precision exponents rounded as CPU reads them, integer powers with CPU's negative exponents."""

from __future__ import annotations

import jax.numpy as jnp
import torch

from jaxdev import dtypes
from jaxdev.ops.binary.rules import POW, as_read
from jaxdev.ops.kit import apply, complex_c10, complex_c99, formulas, result_type
from jaxdev.ops.kit.cpu_numerics import round_to
from jaxdev.ops.registry import aten, register, register_functional, store_into


@register_functional(aten.pow.Tensor_Tensor, aten.pow.Tensor_Scalar)
def pow_tensor(self, exponent):
    common = result_type(self, exponent)
    if common == torch.bool and isinstance(exponent, torch.Tensor):  # a bool number exponent copies
        raise NotImplementedError("\"pow\" not implemented for 'Bool'")
    integral = not (common.is_floating_point or common.is_complex)
    if not isinstance(exponent, torch.Tensor):
        if not (common in (torch.float32, torch.float64) or common.is_complex):  # those read a double
            dtypes.check_scalar(exponent, common)  # c10's checked Scalar::to<scalar_t>: int8 ** 300 raises
        exponent = as_read(exponent, common)
    if integral and not isinstance(exponent, torch.Tensor) and exponent < 0:
        raise RuntimeError("Integers to negative integer powers are not allowed.")
    if not isinstance(exponent, torch.Tensor) and not integral:
        special = _scalar_power(common, exponent)
        if special is not None:
            return apply(special, common, common, (self,))
        if common in (torch.float16, torch.bfloat16):
            exponent = _as_half(exponent, common)
    return apply(_int_pow if integral and common != torch.bool else POW, common, common, (self, exponent))


def _ones(x):
    return jnp.ones_like(x)


def _same(x):
    return x


def _square(x):
    return x * x


def _cube(x):
    return x * x * x


def _inverse_square(x):
    """1 / (x * x); for a complex x, XLA's quotient where the square's parts are finite and non-zero
    (it equals CPU's more often there than Smith's division of our square, which is not CPU's square
    bit for bit: the products differ), CPU's reciprocal (complex_c10) where one is zero or not finite."""
    square = x * x
    if not jnp.iscomplexobj(square):
        return jnp.reciprocal(square)
    plain_parts = (square.real != 0) & (square.imag != 0) & jnp.isfinite(square.real) & jnp.isfinite(square.imag)
    return jnp.where(plain_parts, jnp.reciprocal(square), complex_c10.reciprocal(square))


def _bf16(x):
    return round_to(jnp.bfloat16)(x)


def _cube_bf16(x):
    return _bf16(x * x) * x


def _inverse_square_bf16(x):
    return jnp.reciprocal(_bf16(x * x))


# a complex base through CPU's sqrt, rsqrt and reciprocal kernels' special values (C99's csqrt,
# c10's division)
_SQRT = complex_c99.sqrt
_RSQRT = complex_c10.for_complex(complex_c10.rsqrt, formulas.rsqrt)
_RECIPROCAL = complex_c10.for_complex(complex_c10.reciprocal, jnp.reciprocal)


def _scalar_power(common, exponent):
    """CPU's pow(Tensor, Scalar) for a floating or complex result (Pow.cpp, PowKernel.cpp): exponent 0
    fills 1 and 1 copies (any dtype); float/double/bfloat16/complex take sqrt, rsqrt and reciprocal's
    kernels for 0.5, -0.5 and -1; float/double/complex multiply for 2, 3 and -2 (x*x, x*x*x, 1/(x*x)),
    bfloat16 likewise with its exponent and each product rounded to bfloat16. std::pow's general
    formula (exp(e*log(x)) for complex) is far less exact than the product there. None: std::pow."""
    if exponent == 0:
        return _ones
    if exponent == 1:
        return _same
    if common == torch.float16:
        return None
    if exponent == 0.5:
        return _SQRT
    if exponent == -0.5:
        return _RSQRT
    if exponent == -1:
        return _RECIPROCAL
    bf16 = common == torch.bfloat16
    if bf16:
        exponent = _as_half(exponent, common)
    if exponent == 2:
        return _square
    if exponent == 3:
        return _cube_bf16 if bf16 else _cube
    if exponent == -2:
        return _inverse_square_bf16 if bf16 else _inverse_square
    return None


def _as_half(exponent, dtype):
    """The exponent as CPU's half and bfloat16 kernels read it (Scalar::to<Half>, to<BFloat16>):
    rounded to the dtype (a complex exponent makes the result complex: not reached)."""
    try:
        return torch.tensor(exponent, dtype=dtype).item()
    except Exception:
        return exponent
    try:
        return torch.tensor(exponent, dtype=torch.bfloat16).item()
    except Exception:
        return exponent


def _int_pow(base, e):
    """Integer power as PyTorch computes it: a negative exponent gives 0, except for bases 1 and -1;
    otherwise exact modulo 2^bits (CPU's powi wraps)."""
    e = jnp.asarray(e, base.dtype)
    negative = jnp.where(base == 1, 1, jnp.where(base == -1, jnp.where(e % 2 == 0, 1, -1), 0)).astype(base.dtype)
    return jnp.where(e < 0, negative, _powi(base, jnp.maximum(e, 0)))


def _powi(base, e):
    """base^e for e >= 0 by squaring over every bit of the dtype. JAX's integer power reads only an
    exponent's low 6 bits (2^64 gave 1 for int64, (-55)^127 another wrapped value than CPU's); a
    product wrapped modulo 2^bits is exact modulo 2^bits in any order, so this is CPU's powi's."""
    acc = jnp.ones_like(base)
    e = jnp.broadcast_to(e, jnp.broadcast_shapes(jnp.shape(base), jnp.shape(e)))
    for _ in range(jnp.iinfo(base.dtype).bits):
        acc = jnp.where((e & 1) == 1, acc * base, acc)
        base = base * base
        e = e >> 1
    return acc


@register_functional(aten.pow.Scalar, inplace=False)
def pow_scalar(self, exponent):
    common = torch.result_type(exponent, self)
    if common == torch.bool:
        raise NotImplementedError("\"pow\" not implemented for 'Bool'")
    integral = not (common.is_floating_point or common.is_complex) and common != torch.bool
    if self == 1 and not integral:  # CPU fills 1 (Pow.cpp), whatever the exponent: 1 ** NaN is 1
        return apply(_ones, common, common, (exponent,))
    return apply(_int_pow if integral else POW, common, common, (as_read(self, common), exponent))


@register(aten.pow_.Scalar)
def pow_tensor_scalar_(self, exponent):
    """x.pow_(scalar) is pow.Tensor_Scalar in place. Its overload name pairs it with pow.Scalar (whose
    self is the Scalar), so deriving it by name computed std::pow in float32 with the exponent unrounded,
    missing CPU's bfloat16 rsqrt/sqrt/product kernels (normalize's backward takes pow_(-0.5))."""
    store_into(self, pow_tensor(self, exponent), resize=False)
    return self
