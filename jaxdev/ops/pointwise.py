"""Elementwise unary ops. One line per op; the factories below hold what they share.

Dtypes follow PyTorch exactly: the result dtype is torch's own (int->float for float-valued ops,
bool for predicates), and float16/bfloat16 are computed in float32 and rounded once, as PyTorch's
CPU kernels do ("opmath").
"""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
import torch

from jaxdev import dtypes
from jaxdev.ops.kit import (
    J,
    apply,
    capabilities,
    complex_c10,
    complex_c99,
    cpu_numerics,
    float_of,
    formulas,
    plain,
    same_dtype_bodies,
    typed_bodies,
)
from jaxdev.ops.kit import complex_trig_specials as trig_c
from jaxdev.ops.kit import transcendentals as tm
from jaxdev.ops.kit import transcendentals_complex as tc
from jaxdev.ops.kit import transcendentals_inverse as ti
from jaxdev.ops.registry import aten, register_functional


def _sign(x):
    """CPU's sign of a real number, (0 < x) - (x < 0): NaN gives 0 and -0 gives +0 (jnp.sign gives
    NaN and -0; found by OpInfo's reference inputs, sign and sgn float64)."""
    return (x > 0).astype(x.dtype) - (x < 0).astype(x.dtype)


_ABS, _SIGN = plain(complex_c99.abs), plain(_sign)


# --- unary ---------------------------------------------------------------------------------------


def unary_float(op, fn, *, refuse=lambda dtype: None):
    """Float-valued op: integer and bool inputs give the default float dtype. `refuse(dtype)`: the
    error CPU raises for a dtype the op does not take, or None."""
    fn = plain(fn)

    @register_functional(op, fast={op: same_dtype_bodies(fn, 1, lambda d: float_of(d) is d and refuse(d) is None)})
    def kernel(self):
        error = refuse(self.dtype)
        if error is not None:
            raise error
        dt = float_of(self.dtype)
        return apply(fn, dt, dt, (self,))


def unary_same(op, fn, *, refuse=lambda dtype: None):
    """`refuse(dtype)`: the error CPU raises for a dtype the op does not take, or None."""
    fn = plain(fn)

    @register_functional(op, fast={op: same_dtype_bodies(fn, 1, lambda d: refuse(d) is None)})
    def kernel(self):
        error = refuse(self.dtype)
        if error is not None:
            raise error
        return apply(fn, self.dtype, self.dtype, (self,))


def unary_bool(op, fn, *, refuse=lambda dtype: None):
    fn = plain(fn)

    @register_functional(op, fast={op: typed_bodies(fn, 1, lambda d: (d, torch.bool) if refuse(d) is None else None)})
    def kernel(self):
        error = refuse(self.dtype)
        if error is not None:
            raise error
        return apply(fn, self.dtype, torch.bool, (self,))


def _erfinv(y):
    """CPU's calc_erfinv (Math.h): a rational first guess (central range |y| <= 0.7, else in
    sqrt(-log((1 - |y|) / 2))), then two Newton steps on erf, in the input's float dtype (JAX's own
    erfinv, a different polynomial, was up to 5.6e-6 relative away in float32)."""
    t = y.dtype

    wide = cpu_numerics.wide_dtype(t)

    def poly(z, coeffs):
        acc = jnp.asarray(coeffs[0], t)
        for k in coeffs[1:]:
            acc = acc * z + jnp.asarray(k, t)
        return acc

    y_abs = jnp.abs(y)
    one = jnp.asarray(1.0, t)
    z_c = y * y
    central = (
        y
        * poly(z_c, (-0.140543331, 0.914624893, -1.645349621, 0.886226899))
        / poly(z_c, (0.012229801, -0.329097515, 1.442710462, -2.118377725, 1.0))
    )
    tail_abs = jnp.where(y_abs <= 0.7, jnp.asarray(0.5, t), y_abs)  # keep the unused branch finite
    z_t = jnp.sqrt(-tm.log((one - tail_abs) / jnp.asarray(2.0, t)))
    tail = jnp.copysign(poly(z_t, (1.641345311, 3.429567803, -1.624906493, -1.970840454)), y) / poly(
        z_t, (1.637067800, 3.543889200, 1.0)
    )
    x = jnp.where(y_abs <= 0.7, central, tail)
    two_over_sqrt_pi = jnp.asarray(2.0, t) * jnp.asarray(1 / math.sqrt(math.pi), t)  # c10::frac_1_sqrt_pi
    # libm's erff and expf are (nearly) correctly rounded: evaluate them wider and round

    def erf(v):
        return tm.erf(v.astype(wide)).astype(t)

    for _ in range(2):
        x = x - (erf(x) - y) / (two_over_sqrt_pi * tm.exp((-x * x).astype(wide)).astype(t))
    x = jnp.where(y_abs == 1, jnp.copysign(jnp.asarray(jnp.inf, t), y), x)
    return jnp.where(y_abs > 1, jnp.asarray(jnp.nan, t), x)


