"""exp, log, tanh, sigmoid, erf, sin, cos, tan and what is built on them, for every kernel, as close to CPU's as CPU's
own functions are to the exact values, on every platform.

Why. XLA's TPU backend computes float32 exp, log, tanh, logistic and erf with fast approximations that
land far from CPU PyTorch's results (a TPU v5e against CPU over 100,000 values: exp 42 ulps, tanh 678,
sigmoid 40, log 3,084), where CPU's own functions (SLEEF, glibc) are within an ulp of the correctly
rounded value; softmax, cross-entropy, gelu and tanh were 12-13x the OpInfo tolerance off there. Off
XLA's CPU backend the kernels therefore get jaxdev's functions: Cody-Waite range reduction and
polynomials (fitted by scripts/fit_transcendentals.py) in plain float32 adds and multiplies, which a
TPU computes in IEEE arithmetic except that subnormal inputs and results are flushed to zero there
(exp(-88) is 0, the log of a subnormal -inf: a TPU fact, not these functions'). On XLA's CPU backend
XLA's own functions stay: their bits are what the coverage baseline holds, and they are within 2.5
ulps of CPU's.

The switch, JAXDEV_MATH, read when the first kernel using it is traced:
  auto  (default) jaxdev's functions off the CPU backend, XLA's on it; off it, the float32 arithmetic
        CPU's kernels do corrected to CPU's bits too (division.py's division and sqrt, cpu_arithmetic's
        multiply-adds rounded once)
  near  auto's functions, but the platform's arithmetic as it is: its division (a divisor near
        float32's limits scaled into range first), square root and multiply-adds. Within a few ulps
        of CPU's results, not its bits, for a smaller and faster program on a TPU
  fast  XLA's everywhere, its division too (division.py): faster on a TPU, and the LM's training step
        compiles there in a third of the time, but 40-3,000 ulps from CPU's results there
  own   jaxdev's everywhere, the CPU backend included (how the tests measure them on CPU)

Kernels call these, never jnp.exp, jax.nn.sigmoid, ... directly (tests/ops/test_transcendentals.py
checks the ops package for direct calls). float16 and bfloat16 values are computed in float32 and
rounded once, as CPU computes them; float64 values take XLA's functions, complex64 ones are
transcendentals_complex.py's. sin, cos and tan are transcendentals_trig.py's (a TPU's XLA sin is
accurate absolutely, not relative to a small result near a multiple of pi).
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from jaxdev.ops.kit import transcendentals_trig as _trig
from jaxdev.ops.kit.division import divide, division_ieee
from jaxdev.ops.kit.division import power_of_two as _power_of_two
from jaxdev.ops.kit.division import scaled as scaled  # re-exported: the kit's name for it
from jaxdev.ops.kit.half_results import platform_functions
from jaxdev.ops.kit.math_mode import forced as forced  # the tests' switch, kept here since the functions are here
from jaxdev.ops.kit.math_mode import mode

_OWN_DTYPES = tuple(jnp.dtype(d) for d in (jnp.float32, jnp.float16, jnp.bfloat16))


def own(x) -> bool:
    """Whether x's exp, log, tanh... are jaxdev's functions here: a float32 (or half) value (or dtype)
    under own, or auto off CPU. They are tens of float32 operations an element, where a TPU's take a
    few: a kernel that would have XLA recompute one in several fusions may compute it once instead."""
    if jnp.dtype(getattr(x, "dtype", x)) not in _OWN_DTYPES:
        return False
    picked = mode()
    return picked == "own" or (picked in ("auto", "near") and jax.default_backend() != "cpu")


def own_exp(x) -> bool:
    """Whether x's exp (and log, tanh, sigmoid) are jaxdev's here: `own`, but for a value rounded to
    bfloat16 under near, which takes the platform's (half_results.py). For kernels that place a
    barrier around an own exp computed once."""
    return own(x) and not platform_functions(x)


def _in_float32(fn):
    """fn of a float32 value; a half value widened and the result rounded back, as CPU's kernels do."""

    def run(x):
        if x.dtype == jnp.float32:
            return fn(x)
        return fn(x.astype(jnp.float32)).astype(x.dtype)

    return run


