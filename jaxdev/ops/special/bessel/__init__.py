"""Bessel and Airy functions of torch.special (J0/J1/Y0/Y1, modified I0/I1/K0/K1 and scaled K,
spherical J0, Airy Ai).

CPU PyTorch evaluates these with Cephes' rational and Chebyshev approximations in the input's own
precision (float32 inputs in float32; integers and bool as float32; half precision and complex
raise NotImplementedError). The bodies below follow those approximations step by step -- the same
coefficient tables, branch points, evaluation order and edge conventions -- so a float32 result is
the float32 computation CPU does, not a float64 one rounded:

* y0/y1 are -inf at +-0 and NaN for x < 0; k0/k1 (scaled too) are +inf at +-0 and NaN for x < 0;
* j0/j1/y0/y1/i0/i1 of +-inf are NaN (the asymptotic forms meet cos(inf) or inf/inf), k of +inf is 0;
* spherical j0 is 0 at +-inf; Airy Ai is NaN at +-inf and 0 above 103.892;
* K0 below 2 takes its log(x / 2) * I0(x) term in float64 even for float32 input (CPU's source
  writes that 0.5 as a double literal), and rounds once at the end.

* J1(-0) is -0 (CPU negates only for x < 0); I1(-0) is +0.

Airy Ai between -2.09 and 2.09 sums its Maclaurin series until a term stops mattering, each element
as many terms as CPU's loop takes (a lax.while_loop, masked per element).

Rounding as CPU's: XLA's simplifier would turn a / 3 into a * (1/3), a / sqrt(b) into a * rsqrt(b)
and (a / b) / c into a / (b * c); those divisions go through an optimization barrier (for Ai at
x << 0 one ulp of 2/3 |x|^1.5 changes the sine). float32 exp and log are taken in float64 and
rounded, which agrees with the C library CPU calls far more often than XLA's float32 versions.
Measured against CPU over the normal range: J0, J1 and spherical J0 bit for bit, the rest within a
few ulp (more only next to a zero of Y0/Y1). Subnormals are not CPU's: XLA flushes them to zero,
in inputs and results (the device's rule, not these kernels'); log(x / 2) for K at the smallest
normal x is taken so that the halving does not flush.
"""

from __future__ import annotations

import torch

from jaxdev import dtypes
from jaxdev.ops.kit import apply, float_of
from jaxdev.ops.kit.cpu_arithmetic import cpu_arithmetic
from jaxdev.ops.registry import aten, register_functional
from jaxdev.ops.special.bessel.airy import airy_ai, spherical_j0
from jaxdev.ops.special.bessel.i_k import modified_i0, modified_i1, modified_k0, modified_k1, scaled_k0, scaled_k1
from jaxdev.ops.special.bessel.j_y import bessel_j0, bessel_j1, bessel_y0, bessel_y1


def _unary(op, fn, name):
    """CPU's kernels dispatch on float32 and float64 only: integers and bool compute as the default
    float dtype, half precision and complex raise."""

    @register_functional(op)
    def kernel(self):
        dt = float_of(self.dtype)
        if dt not in (torch.float32, torch.float64):
            raise NotImplementedError(f"\"{name}_cpu\" not implemented for '{dtypes.scalar_name(dt)}'")
        return apply(fn, dt, dt, (self,))


for _name, _fn in [
    ("bessel_j0", bessel_j0),
    ("bessel_j1", bessel_j1),
    ("bessel_y0", bessel_y0),
    ("bessel_y1", bessel_y1),
    ("modified_bessel_i0", modified_i0),
    ("modified_bessel_i1", modified_i1),
    ("modified_bessel_k0", modified_k0),
    ("modified_bessel_k1", modified_k1),
    ("scaled_modified_bessel_k0", scaled_k0),
    ("scaled_modified_bessel_k1", scaled_k1),
    ("spherical_bessel_j0", spherical_j0),
    ("airy_ai", airy_ai),
]:
    # CPU's Cephes code multiply-adds in one rounding (FMA): where the platform rounds twice, emulated
    _unary(getattr(aten, "special_" + _name).default, cpu_arithmetic(_fn), _name)