def _float32_in_float64(fn):
    """`fn` for float32 values taken in float64 and rounded once (cpu_numerics.widened), as is for
    other dtypes: XLA's float32 sinh and cosh (exp(|x| + log(1/2)): the rounded sum moves the
    exponent) were up to 24 ulps off (1.5e-6 relative, past float32's tolerance: sinh of integer
    tensors, which CPU computes in float32, came out wrong), its exp2 (exp(x * ln 2)) 34 ulps. Where
    float64 is emulated (a TPU, which raised on these in float64) fn computes in float32 on
    transcendentals.py's functions."""
    wide = cpu_numerics.widened(fn)

    def run(x):
        return wide(x) if x.dtype == jnp.float32 else fn(x)

    run.__name__ = run.__qualname__ = fn.__name__
    return run


def _hyperbolic(sign):
    """sinh (sign -1) or cosh (sign 1) of a real x as (e^|x| + sign e^-|x|) / 2 from one exp, near
    exp's own error (XLA's float64 sinh/cosh were ~10 ulps off), sinh's small |x| < 1 as XLA's
    (expm1-based); past exp's overflow, where the result is still finite, (e^(|x|/2) / 2) e^(|x|/2)."""
    fn = jnp.sinh if sign < 0 else jnp.cosh
    complex_fn = trig_c.sinh if sign < 0 else trig_c.cosh

    def hyperbolic(x):
        if jnp.iscomplexobj(x):
            return complex_fn(x)
        a = jnp.abs(x)
        e = tm.exp(a)
        half = tm.exp(a * 0.5)  # halvings as products (exact either way); 1 / e IEEE's where a TPU's is
        # not (cpu_numerics.divide: its 2 ulps, and 200 for e past 2^100, had sinh and cosh 7 ulps from
        # CPU's under tests/tpu_emulation.py)
        big = jnp.where(jnp.isinf(e), (half * 0.5) * half, (e + cpu_numerics.divide(sign, e)) * 0.5)
        if sign > 0:
            return big
        return jnp.where(a < 1, _sinh_small(x, fn), jnp.copysign(big, x))

    hyperbolic.__name__ = fn.__name__
    return hyperbolic


def _sinh_small(x, fn):
    """sinh of |x| < 1: XLA's in float64 (on CPU float32 is widened to it); in float32 (where float64
    is emulated) from one expm1, sinh = (u + u / (u + 1)) / 2 with u = expm1(|x|), within 2 ulps."""
    if x.dtype != jnp.float32:
        return fn(x)
    u = tm.expm1(jnp.abs(x))
    return jnp.copysign((u + cpu_numerics.divide(u, u + 1)) * 0.5, x)