# --- the polynomials (scripts/fit_transcendentals.py prints them) ----------------------------------

_ERF_ONE = 0.8427007794380188
# exp(r) = 1 + r + r^2 q(r), |r| <= log(2)/2
_EXP_Q = (0.0001995340862777084, 0.0013935758033767343, 0.008333197794854641, 0.04166645556688309)
_EXP_Q += (0.1666666716337204, 0.5)
# log(1 + f) = f - f^2/2 + f^3 p(f), f in [sqrt(1/2) - 1, sqrt(2) - 1]
_LOG_P = (0.06804917752742767, -0.11725828796625137, 0.11888592690229416, -0.12396421283483505)
_LOG_P += (0.14218121767044067, -0.16668526828289032, 0.20002226531505585, -0.25, 0.3333331048488617)
# tanh(x) = x + x^3 p(x^2), |x| < 0.625
_TANH_P = (0.0021573458798229694, -0.008194821886718273, 0.021708671003580093, -0.053948454558849335)
_TANH_P += (0.13333222270011902, -0.3333333134651184)
# erf(x) = x + x p(x^2), |x| < 0.84375
_ERF_SMALL = (8.813833846943453e-05, -0.000823651032987982, 0.00520833395421505, -0.026861924678087234)
_ERF_SMALL += (0.11283731460571289, -0.37612634897232056, 0.12837916612625122)
# erf(1 + s) = _ERF_ONE + p(s), s in [-0.15625, 0.25]
_ERF_MIDDLE = (-0.010648881085216999, 0.017144912853837013, 0.004778923466801643, -0.06929104775190353)
_ERF_MIDDLE += (0.06918490678071976, 0.13837093114852905, -0.41510751843452454, 0.41510748863220215)
_ERF_MIDDLE += (1.3508899776581984e-08,)
# erfc(x) = exp(-x^2 + h(1/x)) / x: x in [1.25, 2.857] (near), [2.857, 10.1] (far)
_ERFC_NEAR = (0.09987111389636993, -0.5332329869270325, 1.2283464670181274, -1.5349094867706299)
_ERFC_NEAR += (0.9771065711975098, 0.0016012161504477262, -0.5200589299201965, 0.004372600466012955)
_ERFC_NEAR += (-0.5726861953735352,)
_ERFC_FAR = (-1.5128164291381836, 2.8859758377075195, -1.8079252243041992, -0.14315880835056305)
_ERFC_FAR += (0.683271050453186, -0.010273083113133907, -0.49899929761886597, -5.232973853708245e-05)
_ERFC_FAR += (-0.5723637938499451,)

# log(2) split so that n * LN2_HI is exact for |n| < 2^15 (Cody and Waite)
LN2_HI = np.float32(0.693145751953125)
LN2_LO = np.float32(math.log(2) - 0.693145751953125)
LOG2E = np.float32(1 / math.log(2))


# --- float32 exp, expm1, log, log1p ------------------------------------------------------------------


# float32 exp's last finite argument and the one below which it is 0
EXP_OVERFLOW, EXP_UNDERFLOW = 88.72283935546875, -103.97208404541016


def exp_reduced(x):
    """(n, r): x = n log(2) + r, |r| <= log(2)/2 (n as int32, clipped to keep 2^n's steps valid)."""
    n = jnp.floor(jnp.clip(x, -104.0, 89.0) * LOG2E + 0.5)
    r = (x - n * LN2_HI) - n * LN2_LO
    return n.astype(jnp.int32), r


def expm1_reduced(r):
    return r + r * r * _trig.horner(_EXP_Q, r)


