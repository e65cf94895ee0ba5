"""float32 entr, log_ndtr, ndtri, erfcx, i0, i1 and i1e as CPU PyTorch computes them (its float kernels:
Math.h's calc_log_ndtr, calc_ndtri, calc_erfcx, calc_i0, calc_i1, calc_i1e, and UnaryOpsKernel's entr),
for where transcendentals.own() holds (a TPU). There jax.scipy's versions are XLA's float32 log, exp and
division, which are approximations on a TPU: a v5e's float32 results were up to 786,252 ulps from CPU
torch's (log_ndtr), 2,995 (entr), 430 (ndtri), 117 (i0). Elsewhere (XLA's CPU backend under the default
JAXDEV_MATH=auto: the coverage baseline's bits) functions.py keeps jax.scipy's.

Each follows CPU's float steps with the kit's functions: exp, log, log1p and erfc are
transcendentals.py's (near glibc's expf, logf, log1pf, erfcf), every division between float32 values
is cpu_numerics.divide (IEEE's where the platform's is not), a division by a power of two a
multiplication. Where CPU computes in double this computes in float32 (float64 is emulated on a TPU):
erfcx's piecewise series (its double coefficients, erfcx_table.py) is summed with its leading
coefficient as a pair of floats, so that its result is within about an ulp of CPU's rounded double.
float16 and bfloat16 arrive widened to float32 and leave rounded once (apply's casts), as CPU's calc_*
compute them; entr's half kernel rounds log(x) to the half first, as CPU's std::log of a c10::Half does
(entr_for).
"""

from __future__ import annotations

import math

import jax.numpy as jnp
import jax.scipy.special as jss
import numpy as np

from jaxdev.ops.kit import cpu_numerics as cn
from jaxdev.ops.kit import transcendentals as tm
from jaxdev.ops.special import own_float64
from jaxdev.ops.special.erfcx_table import Y100_SERIES
from jaxdev.ops.special.i0e import I0E_A, I0E_B

_INF = np.float32(np.inf)


def _below(bound: float) -> np.float32:
    """The largest float32 strictly below `bound`: C's float `x < bound` (compared in double) as `x <= it`."""
    f = np.float32(bound)
    return f if float(f) < bound else np.nextafter(f, np.float32(-np.inf))


def _constant(value, like):
    return jnp.full_like(like, value)


# --- entr ------------------------------------------------------------------------------------------


def _entr(x, rounded=None):
    """CPU's: NaN -> NaN, x > 0 -> -x log(x), +-0 -> 0, x < 0 -> -inf; `rounded` applied to log(x)."""
    log = tm.log(x)
    if rounded is not None:
        log = rounded(log)
    out = -x * log
    out = jnp.where(x == 0, jnp.float32(0), out)
    out = jnp.where(x < 0, -_INF, out)
    return jnp.where(jnp.isnan(x), x, out)


entr = tm.chosen(_entr, jss.entr)


def _entr_with_half_log(dtype):
    """entr of a half's value (widened to float32) with log(x) rounded to the half, as CPU's
    std::log(c10::Half) returns a Half; -x * log is exact in float32 and apply rounds it once more."""
    rounded = cn.round_to(dtype)
    return tm.chosen(lambda x: _entr(x, rounded), jss.entr)


_ENTR_HALF = {jnp.dtype(d): _entr_with_half_log(d) for d in (jnp.float16, jnp.bfloat16)}


def entr_for(dtype):
    """The entr body for a tensor of `dtype` (a jax dtype): the half's own where it is a half."""
    return _ENTR_HALF.get(jnp.dtype(dtype), entr)


# --- erfcx -----------------------------------------------------------------------------------------

_SERIES = np.asarray(Y100_SERIES, np.float64)  # (100, 7): c_k0 .. c_k6
# per piece: c_k0's float32 rounding and the rest of it, then c_k1 .. c_k6 in float32
_C0 = _SERIES[:, 0]
_SERIES_COLUMNS = [_C0.astype(np.float32), (_C0 - _C0.astype(np.float32)).astype(np.float32)]
_SERIES_COLUMNS += [_SERIES[:, j].astype(np.float32) for j in range(1, 7)]
_ISPI = np.float32(1 / math.sqrt(math.pi))