def _exp2(x):
    """2^x as 2^round(x) (exact, ldexp) times 2^f for the rest |f| <= 1/2: integers give exact
    powers of two, as CPU's exp2 does (XLA's exp(x * ln 2) gave 2^-3 = 0.12500000000000003 in
    float64); infinities and NaN as IEEE's exp2."""
    if jnp.iscomplexobj(x):
        return complex_c10.exp2(x)
    if tm.own(x):  # jaxdev's (transcendentals_inverse): jnp.ldexp's 2 ** n is XLA's pow
        return ti.exp2(x)
    info = jnp.finfo(x.dtype)
    n = jnp.round(jnp.clip(jnp.nan_to_num(x), 2 * info.minexp - 4, 2 * info.maxexp + 4))
    f = tm.exp(jnp.where(jnp.isfinite(x), x - n, 0) * jnp.asarray(math.log(2), x.dtype))
    out = jnp.ldexp(f, n.astype(jnp.int32))
    return jnp.where(jnp.isnan(x), x, jnp.where(jnp.isinf(x), jnp.where(x > 0, x, 0), out))


def _no_vml_complex(name):
    """CPU's erf, erfc and erfinv kernels (`<name>_vml_cpu`) have no complex case."""

    def refuse(dtype):
        if dtype.is_complex:
            return NotImplementedError(f"\"{name}_vml_cpu\" not implemented for '{dtypes.scalar_name(dtype)}'")
        return None

    return refuse


_FLOAT_REFUSALS = {
    aten.erf.default: _no_vml_complex("erf"),
    aten.erfc.default: _no_vml_complex("erfc"),
    aten.erfinv.default: _no_vml_complex("erfinv"),
}

for _op, _fn in [
    (aten.sin.default, trig_c.sin),
    (aten.cos.default, trig_c.cos),
    (aten.tan.default, trig_c.tan),
    (aten.asin.default, complex_c99.asin),
    (aten.acos.default, complex_c99.acos),
    (aten.atan.default, complex_c99.atan),
    (aten.sinh.default, _float32_in_float64(_hyperbolic(-1))),
    (aten.cosh.default, _float32_in_float64(_hyperbolic(1))),
    (aten.tanh.default, trig_c.tanh),
    (aten.asinh.default, complex_c99.asinh),
    (aten.acosh.default, complex_c99.acosh),
    (aten.atanh.default, complex_c99.atanh),
    (aten.exp.default, complex_c99.exp),
    (aten.exp2.default, _float32_in_float64(_exp2)),
    (aten.expm1.default, complex_c10.for_complex(complex_c10.expm1, tm.expm1)),
    (aten.log.default, complex_c99.log),
    (aten.log2.default, complex_c99.log2),  # complex64 on the own log where those are chosen
    (aten.log10.default, complex_c99.log10),
    (aten.log1p.default, complex_c10.for_complex(complex_c10.log1p, tc.log1p)),
    (aten.sqrt.default, complex_c99.sqrt),
    (aten.rsqrt.default, complex_c10.for_complex(complex_c10.rsqrt, formulas.rsqrt)),  # CPU's 1 / sqrt
    (aten.sigmoid.default, complex_c10.for_complex(complex_c10.sigmoid, tm.sigmoid)),
    (aten.erf.default, tm.erf),
    (aten.erfc.default, tm.erfc),
    (aten.erfinv.default, _erfinv),
    (aten.reciprocal.default, complex_c10.for_complex(complex_c10.reciprocal, formulas.reciprocal)),
]:
    unary_float(_op, _fn, refuse=_FLOAT_REFUSALS.get(_op, lambda dtype: None))


def _frac(x):
    return x - jnp.trunc(x)


def _relu(x):
    return jnp.maximum(x, jnp.zeros((), x.dtype))


def _bitwise_not(x):
    return jnp.logical_not(x) if x.dtype == jnp.bool_ else jnp.invert(x)


def _no_bool_negation(dtype):
    if dtype == torch.bool:
        return RuntimeError(
            "Negation, the `-` operator, on a bool tensor is not supported. If you are trying to invert a mask, "
            "use the `~` or `logical_not()` operator instead."
        )
    return None


