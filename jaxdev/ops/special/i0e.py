"""i0e (torch.special.i0e) as CPU computes it: Cephes' Chebyshev expansions step by step, and in
half precision each element on the path (vector or scalar op) CPU's loop gives it."""

from __future__ import annotations

import jax.numpy as jnp
import torch

from jaxdev import dtypes
from jaxdev.ops.kit import J, apply, float_of, jitted
from jaxdev.ops.kit.cpu_arithmetic import cpu_arithmetic
from jaxdev.ops.kit.cpu_numerics import (
    chebyshev,
    cpu_threads,
    divide,
    divide_by,
    round_to,
    scalar_lanes,
    sqrt_divisor,
)
from jaxdev.ops.registry import aten, register_functional

# Cephes' Chebyshev coefficients for exp(-x) I0(x) on [0, 8] and exp(-x) sqrt(x) I0(x) on (8, inf)
# (CPU's chebyshev_coefficients_*, zero order last; own_float32.py's i0 takes them too).
I0E_A = (
    -4.41534164647933937950e-18, 3.33079451882223809783e-17, -2.43127984654795469359e-16,
    1.71539128555513303061e-15, -1.16853328779934516808e-14, 7.67618549860493561688e-14,
    -4.85644678311192946090e-13, 2.95505266312963983461e-12, -1.72682629144155570723e-11,
    9.67580903537323691224e-11, -5.18979560163526290666e-10, 2.65982372468238665035e-9,
    -1.30002500998624804212e-8, 6.04699502254191894932e-8, -2.67079385394061173391e-7,
    1.11738753912010371815e-6, -4.41673835845875056359e-6, 1.64484480707288970893e-5,
    -5.75419501008210370398e-5, 1.88502885095841655729e-4, -5.76375574538582365885e-4,
    1.63947561694133579842e-3, -4.32430999505057594430e-3, 1.05464603945949983183e-2,
    -2.37374148058994688156e-2, 4.93052842396707084878e-2, -9.49010970480476444210e-2,
    1.71620901522208775349e-1, -3.04682672343198398683e-1, 6.76795274409476084995e-1,
)  # fmt: skip
I0E_B = (
    -7.23318048787475395456e-18, -4.83050448594418207126e-18, 4.46562142029675999901e-17,
    3.46122286769746109310e-17, -2.82762398051658348494e-16, -3.42548561967721913462e-16,
    1.77256013305652638360e-15, 3.81168066935262242075e-15, -9.55484669882830764870e-15,
    -4.15056934728722208663e-14, 1.54008621752140982691e-14, 3.85277838274214270114e-13,
    7.18012445138366623367e-13, -1.79417853150680611778e-12, -1.32158118404477131188e-11,
    -3.14991652796324136454e-11, 1.18891471078464383424e-11, 4.94060238822496958910e-10,
    3.39623202570838634515e-9, 2.26666899049817806459e-8, 2.04891858946906374183e-7,
    2.89137052083475648297e-6, 6.88975834691682398426e-5, 3.36911647825569408990e-3,
    8.04490411014108831608e-1,
)  # fmt: skip

# CPU's elementwise loop (cpu_numerics.scalar_lanes) runs blocks of two Vectorized<T> registers. i0e
# has no AVX512 kernel (its REGISTER_DISPATCH), so its registers are 32 bytes on AVX2, AVX512 and the default build alike:
# blocks of 32 half elements (measured: a 63-element run is 32 vector + 31 scalar on AVX512).
_HALF_BLOCK = 32


def _cephes_i0e(x, rounded):
    """Cephes' i0e as CPU's calc_i0e: `x` in the compute dtype, `rounded` applied after every operation
    (the identity for float32/float64 arithmetic, a rounding to the half dtype for CPU's scalar
    c10::Half / c10::BFloat16 arithmetic, whose coefficients are half values too)."""
    x = jnp.abs(x)

    def series(coefficients, y):
        b0, b2 = chebyshev(coefficients, y, rounded)
        return rounded(0.5 * rounded(b0 - b2))

    two = jnp.asarray(2.0, x.dtype)
    small = series(I0E_A, rounded(rounded(divide_by(x, two)) - two))
    far = jnp.where(x <= 8, 16.0, x)  # NaN stays NaN
    # the divisions IEEE's where the platform's is not (division.divide; divide_by's too): a TPU's 2 ulps
    # had i0e 7 ulps from CPU's under tests/tpu_emulation.py, its gradient (i1e - sgn i0e) 384
    large = divide(series(I0E_B, rounded(rounded(divide(32.0, far)) - two)), sqrt_divisor(far))
    return jnp.where(x <= 8, small, large)


@jitted
def _i0e_half(half, shape, strides, threads):
    jdt = dtypes.to_jax_dtype(half)

    def run(x):
        # both paths in float32, one convert to the half at the end: the scalar path's values are on
        # the half's grid already, the vector path rounds there once
        x = x.astype(jnp.float32)
        vector = _cephes_i0e(x, lambda v: v)
        scalar = _cephes_i0e(x, round_to(jdt))
        return jnp.where(scalar_lanes(shape, strides, _HALF_BLOCK, threads), scalar, vector).astype(jdt)

    return run


@cpu_arithmetic  # CPU's Cephes multiply-adds round once (FMA); emulated where the platform's round twice
def _cephes_i0e_plain(x):
    return _cephes_i0e(x, lambda v: v)


@register_functional(aten.special_i0e.default)
def special_i0e(self):
    """CPU's Cephes i0e step for step. float16/bfloat16: CPU's vector loop computes in float32 and
    rounds once, its scalar op (a 0-dim or short tensor, the tail of a contiguous run, a strided
    input) computes in the half dtype itself, rounding every operation; each element follows the
    path CPU's loop gives it for this layout with this process's thread count (cpu_threads)."""
    dt = float_of(self.dtype)
    if dt in (torch.float16, torch.bfloat16):
        fn = _i0e_half(dt, tuple(self.shape), tuple(self.stride()), cpu_threads())
        return fn(J(self))
    return apply(_cephes_i0e_plain, dt, dt, (self,))