def _erfcx_y100(y100):
    """CPU's erfcx_y100 for y100 = 400 / (4 + |x|) in [0, 100]: piece k = floor(y100), t = 2 y100 -
    (2k + 1) (exact, as CPU's float t), the degree-6 series in t with c_k0 as hi + lo; 1 at y100 = 100
    (|x| under 4 eps), as CPU returns past its last piece."""
    k = jnp.clip(jnp.floor(y100), 0, 99).astype(jnp.int32)
    t = 2 * y100 - (2 * k + 1).astype(jnp.float32)
    c = [jnp.take(jnp.asarray(column), k, mode="clip") for column in _SERIES_COLUMNS]
    acc = c[7]
    for j in range(6, 1, -1):
        acc = acc * t + c[j]
    out = c[0] + (c[1] + acc * t)
    return jnp.where(y100 >= 100, jnp.float32(1), out)


def _erfcx_far(x):
    """CPU's x > 50 branches: ispi / x past 5e7, else its 5-term continued fraction
    ispi (x^2 (x^2 + 4.5) + 2) / (x (x^2 (x^2 + 5) + 3.75)), in float32 as CPU's."""
    s = jnp.where(x > 50, x, 60)
    xx = s * s
    fraction = cn.divide(_ISPI * (xx * (xx + 4.5) + 2), s * (xx * (xx + 5) + 3.75))
    return jnp.where(x > 5e7, cn.divide(_constant(_ISPI, x), x), fraction)


def erfcx32(x):
    """CPU's calc_erfcx on float32 x: the series in y = 4 / (4 + x) for 0 <= x <= 50, the continued
    fraction above; x < 0: 2 exp(x^2) - erfcx(-x) (x^2 rounded to float first, as CPU's), only 2 exp(x^2)
    below -6.1 and +inf below -26.7."""
    a = jnp.abs(x)
    series = _erfcx_y100(cn.divide(_constant(400, x), 4 + a))  # CPU's 4 - x for x < 0 is 4 + |x|
    positive = jnp.where(x > 50, _erfcx_far(x), series)
    twice = 2 * tm.exp(x * x)
    negative = jnp.where(x <= _below(-6.1), twice, twice - series)
    negative = jnp.where(x <= _below(-26.7), _INF, negative)
    out = jnp.where(x >= 0, positive, negative)
    return jnp.where(jnp.isnan(x), x, out)


# on every platform: jax.scipy's float32 erfcx is 0 on x in 9.19..9.4 (CPU 0.06), 1.6e7 ulps off
erfcx = tm.ours_wherever_float32(erfcx32, own_float64.erfcx64)  # float64: CPU's double algorithm too


# --- log_ndtr --------------------------------------------------------------------------------------

_FRAC_SQRT_2 = np.float32(math.sqrt(0.5))  # c10::frac_sqrt_2<float>


def log_ndtr32(x):
    """CPU's calc_log_ndtr: t = x / sqrt(2) (a float product); x < -1: log(erfcx(-t) / 2) - t^2, else
    log1p(-erfc(t) / 2)."""
    t = x * _FRAC_SQRT_2
    low = x < -1
    below = tm.log(erfcx32(jnp.where(low, -t, 1)) * 0.5) - t * t
    above = tm.log1p(-tm.erfc(jnp.where(low, 0, t)) * 0.5)
    return jnp.where(low, below, above)


# on every platform: jax.scipy's float32 log_ndtr(4.98) is 6 % off CPU's (1e6 ulps); CPU's algorithm
# here is within 64 ulps of CPU's float32 with XLA CPU's erfc, closer to the float64 value where not 3
log_ndtr = tm.ours_wherever_float32(log_ndtr32, own_float64.log_ndtr64)


# --- ndtri -----------------------------------------------------------------------------------------

