"""Complex elementary functions with CPU's signed zeros, branch cuts and special values.

CPU computes complex abs, sqrt, asin, acos, acosh, atan, asinh, atanh, exp and log with the C library (C99
Annex G): the sign of a zero part picks the side of a branch cut (sqrt(-2 - 0j) is -1.414j, sqrt(-2 +
0j) is +1.414j), and infinities and NaNs have fixed answers (|inf + nan j| is inf, sqrt(x + inf j) is
inf + inf j for every x). XLA's complex functions ignore the zero's sign (jax gave +1.414j on both
sides of the cut) and return NaN for most special values: found by a differential run of OpInfo's
reference inputs, whose extremal grids hold exactly these values.

Every function here is conjugate-symmetric, f(conj z) = conj f(z), and asin, atan, asinh and atanh are
odd, f(-z) = -f(z). So each is computed in the upper half-plane (and for odd ones the first quadrant)
after moving z there by those symmetries, which carries the signs of zeros exactly; within that region,
Annex G's table of special values replaces XLA's answer where the input has an infinite or NaN part,
or is zero. Finite non-zero inputs keep XLA's values.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp

from jaxdev.ops.kit import complex_roots, complex_sqrt, cpu_numerics
from jaxdev.ops.kit import transcendentals_atan as ta
from jaxdev.ops.kit import transcendentals_complex as tc
from jaxdev.ops.kit import transcendentals_inverse as ti

_PI = math.pi
_INF = math.inf
_NAN = math.nan


def _complex(re, im, like):
    return jax.lax.complex(jnp.asarray(re, like.real.dtype), jnp.asarray(im, like.real.dtype))


def _special(w, z, rules):
    """`w` with the Annex G `rules` applied: [(condition on the reduced z's parts, (re, im)), ...],
    the first true rule winning; re/im a number, or a function of (x, y)."""
    x, y = z.real, z.imag
    out = w
    for cond, (re, im) in reversed(rules):
        re_v = re(x, y) if callable(re) else jnp.full_like(x, re)
        im_v = im(x, y) if callable(im) else jnp.full_like(x, im)
        out = jnp.where(cond(x, y), _complex(re_v, im_v, z), out)
    return out


def _own_or(ours, other):
    """ours for complex64 where jaxdev's float32 functions are chosen (a TPU: complex_roots.py), other
    elsewhere; ours sees finite parts only (Annex G's rules replace the rest after)."""

    def run(z):
        if not (jnp.iscomplexobj(z) and tc.own(z)):
            return other(z)
        finite = jnp.isfinite(z.real) & jnp.isfinite(z.imag)
        return ours(jnp.where(finite, z, jnp.zeros_like(z)))

    run.__name__ = run.__qualname__ = getattr(other, "__name__", "run")
    return run


def _symmetric(f, odd: bool, rules):
    """f on complex arrays, reduced to the upper half-plane (first quadrant when `odd`), the special
    values of `rules` (stated for that region) applied, and the symmetries undone."""

    def complex_fn(z):
        if not jnp.iscomplexobj(z):
            return f(z)
        left = jnp.signbit(z.real) if odd else None
        if odd:
            z = jnp.where(left, -z, z)
        below = jnp.signbit(z.imag)
        z = jnp.where(below, jnp.conj(z), z)
        w = _special(f(z), z, rules)
        w = jnp.where(below, jnp.conj(w), w)
        return jnp.where(left, -w, w) if odd else w

    return complex_fn


def _is(kind):
    return {
        "inf": jnp.isinf,
        "nan": jnp.isnan,
        "zero": lambda v: v == 0,
        "finite": jnp.isfinite,
        "+inf": lambda v: jnp.isposinf(v),
        "-inf": lambda v: jnp.isneginf(v),
    }[kind]


def _when(xk=None, yk=None):
    """A condition on (x, y) classes: 'inf', 'nan', 'zero', 'finite', '+inf', '-inf', 'nonzero finite'."""

    def test(kind, v):
        if kind is None:
            return jnp.ones(v.shape, bool)
        if kind == "nonzero finite":
            return jnp.isfinite(v) & (v != 0)
        return _is(kind)(v)

    return lambda x, y: test(xk, x) & test(yk, y)


def _keep_x(x, y):
    return x


def _keep_y(x, y):
    return y


# Annex G, stated for x >= +0 where the function is odd, y >= +0 always (after the reduction).
_SQRT = [  # csqrt
    (_when(None, "inf"), (_INF, _INF)),
    (_when("zero", "zero"), (0.0, _keep_y)),
    (_when("-inf", "finite"), (0.0, _INF)),
    (_when("+inf", "finite"), (_INF, 0.0)),
    (_when("-inf", "nan"), (_NAN, _INF)),
    (_when("+inf", "nan"), (_INF, _NAN)),
    (_when("finite", "nan"), (_NAN, _NAN)),
    (_when("nan", None), (_NAN, _NAN)),
]
_ASINH = [  # casinh, first quadrant
    (_when("zero", "zero"), (_keep_x, _keep_y)),
    (_when("inf", "inf"), (_INF, _PI / 4)),
    (_when("finite", "inf"), (_INF, _PI / 2)),
    (_when("inf", "finite"), (_INF, 0.0)),
    (_when("inf", "nan"), (_INF, _NAN)),
    (_when("nan", "zero"), (_NAN, _keep_y)),
    (_when("nan", "inf"), (_INF, _NAN)),
    (_when("nan", None), (_NAN, _NAN)),
    (_when(None, "nan"), (_NAN, _NAN)),
]
_ATANH = [  # catanh, first quadrant
    (_when("zero", "zero"), (_keep_x, _keep_y)),
    (_when("zero", "nan"), (_keep_x, _NAN)),
    (lambda x, y: (x == 1) & (y == 0), (_INF, _keep_y)),
    (_when(None, "inf"), (0.0, _PI / 2)),
    (_when("inf", "finite"), (0.0, _PI / 2)),
    (_when("inf", "nan"), (0.0, _NAN)),
    (_when("nan", "inf"), (0.0, _PI / 2)),
    (_when(None, "nan"), (_NAN, _NAN)),
    (_when("nan", None), (_NAN, _NAN)),
]
_ACOS = [  # cacos, upper half-plane
    (_when("zero", "zero"), (_PI / 2, -0.0)),
    (_when("zero", "nan"), (_PI / 2, _NAN)),
    (_when("-inf", "inf"), (3 * _PI / 4, -_INF)),
    (_when("+inf", "inf"), (_PI / 4, -_INF)),
    (_when("finite", "inf"), (_PI / 2, -_INF)),
    (_when("-inf", "finite"), (_PI, -_INF)),
    (_when("+inf", "finite"), (0.0, -_INF)),
    (_when("inf", "nan"), (_NAN, -_INF)),
    (_when("nan", "inf"), (_NAN, -_INF)),
    (_when(None, "nan"), (_NAN, _NAN)),
    (_when("nan", None), (_NAN, _NAN)),
]
_ACOSH = [  # cacosh, upper half-plane
    (_when("zero", "zero"), (0.0, _PI / 2)),
    (_when("zero", "nan"), (_NAN, _PI / 2)),
    (_when("-inf", "inf"), (_INF, 3 * _PI / 4)),
    (_when("+inf", "inf"), (_INF, _PI / 4)),
    (_when("finite", "inf"), (_INF, _PI / 2)),
    (_when("-inf", "finite"), (_INF, _PI)),
    (_when("+inf", "finite"), (_INF, 0.0)),
    (_when("inf", "nan"), (_INF, _NAN)),
    (_when("nan", "inf"), (_INF, _NAN)),
    (_when(None, "nan"), (_NAN, _NAN)),
    (_when("nan", None), (_NAN, _NAN)),
]
_EXP = [  # cexp, upper half-plane: where CPU's differ from XLA's
    (_when("+inf", "inf"), (_INF, _NAN)),
    (_when("+inf", "nan"), (_INF, _NAN)),
    (_when("-inf", "inf"), (0.0, 0.0)),
    (_when("-inf", "nan"), (0.0, 0.0)),
]
_LOG = [  # clog, upper half-plane
    (_when("inf", "nan"), (_INF, _NAN)),
    (_when("nan", "inf"), (_INF, _NAN)),
]


def _i_times(f):
    """g(z) = -i f(i z): asin from asinh, atan from atanh (C99's own definitions)."""

    def g(z):
        iz = jax.lax.complex(-z.imag, z.real)
        w = f(iz)
        return jax.lax.complex(w.imag, -w.real)

    return g


# a real one IEEE's where the platform's is not, a complex64 one on jaxdev's functions where they are chosen
sqrt = _symmetric(_own_or(complex_sqrt.complex_sqrt, cpu_numerics.sqrt), False, _SQRT)


# the real functions are transcendentals_inverse's (jaxdev's where its functions are chosen, jnp's
# elsewhere); a complex argument passes them to jnp's
def _arcsinh(z):
    """ti.asinh (jnp's for a complex), or for complex64 where jaxdev's functions are chosen (a TPU,
    where XLA's reaches its own log: 1.2e-4 relative under the emulation) ti's complex one."""
    if z.dtype == jnp.complex64 and tc.own(z):
        return ti.complex_asinh_first_quadrant(z)
    return ti.asinh(z)


asinh = _symmetric(_arcsinh, True, _ASINH)


def _arctanh(z):
    """jnp.arctanh, or for complex64 where jaxdev's functions are chosen (a TPU, where XLA's reaches its
    own log: catan was 2e-5 relative from CPU's on the chip) transcendentals_inverse's."""
    if z.dtype == jnp.complex64 and tc.own(z):
        return ti.complex_atanh_first_quadrant(z)
    return jnp.arctanh(z)


_atanh = _symmetric(_arctanh, True, _ATANH)
_acos = _symmetric(_own_or(complex_roots.complex_acos, jnp.arccos), False, _ACOS)
acosh = _symmetric(_own_or(complex_roots.complex_acosh, ti.acosh), False, _ACOSH)
log = _symmetric(tc.log, False, _LOG)  # complex64 on jaxdev's float32 functions where those are chosen


def _infinite_beside_nan(f):
    """f, a complex log's multiple (log2, log10: CPU's are log(z) / log(base)), with clog's +inf + i NaN
    where an infinite part is beside a NaN one (XLA's log2 and log10 gave NaN + i NaN)."""

    def run(z):
        w = f(z)
        if not jnp.iscomplexobj(w):
            return w
        x, y = z.real, z.imag
        edge = (jnp.isinf(x) & jnp.isnan(y)) | (jnp.isnan(x) & jnp.isinf(y))
        return jnp.where(edge, _complex(_INF, _NAN, z), w)

    run.__name__ = run.__qualname__ = f.__name__
    return run


log2 = _infinite_beside_nan(tc.log2)
log10 = _infinite_beside_nan(tc.log10)
exp = _symmetric(tc.exp, False, _EXP)


def asin(z):
    return _i_times(asinh)(z) if jnp.iscomplexobj(z) else ti.asin(z)


def atanh(z):
    return _wide_atanh(z)


def _wide_atanh(z):
    """catanh of complex64 computed in complex128 and rounded once: near z = +-1 float32's log
    underflows (atanh(1 + 1e-30j) gave inf + 0.785j; CPU's catanhf 34.885 + 0.785j). Not where
    float64 is emulated (a TPU): XLA's TPU compiler raised on the complex128 program (deviceless.py),
    so complex64 stays complex64 there and keeps that underflow near +-1."""
    if z.dtype == jnp.complex64 and cpu_numerics.float64_native():
        return _atanh(z.astype(jnp.complex128)).astype(jnp.complex64)
    return _atanh(z) if jnp.iscomplexobj(z) else ti.atanh(z)


def atan(z):
    return _i_times(_wide_atanh)(z) if jnp.iscomplexobj(z) else ta.atan(z)


def acos(z):
    """CPU's complex128 acos is pi/2 - asin(z) (its vectorized kernel's formula: a zero imaginary part
    always comes out +0); its complex64 acos is the C library's cacosf (Annex G's signs)."""
    if not jnp.iscomplexobj(z):
        return ti.acos(z)
    if z.dtype == jnp.complex128:
        return jnp.asarray(_PI / 2, z.dtype) - asin(z)
    return _acos(z)


def abs(x):
    """|x|; for complex x, C99's hypot rule as CPU's std::abs: an infinite part gives inf even beside a
    NaN one (XLA's complex abs gives NaN there)."""
    if not jnp.iscomplexobj(x):
        return jnp.abs(x)
    infinite = jnp.isinf(x.real) | jnp.isinf(x.imag)
    return jnp.where(infinite, jnp.array(jnp.inf, x.real.dtype), jnp.abs(x))