def _exp_parts(x):
    """(p, n) with exp(x) = p 2^n, p in [0.7, 1.42]."""
    n, r = exp_reduced(x)
    return 1 + expm1_reduced(r), n


def _exp32(x):
    out = scaled(*_exp_parts(x))
    out = jnp.where(x > EXP_OVERFLOW, jnp.float32(jnp.inf), out)
    out = jnp.where(x < EXP_UNDERFLOW, jnp.float32(0), out)
    return jnp.where(jnp.isnan(x), x, out)


def _expm1_32(x):
    n, r = exp_reduced(x)
    p = expm1_reduced(r)
    t = _power_of_two(jnp.clip(n, -126, 0))
    # n > 0: 2^n (p + 1 - 2^-n), scaled exactly; n <= 0: (2^n - 1) + 2^n p, each part exact
    above = scaled(p + (1 - _power_of_two(-jnp.clip(n, 0, 126))), n)
    below = (t - 1) + t * p
    out = jnp.where(n > 0, above, below)
    out = jnp.where(x > EXP_OVERFLOW, jnp.float32(jnp.inf), out)
    out = jnp.where(x < -17.5, jnp.float32(-1), out)
    return jnp.where(jnp.isnan(x) | (x == 0), x, out)  # -0.0 stays -0.0


def log_parts(x):
    """(e, f) with x = 2^e (1 + f), f in [sqrt(1/2) - 1, sqrt(2) - 1), for finite positive x
    (subnormals scaled up first, where the platform keeps them)."""
    subnormal = x < np.float32(2.0**-126)
    x = jnp.where(subnormal, x * np.float32(2.0**23), x)
    bits = lax.bitcast_convert_type(x, jnp.int32)
    e = ((bits >> 23) & 0xFF) - 126 - jnp.where(subnormal, 23, 0)
    m = lax.bitcast_convert_type((bits & 0x007FFFFF) | 0x3F000000, jnp.float32)  # [0.5, 1)
    low = m < np.float32(math.sqrt(0.5))
    f = jnp.where(low, m + m - 1, m - 1)
    return (e - low.astype(jnp.int32)).astype(jnp.float32), f


def _log1p_reduced(f):
    """log(1 + f) - f, as the small part added to f last."""
    z = f * f
    return f * z * _trig.horner(_LOG_P, f) - 0.5 * z


def _special_log(x, out):
    out = jnp.where(x == 0, jnp.float32(-jnp.inf), out)
    out = jnp.where(x == jnp.inf, x, out)
    return jnp.where((x < 0) | jnp.isnan(x), jnp.float32(jnp.nan), out)


def log32(x):
    e, f = log_parts(x)
    out = (f + (_log1p_reduced(f) + e * LN2_LO)) + e * LN2_HI
    return _special_log(x, out)


def _log1p_32(x):
    """log(u) + (x - (u - 1)) / u for u = 1 + x rounded: the correction restores what the rounding
    of u lost (exact where |x| is small), so small x keep their relative accuracy."""
    u = 1 + x
    safe = jnp.where((u > 0) & (u < jnp.inf), u, 1)
    out = log32(safe) + divide(x - (safe - 1), safe)  # near x = 2^-23 the correction is the result's size
    out = jnp.where(u == 1, x, out)
    return jnp.where((u > 0) & (u < jnp.inf), out, _special_log(u, out))


# --- float32 tanh, sigmoid, erf, erfc -------------------------------------------------------------


def _tanh32(x):
    a = jnp.abs(x)
    z = x * x
    small = x + x * z * _trig.horner(_TANH_P, z)
    # the platform's division: its divisor is in 3.5..2**28, where a TPU's is within 2 ulps (tanh was
    # 1 ulp from CPU's there); divide's correction would add ~20 operations to every GELU's tanh
    large = 1 - 2 / (_exp32(2 * jnp.minimum(a, 9.5)) + 1)
    return jnp.where(a < 0.625, jnp.where(x == 0, x, small), jnp.copysign(large, x))  # -0.0 kept


