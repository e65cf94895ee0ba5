"""The matrix exponential (linalg.matrix_exp): PyTorch's own Taylor scheme.

float32 and complex64 inputs are evaluated in float64/complex128 (with float64's degree thresholds)
and rounded once. In their own precision, CPU's and this scheme's results each lie several ulps
from the exact exponential (the squarings amplify every rounding), in different places: on the
OpInfo samples jax was farther than CPU on one float32 and one complex64 sample. Evaluated wide,
the result is the exact one rounded, at least as close as CPU's on every sample and on 240 random
matrices measured (max error 0.03-0.6x CPU's).

Where float64 is emulated (a TPU: capabilities' float64_emulated) they are evaluated in their own
precision: XLA's TPU compiler aborts on the complex128 program. Half-precision inputs run on CPU: see
linalg_matrix_exp.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import torch

from jaxdev import fallback
from jaxdev.ops.kit import J, cpu_numerics, jitted
from jaxdev.ops.kit import transcendentals as tm
from jaxdev.ops.linalg.lapack import HIGHEST, LAPACK_DTYPES, kernel, meta, present
from jaxdev.ops.registry import aten

# PyTorch's algorithm (Bader, Blanes, Casas 2019: optimized Taylor polynomials of degree 1, 2, 4, 8,
# 12 and 18, picked by the 1-norm, scaling and squaring past the last), evaluated in the same order:
# a Pade approximant (jax.scipy.linalg.expm) lands 1e-4 (relative) away in float32.
_THETAS = {
    4: (
        1.192092800768788e-07,
        5.978858893805233e-04,
        5.116619363445086e-02,
        5.800524627688768e-01,
        1.461661507209034e00,
        3.010066362817634e00,
    ),
    8: (
        2.220446049250313e-16,
        2.580956802971767e-08,
        3.397168839976962e-04,
        4.991228871115323e-02,
        2.996158913811580e-01,
        1.090863719290036e00,
    ),
}
_B12 = (
    (9.0198e-16, 0.46932117595418237389, -0.20099424927047284052, -0.04623946134063071740),
    (5.31597895759871264183, 1.19926790417132231573, 0.01179296240992997031, 0.01108844528519167989),
    (0.18188869982170434744, 0.05502798439925399070, 0.09351590770535414968, 0.00610700528898058230),
    (-2.0861320e-13, -0.13181061013830184015, -0.02027855540589259079, -0.00675951846863086359),
)
_B18 = (
    (0.0, -1.00365581030144618291e-01, -8.02924648241156932449e-03, -8.92138498045729985177e-04, 0.0),
    (
        0.0,
        3.97849749499645077844e-01,
        1.36783778460411720168e00,
        4.98289622525382669416e-01,
        -6.37898194594723280150e-04,
    ),
    (
        -1.09676396052962061844e01,
        1.68015813878906206114e00,
        5.71779846478865511061e-02,
        -6.98210122488052056106e-03,
        3.34975017086070470649e-05,
    ),
    (
        -9.04316832390810593223e-02,
        -6.76404519071381882256e-02,
        6.75961301770459654925e-02,
        2.95552570429315521194e-02,
        -1.39180257516060693404e-05,
    ),
    (0.0, 0.0, -9.23364619367118555360e-02, -1.69364939002081722752e-02, -1.40086798182036094347e-05),
)


def _mm(a, b):
    return jnp.matmul(a, b, precision=HIGHEST)


def _combine(mats, coefficients):
    """sum_j c_j * M_j, in j order (ATen's _compute_linear_combination)."""
    real = mats[0].real.dtype
    acc = jnp.asarray(coefficients[0], real) * mats[0]
    for c, m in zip(coefficients[1:], mats[1:]):
        acc = acc + jnp.asarray(c, real) * m
    return acc


def _taylor(a, degree):
    eye = jnp.broadcast_to(jnp.eye(a.shape[-1], dtype=a.dtype), a.shape)
    if degree == 1:
        return eye + a
    a2 = _mm(a, a)
    if degree == 2:
        return eye + a + a2 / jnp.asarray(2.0, a.real.dtype)
    if degree == 4:
        x = _mm(a2, _combine((eye, a, a2), (1 / 2.0, 1 / 6.0, 1 / 24.0)))
        return _combine((eye, a, a2, x), (1.0, 1.0, 0.0, 1.0))
    if degree == 8:
        sqrt_177 = 0.1330413469565007072504e2
        x3 = 2.0 / 3.0
        x1, x2 = x3 * ((1.0 + sqrt_177) / 88.0), x3 * ((1.0 + sqrt_177) / 352.0)
        x4 = (-271.0 + 29.0 * sqrt_177) / (315.0 * x3)
        x5 = (-11.0 + 11.0 * sqrt_177) / (1260.0 * x3)
        x6 = (-99.0 + 11.0 * sqrt_177) / (5040.0 * x3)
        x7 = (89.0 - sqrt_177) / (5040.0 * x3)
        y2 = (857.0 - 58.0 * sqrt_177) / 630.0
        a4 = _mm(a2, _combine((a, a2), (x1, x2)))
        a8 = _mm(_combine((a2, a4), (x3, 1.0)), _combine((eye, a, a2, a4), (x4, x5, x6, x7)))
        return _combine((eye, a, a2, a4, a8), (1.0, 1.0, y2, 0.0, 1.0))
    a3 = _mm(a, a2)
    if degree == 12:
        bs = [_combine((eye, a, a2, a3), row) for row in _B12]
        a6 = bs[2] + _mm(bs[3], bs[3])
        return bs[0] + _mm(bs[1] + a6, a6)
    a6 = _mm(a3, a3)
    bs = [_combine((eye, a, a2, a3, a6), row) for row in _B18]
    a9 = bs[3] + _mm(bs[0], bs[4])
    return bs[1] + _mm(bs[2] + a9, a9)


@jitted
def _expm_body(wide):
    def run(narrow):
        a = narrow.astype(wide) if wide is not None else narrow
        thetas = _THETAS[a.real.dtype.itemsize]
        norm = jnp.max(jnp.sum(jnp.abs(a), axis=-2), axis=-1)  # the 1-norm, as a.real's dtype
        theta = lambda t: jnp.asarray(t, norm.dtype)
        # the last interval scales by 2^s and squares s times (s per matrix: a bounded loop)
        s = jnp.maximum(0, jnp.ceil(tm.log2(norm / theta(thetas[5])))).astype(jnp.int64)
        # CPU's own precision takes degree 18 (and the squarings) for every matrix of a batch of more
        # than one, the degree by the norm for a lone one; evaluated wide, each by its norm
        every = wide is None and math.prod(narrow.shape[:-2]) > 1
        large = (norm >= theta(thetas[4])) | every
        s = jnp.where(large, s, 0)
        scaled = a / jnp.exp2(s.astype(norm.dtype))[..., None, None].astype(a.dtype)
        result = _taylor(jnp.where(large[..., None, None], scaled, a), 18)
        result = jax.lax.fori_loop(
            0,
            jnp.max(jnp.where(jnp.isfinite(norm), s, 0), initial=0),
            lambda p, m: jnp.where((p < s)[..., None, None], _mm(m, m), m),
            result,
        )
        if every:
            return result.astype(narrow.dtype)
        result = jnp.where(large[..., None, None], result, jnp.nan)
        lower = -1.0
        for degree, upper in zip((1, 2, 4, 8, 12), thetas[:5]):
            inside = (theta(lower) < norm) & (norm <= theta(upper))
            result = jnp.where(inside[..., None, None], _taylor(a, degree), result)
            lower = upper
        return result.astype(narrow.dtype)

    return run


_WIDE = {torch.float32: jnp.dtype(jnp.float64), torch.complex64: jnp.dtype(jnp.complex128)}


@kernel(aten.linalg_matrix_exp.default)
def linalg_matrix_exp(self):
    me = meta(aten.linalg_matrix_exp.default, self, check_dtype=self.dtype not in (torch.float16, torch.bfloat16))
    if self.dtype in (torch.float16, torch.bfloat16):
        # CPU's half result is not an exponential: its scheme takes float64's thresholds and
        # coefficients for half inputs, and reads the coefficient arrays (float64 values) as half
        # (from_blob with the input's dtype), so most results are NaN, inf or unrelated values
        # (exp(0.3 * I) in float16 gives -21072 on the diagonal). No float32 computation
        # reproduces that, so half inputs go to CPU's own kernel.
        return fallback.run_on_cpu(aten.linalg_matrix_exp.default, self)
    if self.dtype not in LAPACK_DTYPES:
        raise NotImplementedError(f"\"linalg_matrix_exp\" not implemented for '{_torch_name(self.dtype)}'")
    if self.numel() == 0:
        return present(jnp.zeros(me.shape, J(self).dtype), me)
    if self.shape[-1] == 1:
        return present(_exp_body()(J(self)), me)
    # Where float64 is emulated (a TPU) the scheme runs in the input's own precision, with its own
    # thresholds as CPU's does: XLA's TPU compiler aborted on the complex128 program (deviceless.py).
    wide = _WIDE.get(self.dtype) if cpu_numerics.float64_native() else None
    return present(_expm_body(wide)(J(self)), me)


@jitted
def _exp_body():
    return tm.exp


def _torch_name(dtype):
    from jaxdev import dtypes

    return dtypes.scalar_name(dtype)