def _integers_only(dtype):
    if dtype.is_floating_point or dtype.is_complex:
        return NotImplementedError(f"\"bitwise_not_cpu\" not implemented for '{dtypes.scalar_name(dtype)}'")
    return None


def _rounding(name):
    """floor, ceil, trunc and round: integers are their own value; CPU's `<name>_vml_cpu` has no Bool
    case, and complex inputs are refused before it (round's with the kernel's words)."""

    def refuse(dtype):
        if dtype.is_complex and name != "round":
            return NotImplementedError(f"{name} is not supported for complex inputs")
        if dtype == torch.bool or dtype.is_complex:
            return NotImplementedError(f"\"{name}_vml_cpu\" not implemented for '{dtypes.scalar_name(dtype)}'")
        return None

    return refuse


def _floats_only_frac(dtype):
    if not dtype.is_floating_point:
        return NotImplementedError(f"\"frac_cpu\" not implemented for '{dtypes.scalar_name(dtype)}'")
    return None


def _no_bool_or_complex_relu(dtype):
    if dtype == torch.bool:
        return RuntimeError("Boolean inputs not supported for relu")
    if dtype.is_complex:  # relu is clamp_min(0) on CPU
        return NotImplementedError("clamp is not supported for complex types")
    return None


_REFUSALS = {
    aten.neg.default: _no_bool_negation,
    aten.bitwise_not.default: _integers_only,
    aten.floor.default: _rounding("floor"),
    aten.ceil.default: _rounding("ceil"),
    aten.trunc.default: _rounding("trunc"),
    aten.round.default: _rounding("round"),
    aten.frac.default: _floats_only_frac,
    aten.relu.default: _no_bool_or_complex_relu,
}

for _op, _fn in [
    (aten.neg.default, jnp.negative),
    (aten.floor.default, jnp.floor),
    (aten.ceil.default, jnp.ceil),
    (aten.trunc.default, jnp.trunc),
    (aten.round.default, jnp.round),
    (aten.frac.default, _frac),
    (aten.relu.default, _relu),
    (aten.bitwise_not.default, _bitwise_not),
]:
    unary_same(_op, _fn, refuse=_REFUSALS.get(_op, lambda dtype: None))


def _no_complex_signbit(dtype):
    return NotImplementedError("signbit is not implemented for complex tensors.") if dtype.is_complex else None


def _no_complex_infinity(name):
    def refuse(dtype):
        return RuntimeError(f"{name} does not support complex inputs.") if dtype.is_complex else None

    return refuse


_BOOL_REFUSALS = {
    aten.signbit.default: _no_complex_signbit,
    aten.isneginf.default: _no_complex_infinity("isneginf"),
    aten.isposinf.default: _no_complex_infinity("isposinf"),
}

for _op, _fn in [
    (aten.isnan.default, jnp.isnan),
    (aten.logical_not.default, jnp.logical_not),
    (aten.signbit.default, jnp.signbit),
    (aten.isinf.default, jnp.isinf),
    (aten.isneginf.default, jnp.isneginf),
    (aten.isposinf.default, jnp.isposinf),
]:
    unary_bool(_op, _fn, refuse=_BOOL_REFUSALS.get(_op, lambda dtype: None))


@register_functional(aten.abs.default)
def abs_kernel(self):
    if self.dtype == torch.bool:
        raise NotImplementedError("\"abs_cpu\" not implemented for 'Bool'")
    result = self.dtype.to_real()
    return apply(_ABS, self.dtype, result, (self,))


def _sgn(z):
    magnitude = jnp.abs(z)
    return jnp.where(magnitude == 0, jnp.zeros((), z.dtype), z / magnitude.astype(z.dtype))


@register_functional(aten.sgn.default)
def sgn(self):
    """sign() for real tensors, z/|z| (0 at 0) for complex ones."""
    if self.dtype.is_complex:
        return apply(_sgn, self.dtype, self.dtype, (self,))
    return sign(self)