def _sigmoid32(x):
    """CPU's formula, 1 / (1 + exp(-x)), its division IEEE's where the platform's is not (a TPU's
    reciprocal was 181 ulps off at x = -80)."""
    return divide(jnp.float32(1), 1 + _exp32(-x))


def _erfc_tail(a):
    """erfc(a) for a >= 1.25 (0 past its underflow): exp(-a^2 + h(1/a)) / a, with a^2 split as
    z^2 + (a - z)(a + z), z = a's top 11 bits, so that z^2 is exact (its rounding would cost
    a^2 * 2^-24, ~100 ulps at a = 10); -z^2's reduction r joins the rest in one exp, and the
    power of two is applied last, so that a subnormal result is rounded once."""
    inverse = divide(jnp.float32(1), a)
    h = jnp.where(a < 2.857, _trig.horner(_ERFC_NEAR, inverse), _trig.horner(_ERFC_FAR, inverse))
    z = lax.bitcast_convert_type(lax.bitcast_convert_type(a, jnp.int32) & -8192, jnp.float32)
    n, r = exp_reduced(-z * z)
    p, m = _exp_parts(r + ((z - a) * (z + a) + h))
    out = scaled(divide(p, a), n + m)
    return jnp.where(a > 10.05, jnp.float32(0), out)


def _erf32(x):
    a = jnp.abs(x)
    small = x + x * _trig.horner(_ERF_SMALL, x * x)
    middle = _ERF_ONE + _trig.horner(_ERF_MIDDLE, a - 1)
    large = 1 - _erfc_tail(jnp.maximum(a, 1.25))
    far = jnp.where(a < 1.25, middle, large)
    return jnp.where(a < 0.84375, small, jnp.where(jnp.isnan(x), x, jnp.copysign(far, x)))


def _erfc32(x):
    a = jnp.abs(x)
    y = _trig.horner(_ERF_SMALL, x * x)
    small = jnp.where(x < 0.25, 1 - (x + x * y), 0.5 - (x * y + (x - 0.5)))  # the latter without cancellation
    p = _trig.horner(_ERF_MIDDLE, a - 1)
    middle = jnp.where(x > 0, (1 - _ERF_ONE) - p, 1 + (_ERF_ONE + p))
    tail = _erfc_tail(jnp.maximum(a, 1.25))
    large = jnp.where(x > 0, tail, 2 - tail)
    out = jnp.where(a < 0.84375, small, jnp.where(a < 1.25, middle, large))
    return jnp.where(jnp.isnan(x), x, out)


# --- derivatives: the formulas JAX's own functions use, on these values --------------------------


def with_jvp(primal, tangent):
    fn = jax.custom_jvp(primal)

    @fn.defjvp
    def jvp(primals, tangents):
        (x,), (g,) = primals, tangents
        y = fn(x)
        return y, tangent(x, y, g)

    return fn


_TWO_OVER_SQRT_PI = np.float32(2 / math.sqrt(math.pi))
_exp_own = with_jvp(_exp32, lambda x, y, g: g * y)
_expm1_own = with_jvp(_expm1_32, lambda x, y, g: g * (y + 1))
_log_own = with_jvp(log32, lambda x, y, g: g / x)
_log1p_own = with_jvp(_log1p_32, lambda x, y, g: g / (1 + x))
_tanh_own = with_jvp(_tanh32, lambda x, y, g: g * (1 - y) * (1 + y))
_sigmoid_own = with_jvp(_sigmoid32, lambda x, y, g: g * y * (1 - y))
_erf_own = with_jvp(_erf32, lambda x, y, g: g * _TWO_OVER_SQRT_PI * _exp_own(-x * x))
_erfc_own = with_jvp(_erfc32, lambda x, y, g: -g * _TWO_OVER_SQRT_PI * _exp_own(-x * x))