# Cephes' rational approximations (CPU's calc_ndtri): P0/Q0 for |y - 1/2| <= 3/8 (in y^2), P1/Q1 and
# P2/Q2 in z = 1/x, x = sqrt(-2 log y) in [2, 8) and [8, 64), highest power first.
_P0 = (-5.99633501014107895267e1, 9.80010754185999661536e1, -5.66762857469070293439e1)
_P0 += (1.39312609387279679503e1, -1.23916583867381258016e0)
_Q0 = (1.0, 1.95448858338141759834e0, 4.67627912898881538453e0, 8.63602421390890590575e1)
_Q0 += (-2.25462687854119370527e2, 2.00260212380060660359e2, -8.20372256168333339912e1)
_Q0 += (1.59056225126211695515e1, -1.18331621121330003142e0)
_P1 = (4.05544892305962419923e0, 3.15251094599893866154e1, 5.71628192246421288162e1)
_P1 += (4.40805073893200834700e1, 1.46849561928858024014e1, 2.18663306850790267539e0)
_P1 += (-1.40256079171354495875e-1, -3.50424626827848203418e-2, -8.57456785154685413611e-4)
_Q1 = (1.0, 1.57799883256466749731e1, 4.53907635128879210584e1, 4.13172038254672030440e1)
_Q1 += (1.50425385692907503408e1, 2.50464946208309415979e0, -1.42182922854787788574e-1)
_Q1 += (-3.80806407691578277194e-2, -9.33259480895457427372e-4)
_P2 = (3.23774891776946035970e0, 6.91522889068984211695e0, 3.93881025292474443415e0)
_P2 += (1.33303460815807542389e0, 2.01485389549179081538e-1, 1.23716634817820021358e-2)
_P2 += (3.01581553508235416007e-4, 2.65806974686737550832e-6, 6.23974539184983293730e-9)
_Q2 = (1.0, 6.02427039364742014255e0, 3.67983563856160859403e0, 1.37702099489081330271e0)
_Q2 += (2.16236993594496635890e-1, 1.34204006088543189037e-2, 3.28014464682127739104e-4)
_Q2 += (2.89247864745380683936e-6, 6.79019408009981274425e-9)
_EXP_MINUS_2 = np.float32(0.13533528323661269189)
_ONE_MINUS_EXP_MINUS_2 = np.float32(1) - _EXP_MINUS_2  # CPU's float `one - T{0.135...}`
_S2PI = np.float32(2.50662827463100050242)


def _polevl(coefficients, z):
    return cn.horner(tuple(np.float32(c) for c in coefficients), z)


def _ndtri_tail(y):
    """CPU's x for y <= exp(-2): x = sqrt(-2 log y), x - log(x) / x - z P(z) / Q(z), z = 1 / x."""
    x = cn.sqrt_divisor(-2 * tm.log(y))  # divided by below: kept from XLA's a / sqrt(b) -> a * rsqrt(b)
    x0 = x - cn.divide(tm.log(x), x)
    z = cn.divide(_constant(1, x), x)
    near = cn.divide(z * _polevl(_P1, z), _polevl(_Q1, z))
    far = cn.divide(z * _polevl(_P2, z), _polevl(_Q2, z))
    return x0 - jnp.where(x < 8, near, far)


def ndtri32(y0):
    """CPU's calc_ndtri on float32 y0: 0 -> -inf, 1 -> +inf, outside [0, 1] NaN; y flipped to 1 - y
    above 1 - exp(-2); the central rational function in (y - 1/2)^2 above exp(-2), the tails below."""
    flip = y0 > _ONE_MINUS_EXP_MINUS_2
    y = jnp.where(flip, 1 - y0, y0)
    central = y > _EXP_MINUS_2
    c = jnp.where(central, y, 0.25) - 0.5
    c2 = c * c
    middle = (c + c * cn.divide(c2 * _polevl(_P0, c2), _polevl(_Q0, c2))) * _S2PI
    tail = _ndtri_tail(jnp.where(central | (y <= 0), _EXP_MINUS_2, y))
    out = jnp.where(central, middle, jnp.where(flip, tail, -tail))
    out = jnp.where((y0 < 0) | (y0 > 1), jnp.float32(jnp.nan), out)
    out = jnp.where(y0 == 0, -_INF, out)
    out = jnp.where(y0 == 1, _INF, out)
    return jnp.where(jnp.isnan(y0), y0, out)


ndtri = tm.chosen(ndtri32, jss.ndtri)


# --- i0, i1, i1e -----------------------------------------------------------------------------------