@register_functional(aten.sign.default)
def sign(self):
    if self.dtype.is_complex:
        raise NotImplementedError(
            "Unlike NumPy, torch.sign is not intended to support complex numbers. Please use torch.sgn instead."
        )
    if self.dtype == torch.bool:
        return J(self)
    return apply(_SIGN, self.dtype, self.dtype, (self,))


@functools.cache
def _round_to(decimals):
    return functools.partial(jnp.round, decimals=decimals)


@register_functional(aten.round.decimals)
def round_decimals(self, *, decimals):
    if not self.dtype.is_floating_point:  # decimals=0 is round's own kernel, which takes integers neither
        name = "round_vml_cpu" if decimals == 0 else "round_cpu"
        raise NotImplementedError(f"\"{name}\" not implemented for '{dtypes.scalar_name(self.dtype)}'")
    return apply(_round_to(decimals), self.dtype, self.dtype, (self,))


def _nan_to_num(x, nan, posinf, neginf):
    return jnp.nan_to_num(x, nan=nan, posinf=posinf, neginf=neginf)


@register_functional(aten.nan_to_num.default)
def nan_to_num(self, nan=None, posinf=None, neginf=None):
    if not (self.dtype.is_floating_point or self.dtype.is_complex):
        return J(self)  # integers hold no NaN or infinity
    info = torch.finfo(self.dtype.to_real() if self.dtype.is_complex else self.dtype)
    fills = (
        0.0 if nan is None else nan,
        info.max if posinf is None else posinf,
        info.min if neginf is None else neginf,
    )
    return apply(_nan_to_num, self.dtype, self.dtype, (self,), fills)


# (unsigned int type, significand bits, exponent bias) of the float types frexp reads bit by bit
_FLOAT_BITS = {jnp.dtype(jnp.float32): (jnp.uint32, 23, 127), jnp.dtype(jnp.float64): (jnp.uint64, 52, 1023)}


def _frexp(x):
    """C's frexp from the bits: XLA's arithmetic flushes subnormals to zero on CPU, where C's frexp
    normalises them (jnp.frexp is off by one exponent there)."""
    uint, m, bias = _FLOAT_BITS[x.dtype]
    width = jnp.iinfo(uint).bits
    bits = jax.lax.bitcast_convert_type(x, uint)
    sign = bits & (uint(1) << (width - 1))
    field = (bits >> m) & uint((1 << (width - 1 - m)) - 1)
    frac = bits & uint((1 << m) - 1)
    length = (width - jax.lax.clz(frac)).astype(jnp.int32)  # bit length of a subnormal's fraction
    normal_exp = field.astype(jnp.int32) - (bias - 1)
    sub_exp = length + 1 - bias - m
    sub_frac = (frac << (m + 1 - length).astype(uint)) & uint((1 << m) - 1)
    subnormal = field == 0
    half = uint(bias - 1) << m  # the exponent field of a value in [0.5, 1)
    mantissa = sign | half | jnp.where(subnormal, sub_frac, frac)
    special = (x == 0) & (frac == 0) | ~jnp.isfinite(x) | (subnormal & (frac == 0))
    mantissa = jnp.where(special, x, jax.lax.bitcast_convert_type(mantissa, x.dtype))
    exponent = jnp.where(special, 0, jnp.where(subnormal, sub_exp, normal_exp))
    return mantissa, exponent.astype(jnp.int32)


@register_functional(aten.frexp.Tensor)
def frexp(self):
    if not self.dtype.is_floating_point:
        raise RuntimeError("torch.frexp() only supports floating-point dtypes")
    capabilities.refuse_float64_bits("torch.frexp", self.dtype)
    x = J(self)
    mantissa, exponent = _frexp(x.astype(jnp.float32) if x.dtype.itemsize < 4 else x)
    return mantissa.astype(x.dtype), exponent