def chosen(ours, xla, bfloat16_platform=False):
    """ours where `own`, else xla's; with `bfloat16_platform`, xla's in float32 for a value rounded to
    bfloat16 under near (half_results.py: exp, log, tanh and sigmoid, whose platform error is measured)."""
    ours, widened = _in_float32(ours), _in_float32(xla)

    def run(x):
        x = jnp.asarray(x)
        if bfloat16_platform and platform_functions(x):
            return widened(x)
        return ours(x) if own(x) else xla(x)

    run.__name__ = run.__qualname__ = xla.__name__
    return run


def ours_wherever_float32(ours, xla):
    """ours for float32 and half values on every platform, whatever JAXDEV_MATH says; xla's for the
    rest: for functions whose XLA (jax.scipy) float32 version is wrong, not only slower (erfcx float32
    was 0 on x in 9.19..9.4, CPU 0.06)."""
    ours = _in_float32(ours)

    def run(x):
        x = jnp.asarray(x)
        return ours(x) if x.dtype in _OWN_DTYPES else xla(x)

    run.__name__ = run.__qualname__ = xla.__name__
    return run


exp = chosen(_exp_own, jnp.exp, bfloat16_platform=True)
expm1 = chosen(_expm1_own, jnp.expm1)
log = chosen(_log_own, jnp.log, bfloat16_platform=True)
log1p = chosen(_log1p_own, jnp.log1p)
tanh = chosen(_tanh_own, jnp.tanh, bfloat16_platform=True)
sigmoid = chosen(_sigmoid_own, jax.nn.sigmoid, bfloat16_platform=True)
erf = chosen(_erf_own, jax.scipy.special.erf)
erfc = chosen(_erfc_own, jax.scipy.special.erfc)


def _log2_32(x):
    """e + log(1 + f) / log(2): a power of two's log2 is exact, as CPU's."""
    e, f = log_parts(x)
    return _special_log(x, e + (f + _log1p_reduced(f)) * LOG2E)


def _split(v):
    """(hi, lo): v = hi + lo exactly, hi with v's top 12 significant bits (so hi * c is exact for a
    constant c of 12 bits)."""
    hi = lax.bitcast_convert_type(lax.bitcast_convert_type(v, jnp.int32) & -4096, jnp.float32)
    return hi, v - hi


def _top_bits(c: float) -> np.float32:
    return (np.array(c, np.float32).view(np.int32) & np.int32(-4096)).view(np.float32)


_LOG10_2_HI, _LOG10_E_HI = _top_bits(math.log10(2)), _top_bits(math.log10(math.e))
_LOG10_2_LO = np.float32(math.log10(2) - float(_LOG10_2_HI))
_LOG10_E_LO = np.float32(math.log10(math.e) - float(_LOG10_E_HI))


def _log10_32(x):
    """e log10(2) + log(1 + f) log10(e), the large products exact (12-bit halves), the rest summed small
    first: one rounding past log10's own."""
    e, f = log_parts(x)
    f_hi, f_lo = _split(f)
    small = _log1p_reduced(f)
    lo = f_lo * _LOG10_E_HI + (f * _LOG10_E_LO + small * np.float32(math.log10(math.e)) + e * _LOG10_2_LO)
    return _special_log(x, e * _LOG10_2_HI + (f_hi * _LOG10_E_HI + lo))


_LN2 = np.float32(math.log(2))
_LN10 = np.float32(math.log(10))
_sin_own = with_jvp(_trig.sin32, lambda x, y, g: g * _trig.cos32(x))
_cos_own = with_jvp(_trig.cos32, lambda x, y, g: -g * _trig.sin32(x))
sin = chosen(_sin_own, jnp.sin)
cos = chosen(_cos_own, jnp.cos)
tan = chosen(with_jvp(_trig.tan32, lambda x, y, g: g * (1 + y * y)), jnp.tan)  # JAX's rule
log2 = chosen(with_jvp(_log2_32, lambda x, y, g: g / (x * _LN2)), jnp.log2)
log10 = chosen(with_jvp(_log10_32, lambda x, y, g: g / (x * _LN10)), jnp.log10)