# i0's tables are i0e.py's (I0E_A on [0, 8], I0E_B past it): CPU's float kernels take all of them,
# rounded to float
# exp(-x) I1(x) / x on [0, 8] and exp(-x) sqrt(x) I1(x) on (8, inf): CPU's float tables, the double
# ones' last 17 and 7 coefficients
_I1E_A = (
    9.38153738649577178388e-9, -4.44505912879632808065e-8, 2.00329475355213526229e-7,
    -8.56872026469545474066e-7, 3.47025130813767847674e-6, -1.32731636560394358279e-5,
    4.78156510755005422638e-5, -1.61760815825896745588e-4, 5.12285956168575772895e-4,
    -1.51357245063125314899e-3, 4.15642294431288815669e-3, -1.05640848946261981558e-2,
    2.47264490306265168283e-2, -5.29459812080949914269e-2, 1.02643658689847095384e-1,
    -1.76416518357834055153e-1, 2.52587186443633654823e-1,
)  # fmt: skip
_I1E_B = (
    -3.83538038596423702205e-9, -2.63146884688951950684e-8, -2.51223623787020892529e-7,
    -3.88256480887769039346e-6, -1.10588938762623716291e-4, -9.76109749136146840777e-3,
    7.78576235018280120474e-1,
)  # fmt: skip


def _chbevl(coefficients, y):
    """Cephes' chbevl in float32, 0.5 (b0 - b2)."""
    b0, b2 = cn.chebyshev(tuple(np.float32(c) for c in coefficients), y)
    return 0.5 * (b0 - b2)


def _bessel_parts(x, small_table, large_table):
    """(|x|, |x| <= 8, the small series at |x|/2 - 2, the large one at 32/|x| - 2, sqrt(|x|) as a divisor),
    the large side's |x| kept past 8 (16 in its place) so that neither side divides by zero."""
    a = jnp.abs(x)
    small = a <= 8
    far = jnp.where(small, 16, a)  # a NaN stays NaN
    small_series = _chbevl(small_table, a * 0.5 - 2)
    large_series = _chbevl(large_table, cn.divide(_constant(32, far), far) - 2)
    return a, small, small_series, large_series, cn.sqrt_divisor(far)


def i0_32(x):
    """CPU's calc_i0: exp(|x|) A(|x|/2 - 2) up to 8, exp(|x|) B(32/|x| - 2) / sqrt(|x|) past it (+inf
    past exp's overflow at 88.72, NaN at +-inf: inf / inf, as CPU's)."""
    a, small, small_series, large_series, root = _bessel_parts(x, I0E_A, I0E_B)
    e = tm.exp(a)
    return jnp.where(small, e * small_series, cn.divide(e * large_series, root))


def i1_32(x):
    """CPU's calc_i1: exp(|x|) |x| A(|x|/2 - 2) up to 8, exp(|x|) B(32/|x| - 2) / sqrt(|x|) past it, the
    sign of x (-0 gives +0, as CPU's x < 0 test)."""
    a, small, small_series, large_series, root = _bessel_parts(x, _I1E_A, _I1E_B)
    e = tm.exp(a)
    out = jnp.where(small, e * a * small_series, cn.divide(e * large_series, root))
    return jnp.where(x < 0, -out, out)


def i1e32(x):
    """CPU's calc_i1e: A(|x|/2 - 2) |x| up to 8, B(32/|x| - 2) / sqrt(|x|) past it, the sign of x."""
    a, small, small_series, large_series, root = _bessel_parts(x, _I1E_A, _I1E_B)
    out = jnp.where(small, small_series * a, cn.divide(large_series, root))
    return jnp.where(x < 0, -out, out)


i0 = tm.chosen(i0_32, jss.i0)
i1 = tm.chosen(i1_32, jss.i1)
i1e = tm.chosen(i1e32, jss.i1e)


# --- sinc ------------------------------------------------------------------------------------------


def sinc32(x):
    """CPU's sinc: 1 at 0, else sin(p) / p for p = pi x rounded, with the own sin (a TPU's XLA sin is
    accurate to an absolute error, so near a multiple of pi its sinc was 2,000 ulps off under the
    emulation of its functions) and the platform-corrected division."""
    p = _constant(math.pi, x) * x
    return jnp.where(x == 0, jnp.ones_like(x), cn.divide(tm.sin(p), jnp.where(x == 0, 1, p)))


sinc = tm.chosen(sinc32, jnp.sinc)
