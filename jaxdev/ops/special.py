"""Special functions (torch.special and their aten ops): modified Bessel i0/i1 (scaled too), entr,
erfcx, log_ndtr, ndtri, digamma, lgamma, mvlgamma, the regularized incomplete gammas
(igamma/igammac), xlogy/xlog1py, sinc, polygamma and the Hurwitz zeta.

The Hurwitz zeta (and polygamma n >= 2, which is a multiple of it) is written here rather than taken
from JAX: PyTorch computes it by Cephes' Euler-Maclaurin summation in double precision, which is also
defined for a negative non-integer q, where JAX's zeta is off (by 3.5e-2 at zeta(3, -7.5)) or NaN
(CPU gives inf at q a non-positive integer).

Values follow PyTorch's conventions where JAX's differ: digamma(+0) is -inf; xlogy(0, y) is 0 unless
y is NaN; igamma/igammac run CPU's own algorithm (igamma.py); integer inputs give the default float
dtype; half precision computes in float32. Gradients come from PyTorch's own derivative formulas.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import jax.scipy.special as jss
import torch

from jaxdev import dtypes, layout, tensor
from jaxdev.ops import igamma
from jaxdev.ops.registry import aten, register, register_functional, store_into
from jaxdev.ops.toolkit import J, apply, float_of, jitted, opmath


def _unary(op, fn):
    @register_functional(op)
    def kernel(self):
        dt = float_of(self.dtype)
        return apply(fn, dt, dt, (self,))

    kernel.__qualname__ = op.name()


def _digamma(x):
    """PyTorch's: digamma(+0) = -inf, digamma(-0) = +inf (the limit from each side)."""
    pole = jnp.where(jnp.signbit(x), jnp.asarray(jnp.inf, x.dtype), jnp.asarray(-jnp.inf, x.dtype))
    return jnp.where(x == 0, pole, jss.digamma(x))


for _op, _fn in [
    (aten.i0.default, jss.i0),
    (aten.special_i1.default, jss.i1),
    (aten.special_i1e.default, jss.i1e),
    (aten.special_entr.default, jss.entr),
    (aten.special_erfcx.default, jss.erfcx),
    (aten.special_log_ndtr.default, jss.log_ndtr),
    (aten.special_ndtri.default, jss.ndtri),
    (aten.digamma.default, _digamma),
    (aten.lgamma.default, jss.gammaln),
    (aten.sinc.default, jnp.sinc),
]:
    _unary(_op, _fn)


# --- i0e as CPU computes it -------------------------------------------------------------------------