# --- what JAX builds on them, built on these ------------------------------------------------------


def logaddexp(a, b):
    """jnp.logaddexp: max + log1p(exp(-|a - b|)), a + b where the difference is NaN (equal
    infinities, a NaN)."""
    a, b = jnp.asarray(a), jnp.asarray(b)
    if not own(jnp.result_type(a, b)):
        return jnp.logaddexp(a, b)
    delta = a - b
    return jnp.where(jnp.isnan(delta), a + b, jnp.maximum(a, b) + log1p(exp(-jnp.abs(delta))))


def softplus(x):
    """jax.nn.softplus: logaddexp(x, 0)."""
    x = jnp.asarray(x)
    return logaddexp(x, jnp.zeros((), x.dtype)) if own(x) else jax.nn.softplus(x)


def gelu(x, approximate: bool):
    """jax.nn.gelu: x/2 erfc(-x / sqrt(2)), or x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))."""
    x = jnp.asarray(x)
    if approximate and platform_functions(x):  # half_results.py: tanh(u) from the platform's exp
        v = x.astype(jnp.float32)
        u = np.float32(np.sqrt(2 / np.pi)) * (v + 0.044715 * (v**3))
        # 1 - 2 / (exp(2|u|) + 1) rounds near -1 as CPU's tanh rounds there, whose last ulps 1 + tanh(u)
        # keeps where x << 0; XLA's tanh may be hundreds of ulps off there (half_results.py)
        t = jnp.copysign(1 - 2 / (jnp.exp(2 * jnp.abs(u)) + 1), u)
        return (v * (0.5 * (1.0 + t))).astype(x.dtype)
    if not own(x):
        return jax.nn.gelu(x, approximate=approximate)
    if approximate:
        inner = np.sqrt(2 / np.pi).astype(x.dtype) * (x + 0.044715 * (x**3))
        return x * (0.5 * (1.0 + tanh(inner)))
    return (0.5 * x * erfc(-x * np.sqrt(0.5).astype(x.dtype))).astype(x.dtype)


def _widened(fn, x, axis):
    """XLA's softmax or log_softmax; of a bfloat16 value taking the platform's functions, in float32."""
    if x.dtype == jnp.bfloat16 and platform_functions(x):
        return fn(x.astype(jnp.float32), axis=axis).astype(x.dtype)
    return fn(x, axis=axis)


def softmax(x, axis=-1):
    """jax.nn.softmax over `axis`: exp(x - max) / sum. Where the platform's division is not IEEE's (a
    TPU's is 2 ulps off: softmax was 7 ulps from CPU's, its gradient 4x plain's), exp(x - max) times
    the sum's reciprocal, corrected once a row (division.divide): within an ulp of the quotient (CPU's
    last-dimension kernel multiplies by 1 / sum too), at a product's cost an element, not divide's ~20."""
    if not own_exp(x):
        return _widened(jax.nn.softmax, x, axis)
    if x.size == 0:  # jnp.max of an empty dim raises (jax.nn's starts from -inf); CPU's result is empty
        return x
    unnormalized = exp(x - lax.stop_gradient(jnp.max(x, axis, keepdims=True)))
    total = jnp.sum(unnormalized, axis, keepdims=True)
    if division_ieee():
        return unnormalized / total
    return unnormalized * divide(jnp.ones_like(total), total)


def log_softmax(x, axis=-1):
    """jax.nn.log_softmax over `axis`: (x - max) - log(sum(exp(x - max)))."""
    if not own_exp(x):
        return _widened(jax.nn.log_softmax, x, axis)
    if x.size == 0:  # as softmax's
        return x
    shifted = x - lax.stop_gradient(jnp.max(x, axis, keepdims=True))
    return shifted - log(jnp.sum(exp(shifted), axis, keepdims=True))