# Cephes' Chebyshev coefficients for exp(-x) I0(x) on [0, 8] and exp(-x) sqrt(x) I0(x) on (8, inf).
_I0E_A = (
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
_I0E_B = (
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

# CPU's elementwise loop (aten/src/ATen/native/cpu/Loops.h vectorized_loop) runs blocks of two
# Vectorized<T> registers and leaves the rest of each contiguous run to the scalar op; TensorIterator
# splits more than GRAIN_SIZE elements into one run per thread. i0e has no AVX512 kernel (its
# REGISTER_DISPATCH), so its registers are 32 bytes on AVX2, AVX512 and the default build alike:
# blocks of 32 half elements (measured: a 63-element run is 32 vector + 31 scalar on AVX512).
_GRAIN_SIZE = 32768
_HALF_BLOCK = 32


def _cephes_i0e(x, rounded):
    """Cephes' i0e as CPU's calc_i0e: `x` in the compute dtype, `rounded` applied after every operation
    (the identity for float32/float64 arithmetic, a round trip through the half dtype for CPU's scalar
    c10::Half / c10::BFloat16 arithmetic, whose coefficients are half values too)."""
    x = jnp.abs(x)

    def chebyshev(coefficients, y):
        cs = [rounded(jnp.asarray(c, x.dtype)) for c in coefficients]
        b2 = b1 = jnp.zeros_like(y)
        b0 = jnp.full_like(y, cs[0])
        for c in cs[1:]:
            b2, b1 = b1, b0
            b0 = rounded(rounded(rounded(y * b1) - b2) + c)
        return rounded(0.5 * rounded(b0 - b2))

    two = jnp.asarray(2.0, x.dtype)
    # divisions behind a barrier: XLA would turn x / 2 into x * 0.5 and a / sqrt(b) into a * rsqrt(b)
    small = chebyshev(_I0E_A, rounded(rounded(x / jax.lax.optimization_barrier(jnp.full_like(x, two))) - two))
    far = jnp.where(x <= 8, 16.0, x)  # NaN stays NaN
    large = chebyshev(_I0E_B, rounded(rounded(32.0 / far) - two)) / jax.lax.optimization_barrier(jnp.sqrt(far))
    return jnp.where(x <= 8, small, large)


def _iteration_order(shape, strides):
    """TensorIterator's order for a unary op with a fresh output: its dims fastest first (reorder_dimensions:
    an insertion sort by the input's strides, a broadcast dim deciding nothing, equal strides the larger
    size last), then the first coalesced dim's size and the input's stride there (coalesce_dimensions)."""
    ndim = len(shape)
    perm = layout.iteration_order(shape, [strides])
    size0, stride0 = (1, 1) if ndim == 0 else (shape[perm[0]], strides[perm[0]])
    for d in perm[1:]:
        if size0 == 1 or shape[d] == 1 or size0 * stride0 == strides[d]:
            if size0 == 1:
                stride0 = strides[d]
            size0 *= shape[d]
        else:
            break
    return perm, size0, stride0


def _scalar_lanes(shape, strides, block, threads):
    """Where CPU's elementwise loop computes an element with the scalar op (True) rather than the
    vector one. The loop walks the output in TensorIterator's order; each run of the first coalesced
    dim (cut by the per-thread chunks past GRAIN_SIZE) goes `block` elements at a time through the
    vector op when the input's stride there is 1 or 0, its remainder (or, for another stride, the
    whole run) through the scalar op."""
    n = 1
    for s in shape:
        n *= s
    perm, size0, stride0 = _iteration_order(shape, strides)
    if stride0 not in (0, 1):
        return jnp.ones(shape, bool)
    # each element's position in the output's memory order (the output is laid out in `perm`)
    linear, step = jnp.zeros(shape, jnp.int64), 1
    for d in perm:
        linear = linear + jax.lax.broadcasted_iota(jnp.int64, shape, d) * step
        step *= shape[d]
    chunks = 1 if n < _GRAIN_SIZE or threads == 1 else min(threads, -(-n // _GRAIN_SIZE))
    chunk = max(-(-n // chunks), 1)
    row = linear // size0 * size0
    first = jnp.maximum(row, linear // chunk * chunk)
    length = jnp.minimum(row + size0, (linear // chunk + 1) * chunk) - first
    return linear - first >= length // block * block


@jitted
def _i0e_half(half, shape, strides, threads):
    jdt = dtypes.to_jax_dtype(half)

    def run(x):
        x = x.astype(jnp.float32)
        vector = _cephes_i0e(x, lambda v: v).astype(jdt)
        scalar = _cephes_i0e(x, lambda v: v.astype(jdt).astype(jnp.float32)).astype(jdt)
        return jnp.where(_scalar_lanes(shape, strides, _HALF_BLOCK, threads), scalar, vector)

    return run


def _cephes_i0e_plain(x):
    return _cephes_i0e(x, lambda v: v)


@register_functional(aten.special_i0e.default)
def special_i0e(self):
    """CPU's Cephes i0e step for step. float16/bfloat16: CPU's vector loop computes in float32 and
    rounds once, its scalar op (a 0-dim or short tensor, the tail of a contiguous run, a strided
    input) computes in the half dtype itself, rounding every operation; each element follows the
    path CPU's loop gives it for this layout on this machine."""
    dt = float_of(self.dtype)
    if dt in (torch.float16, torch.bfloat16):
        fn = _i0e_half(dt, tuple(self.shape), tuple(self.stride()), torch.get_num_threads())
        return fn(J(self))
    return apply(_cephes_i0e_plain, dt, dt, (self,))


def _binary(ops, fn):
    """Float-valued binary op: Tensor/Scalar overloads, torch's promotion, ints -> default float."""

    @register_functional(*ops)
    def kernel(self, other):
        dt = float_of(torch.result_type(self, other))
        return apply(fn, dt, dt, (self, other))

    kernel.__qualname__ = ops[0].name()


def _xlogy(x, y):
    out = jnp.where(x == 0, jnp.zeros((), x.dtype), x * jnp.log(y))
    return jnp.where(jnp.isnan(y), y, out)


def _xlog1py(x, y):
    out = jnp.where(x == 0, jnp.zeros((), x.dtype), x * jnp.log1p(y))
    return jnp.where(jnp.isnan(y), y, out)


_binary((aten.xlogy.Tensor, aten.xlogy.Scalar_Other, aten.xlogy.Scalar_Self), _xlogy)
_binary((aten.special_xlog1py.default, aten.special_xlog1py.other_scalar, aten.special_xlog1py.self_scalar), _xlog1py)


# CPU's calc_igamma/calc_igammac ported (jaxdev/ops/igamma.py): JAX's gammainc is NaN at a = 0 < x
# and off for large a near x
_binary((aten.igamma.default,), igamma.igamma)
_binary((aten.igammac.default,), igamma.igammac)


@jitted
def _with_order(fn, order, compute, result):
    """`fn(x, order)` with the integer order static (polygamma's n, mvlgamma's p)."""
    compute, result = opmath(dtypes.to_jax_dtype(compute)), dtypes.to_jax_dtype(result)
    return lambda x: fn(x.astype(compute), order).astype(result)


@register_functional(aten.mvlgamma.default)
def mvlgamma(self, p):
    if p < 1:
        raise RuntimeError("p has to be greater than or equal to 1")
    dt = float_of(self.dtype)
    return _with_order(jss.multigammaln, int(p), dt, dt)(J(self))


# --- Hurwitz zeta and polygamma ----------------------------------------------------------------------

# (2j)! / B_2j, the Euler-Maclaurin tail's coefficients (B_2j the Bernoulli numbers).
_EULER_MACLAURIN = (
    12.0,
    -720.0,
    30240.0,
    -1209600.0,
    47900160.0,
    -1.8924375803183791606e9,
    7.47242496e10,
    -2.950130727918164224e12,
    1.1646782814350067249e14,
    -4.5979787224074726105e15,
    1.8152105401943546773e17,
    -7.1661652561756670113e18,
)
_ZETA_EPS = 1.11022302462515654042e-16
# A q near -2^52 needs that many direct terms; CPU spends them, a device stops here (2^24 terms).
_ZETA_MAX_TERMS = 1 << 24


def _hurwitz_zeta(x, q):
    """zeta(x, q) = sum_k (k + q)^-x in float64, the way CPU PyTorch sums it: direct terms until at
    least 9 are taken and the next base passes 9 (or a term stops mattering), then the
    Euler-Maclaurin tail, at most 12 of its terms. Each element stops where CPU's loop would."""
    x, q = jnp.broadcast_arrays(x.astype(jnp.float64), q.astype(jnp.float64))
    eps = jnp.float64(_ZETA_EPS)

    def negligible(term, total):
        return (-eps * total < term) & (term < eps * total)

    def active(state):
        i, a, _, _, done = state
        return ~done & ((i < 9) | (a <= 9.0))

    def step(state):
        i, a, b, total, done = state
        go = active(state)
        a = jnp.where(go, a + 1.0, a)
        b = jnp.where(go, a**-x, b)
        total = jnp.where(go, total + b, total)
        return i + 1, a, b, total, done | (go & negligible(b, total))

    start = (jnp.int32(0), q, jnp.zeros_like(q), q**-x, jnp.zeros(q.shape, bool))
    _, a, b, total, done = jax.lax.while_loop(lambda st: jnp.any(active(st)) & (st[0] < _ZETA_MAX_TERMS), step, start)

    w = a
    tail = total + b * w / (x - 1.0) - 0.5 * b
    total = jnp.where(done, total, tail)
    factor, k = jnp.ones_like(q), jnp.zeros_like(q)
    for coefficient in _EULER_MACLAURIN:
        factor = factor * (x + k)
        b = b / w
        t = factor * b / coefficient
        new_total = total + t
        total = jnp.where(done, total, new_total)
        done = done | (jnp.abs(t / new_total) < eps)
        k = k + 1.0
        factor = factor * (x + k)
        b = b / w
        k = k + 1.0

    nan, inf = jnp.float64(jnp.nan), jnp.float64(jnp.inf)
    non_positive = q <= 0.0
    total = jnp.where(non_positive & (x != jnp.floor(x)), nan, total)
    total = jnp.where(non_positive & (q == jnp.floor(q)), inf, total)
    total = jnp.where(x < 1.0, nan, total)
    return jnp.where(x == 1.0, inf, total)


def _zeta(x, q):
    return _hurwitz_zeta(x, q).astype(jnp.result_type(x, q))


_binary((aten.special_zeta.default, aten.special_zeta.self_scalar, aten.special_zeta.other_scalar), _zeta)


def _trigamma(x):
    """PyTorch's trigamma: reflection below 1/2, six recurrence steps, then the asymptotic series."""
    below = x < 0.5
    sin_pi_x = jnp.sin(jnp.pi * x)
    total = jnp.where(below, -(jnp.pi * jnp.pi) / (sin_pi_x * sin_pi_x), jnp.zeros_like(x))
    x = jnp.where(below, 1 - x, x)
    for _ in range(6):
        total = total + 1 / (x * x)
        x = x + 1
    ixx = 1 / (x * x)
    total = total + (1 + 1 / (2 * x) + ixx * (1.0 / 6 - ixx * (1.0 / 30 - ixx * (1.0 / 42)))) / x
    return jnp.where(below, -total, total)


def _polygamma(x, n):
    if n == 0:
        return _digamma(x)
    if n == 1:
        return _trigamma(x)
    sign = 1.0 if n % 2 else -1.0
    factorial = jnp.exp(jss.gammaln(jnp.asarray(n + 1.0, x.dtype)))
    return sign * factorial * _hurwitz_zeta(jnp.asarray(n + 1.0), x).astype(x.dtype)


@register_functional(aten.polygamma.default, inplace=False)
def polygamma(n, self):
    if n < 0:
        raise RuntimeError("polygamma(n, x) does not support negative n.")
    dt = float_of(self.dtype)
    return _with_order(_polygamma, int(n), dt, dt)(J(self))


@register(aten.polygamma_.default)
def polygamma_(self, n):
    """In place, the arguments come the other way round (self first): not derivable from polygamma(n, self)."""
    store_into(self, polygamma(n, self), resize=False)
    return self


# --- Kaiser window -----------------------------------------------------------------------------------


@jitted
def _kaiser(length, dtype):
    """CPU's kaiser_window_kernel over arange(length) in `dtype`, computed in its opmath type."""
    jdt = dtypes.to_jax_dtype(dtype)
    compute = opmath(jdt)

    def run(beta):
        a = jnp.arange(length).astype(jdt).astype(compute)
        alpha = jnp.asarray((length - 1) / 2.0, compute)
        beta = beta.astype(compute)
        r = (a - alpha) / alpha
        return (jss.i0(beta * jnp.sqrt(jnp.abs(1 - r * r))) / jss.i0(beta)).astype(jdt)

    return run


def _kaiser_window(window_length, periodic, beta, dtype, layout, device, pin_memory):
    """PyTorch's factory calls a CPU/CUDA kernel stub that has no jax entry (an internal assert): the
    window is computed here. Checks, invalid dtypes and lengths 0 and 1 (empty, ones) are left to
    PyTorch's own composite, which raises its errors and builds those before it reaches the stub."""
    dt = dtype or torch.get_default_dtype()
    if window_length <= 1 or not dt.is_floating_point or layout not in (None, torch.strided):
        options = {"dtype": dtype, "layout": layout, "device": device, "pin_memory": pin_memory}
        return aten.kaiser_window.beta._op_dk(
            torch._C.DispatchKey.CompositeExplicitAutograd, window_length, periodic, beta, **options
        )
    length = window_length + 1 if periodic else window_length
    window = _kaiser(length, dt)(jnp.asarray(beta, jnp.float64))
    return tensor.wrap(window[:window_length] if periodic else window)


# The overloads without beta (12.0) or periodic (True) call PyTorch's composite directly, not through the
# dispatcher: each needs its kernel.
@register(aten.kaiser_window.beta)
def kaiser_window_beta(window_length, periodic, beta, *, dtype=None, layout=None, device=None, pin_memory=None):
    return _kaiser_window(window_length, periodic, beta, dtype, layout, device, pin_memory)


@register(aten.kaiser_window.periodic)
def kaiser_window_periodic(window_length, periodic, *, dtype=None, layout=None, device=None, pin_memory=None):
    return _kaiser_window(window_length, periodic, 12.0, dtype, layout, device, pin_memory)


@register(aten.kaiser_window.default)
def kaiser_window(window_length, *, dtype=None, layout=None, device=None, pin_memory=None):
    return _kaiser_window(window_length, True, 12.0, dtype, layout, device, pin_memory)
