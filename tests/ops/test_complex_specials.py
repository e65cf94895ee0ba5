"""Complex special values against CPU: infinite, NaN and signed-zero parts, and large finite ones, of
the complex unary functions and of pow in its overloads, complex64 and complex128, on XLA's functions
and on jaxdev's own complex64 formulas (a TPU's: tests/tpu_emulation.py's policy here).

Each part of a result is judged by its class (NaN, +-inf, +-0, positive, negative) and a finite
non-zero part within RTOL of CPU's: these tests hold special values, the precision tests theirs.
Not here: sgn (CPU's vectorized and scalar loops disagree: sgn(inf + 1i) is NaN + 0i in the first and
NaN + i NaN in the second, by the element's place in the tensor); subnormal results (XLA flushes
them); tiny parts beside others (XLA's sinh and cosh lose sinh(1e-30) cos y: measured, not held).
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch
import tpu_functions as tracer
from jaxdev_testing import JAX

from jaxdev.ops.kit import complex_trig_specials

INF, NAN = math.inf, math.nan
PARTS = (0.0, -0.0, 1.0, -1.0, 2.5, -3.5, 1e30, -1e30, INF, -INF, NAN)
DTYPES = (torch.complex64, torch.complex128)
RTOL = {torch.complex64: 1e-5, torch.complex128: 1e-12}
UNARY = (
    "tan", "tanh", "sin", "cos", "sinh", "cosh", "exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sqrt",
    "rsqrt", "reciprocal", "sigmoid", "acos", "acosh", "asin", "asinh", "atan", "atanh", "abs", "angle",
)  # fmt: skip
# XLA's complex rsqrt is polar: past |x| ~ 1e7 |y| on the negative side its real part is cos(pi/2)'s
# rounding (rsqrt(-1e30 + 1i) is -4.4e-23 - 1e-15i, CPU's +0 - 1e-15i), and complex64's positive side
# has subnormal parts there: its large parts are left out
LEFT_OUT = {"rsqrt": (1e30, -1e30)}
# pow's operands: zero, infinite and NaN bases beside finite ones whose log is negative, zero or
# positive (not within rounding of |x| = 1, where XLA's log|x| is 0 and glibc's 2e-8: precision, not
# held here), and the exponents CPU's kernels treat alone (0, 1, 2, 3, +-0.5, -1, -2) among the rest
BASES = (
    0j, complex(-0.0, 0.0), complex(0.0, -0.0), complex(-0.0, -0.0), 1 + 0j, 1j, -1 + 0j, 0.5 + 0j, 2 + 1j,
    complex(0.5, -0.5), complex(INF, 0), complex(-INF, 1), complex(0, INF), complex(INF, INF), complex(NAN, 0),
    complex(0, NAN), complex(INF, NAN),
)  # fmt: skip
EXPONENTS = (
    0j, complex(0, -0.0), complex(-0.0, 0), 1 + 0j, 2 + 0j, 3 + 0j, 0.5 + 0j, -0.5 + 0j, -1 + 0j, -2 + 0j, 1j,
    -1j, 2 + 1j, 0.5 - 3j, -2.5 + 1j, complex(-0.0, -1), complex(INF, 0), complex(-INF, 0), complex(0, INF),
    complex(INF, INF), complex(NAN, 0), complex(0, NAN), complex(1, NAN),
)  # fmt: skip


def _values(dtype, op=""):
    parts = [p for p in PARTS if p not in LEFT_OUT.get(op, ())]
    return torch.tensor([complex(a, b) for a in parts for b in parts], dtype=dtype)


def _class(t):
    """0 NaN, 1 +inf, 2 -inf, 3 -0, 4 +0, 5 positive, 6 negative."""
    finite = torch.where(t == 0, torch.where(torch.signbit(t), 3, 4), torch.where(t > 0, 5, 6))
    return torch.where(t.isnan(), 0, torch.where(t.isposinf(), 1, torch.where(t.isneginf(), 2, finite)))


def _part_differs(got, want, rtol):
    wide_got, wide_want = got.double(), want.double()
    off = (wide_got - wide_want).abs() > rtol * wide_want.abs()
    return (_class(got) != _class(want)) | (want.isfinite() & (want != 0) & off)


def _differences(got, want, rtol, labels):
    """CPU's value against ours, per element where they differ (as text), none where they agree."""
    got, want = got.cpu(), want.cpu()
    if want.is_complex():
        bad = _part_differs(got.real, want.real, rtol) | _part_differs(got.imag, want.imag, rtol)
    else:
        bad = _part_differs(got, want, rtol)
    return [
        f"{labels[i]}: cpu {want.flatten()[i].item()} jax {got.flatten()[i].item()}"
        for i in bad.flatten().nonzero().flatten().tolist()
    ]


def _unary_differences(op, dtype):
    z = _values(dtype, op)
    fn = getattr(torch, op)
    return _differences(fn(z.to(JAX)), fn(z), RTOL[dtype], [str(v) for v in z.tolist()])


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("op", UNARY)
def test_complex_special_values_are_cpus(op, dtype):
    """tan(inf + 0i) is NaN + 0i, sinh(-0 + 1i) -0 + 0.84i, sigmoid(inf + inf i) 1 + 0i, 1 / (inf + inf i)
    NaN + i NaN, expm1(inf + 0i) inf + i NaN... (before: NaN + i NaN, +0, NaN, 0, inf + 0i)."""
    assert _unary_differences(op, dtype) == []


@pytest.mark.tpu_fact("jaxdev's own complex64 formulas are chosen on a TPU")
def test_own_complex64_special_values_are_cpus(tpu_policy, tpu_division):
    """The own formulas (transcendentals_complex.py) and the rest, where a TPU chooses them."""
    found = {op: _unary_differences(op, torch.complex64) for op in UNARY}
    assert {op: d for op, d in found.items() if d} == {}


# reached XLA's complex functions (built on its real sqrt, log, exp, sin, atan2) where jaxdev's are chosen
ON_OWN_ROOTS = ("sqrt", "rsqrt", "acos", "acosh", "asin", "asinh", "expm1", "exp2", "sigmoid")


@pytest.mark.tpu_fact("XLA's TPU complex sqrt, acos, expm1 ... are built on its real functions, off CPU's")
@pytest.mark.parametrize("op", ON_OWN_ROOTS)
def test_complex64_values_take_no_xla_function_where_jaxdevs_are_chosen(op, tpu_policy, tpu_division, tpu_sqrt):
    """With XLA's functions and sqrt lowered 1,000 ulps off (tests/tpu_functions.py), these ops' values
    and special values are still CPU's (complex_roots.py; c10's expm1, sigmoid, rsqrt on them). On the chip
    acos(1j) was -0.8813971j against CPU's -0.8813736j; here sqrt differed on 60 values, expm1 72, exp2 66,
    rsqrt 32, asin(1 + 1j) 1e-5. Left out: parts of 1e30, whose sin and cos are past the own reduction's
    range (2.6e7) and XLA's there."""
    with tracer.functions(tracer.XLA_FUNCTIONS + ("sqrt", "rsqrt")):
        z = _values(torch.complex64, op)
        keep = (z.real.abs() != 1e30) & (z.imag.abs() != 1e30)
        z = z[keep]
        fn = getattr(torch, op)
        found = _differences(fn(z.to(JAX)), fn(z), RTOL[torch.complex64], [str(v) for v in z.tolist()])
    assert found == []


def _pow_differences(dtype):
    """pow(Tensor, Tensor), pow(Tensor, 0-d Tensor), pow(Tensor, number) and pow(number, Tensor) over
    BASES x EXPONENTS."""
    base = torch.tensor(BASES, dtype=dtype)
    exponent = torch.tensor(EXPONENTS, dtype=dtype)
    labels = [f"({b}) ** ({e})" for b in BASES for e in EXPONENTS]
    b, e = base[:, None].expand(-1, len(EXPONENTS)), exponent[None, :].expand(len(BASES), -1)
    rtol = RTOL[dtype]
    found = _differences(torch.pow(b.to(JAX), e.to(JAX)), torch.pow(b, e), rtol, labels)
    for k, number in enumerate(EXPONENTS):
        names = [f"({v}) ** {number}" for v in BASES]
        zero_dim = exponent[k]
        found += _differences(torch.pow(base.to(JAX), zero_dim.to(JAX)), torch.pow(base, zero_dim), rtol, names)
        found += _differences(torch.pow(base.to(JAX), number), torch.pow(base, number), rtol, names)
    for number in BASES + (1, 0, 2):
        names = [f"{number} ** ({v})" for v in EXPONENTS]
        found += _differences(torch.pow(number, exponent.to(JAX)), torch.pow(number, exponent), rtol, names)
    return found


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_complex_pow_special_values_are_cpus(dtype):
    """CPU's cpow, cexp(y * clog(x)) with C99's product: 0^(2 + i) is 0 - 0i, 0^0 NaN + i NaN, 0^(1 + 0i)
    0 - 0i (the NaN of 0 * -inf has its sign bit set), inf^2 inf + i NaN, 1^inf NaN + i NaN, 1^NaN 1
    for a number 1; the exponents CPU's Tensor-number kernel computes alone (sqrt, rsqrt, reciprocal,
    products) as those kernels do."""
    assert _pow_differences(dtype) == []


@pytest.mark.tpu_fact("jaxdev's own complex64 pow is chosen on a TPU")
def test_own_complex64_pow_special_values_are_cpus(tpu_policy, tpu_division):
    assert _pow_differences(torch.complex64) == []


@pytest.mark.parametrize(
    ("base", "exponent", "dtype"),
    [
        (0.5 + 0.5j, 100 + 100j, torch.complex64),
        (0.5 + 0.5j, 1000 + 1000j, torch.complex128),
        (complex(0.5, -0.5), complex(100, -100), torch.complex64),
        (2 + 2j, -100 - 100j, torch.complex128),
    ],
)
def test_pow_keeps_the_sign_of_an_underflowed_zero_where_the_stand_ins_cancel(base, exponent, dtype):
    """A finite base whose log parts are +-1 stand-ins in _log_classes, times an exponent with y.re = +-y.im:
    the stand-ins' product has a zero imaginary part (100 * 1 + 100 * -1) where the true product's is not
    zero; a result that underflows keeps XLA's sign of its zero there, as CPU's (0.5 + 0.5i)^(100 + 100i)
    is 0 - 0i (it came out 0 + 0i)."""
    b, e = torch.tensor([base], dtype=dtype), torch.tensor([exponent], dtype=dtype)
    want, got = torch.pow(b, e), torch.pow(b.to(JAX), e.to(JAX)).cpu()
    assert _class(got.real).tolist() == _class(want.real).tolist()
    assert _class(got.imag).tolist() == _class(want.imag).tolist()


@pytest.mark.parametrize("dtype", (jnp.complex64, jnp.complex128), ids=str)
def test_written_out_xla_sinh_and_cosh_keep_xlas_bits(dtype):
    """complex_trig_specials takes XLA's complex sinh and cosh as exp(z + log 1/2) -+ exp(log 1/2 - z),
    their decomposition, for the signs its first exp carries: the same bits as jnp.sinh and jnp.cosh,
    special values included (a JAX whose decomposition differs would show here)."""
    rng = np.random.default_rng(0)
    parts = np.concatenate([rng.standard_normal(20000) * 4, rng.standard_normal(200) * 300, np.array(PARTS)])
    x, y = np.meshgrid(parts[::40], parts[1::40])
    real = jnp.finfo(dtype).dtype
    z = jax.lax.complex(jnp.asarray(x.ravel(), real), jnp.asarray(y.ravel(), real))
    up, down = jax.jit(complex_trig_specials.xla_exps)(z)
    for ours, xlas in ((up - down, jax.jit(jnp.sinh)(z)), (up + down, jax.jit(jnp.cosh)(z))):
        ours, xlas = np.asarray(ours), np.asarray(xlas)
        np.testing.assert_array_equal(
            ours.real.view(f"u{ours.real.itemsize}"), xlas.real.view(f"u{xlas.real.itemsize}")
        )
        np.testing.assert_array_equal(
            ours.imag.view(f"u{ours.imag.itemsize}"), xlas.imag.view(f"u{xlas.imag.itemsize}")
        )


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_gradients_of_finite_values_are_nan_only_where_cpus_are(dtype):
    """The backward of these functions at finite points, zero parts included, has NaNs only where CPU's
    has (pow's at a zero base had NaN where CPU's had not: its forward 0^(2.5 + i) was NaN). Not the
    converse: at 1e30 + 1e30i CPU's atan, asin and acos backward overflow 1 + z^2 into NaN, ours 0."""
    parts = (0.0, -0.0, 1.0, -1.0, 2.5, -3.5, 1e30, -1e30)
    values = [complex(a, b) for a in parts for b in parts]
    found = []
    for op in UNARY[:-2] + ("pow",):
        grads = {}
        for device in ("cpu", JAX):
            z = torch.tensor(values, dtype=dtype, device=device, requires_grad=True)
            if op == "pow":
                e = torch.full_like(z, 2.5 + 1j).detach().requires_grad_()
                inputs, out = (z, e), torch.pow(z, e)
            else:
                inputs, out = (z,), getattr(torch, op)(z)
            grads[str(device)] = torch.autograd.grad(out, inputs, torch.ones_like(out))
        for want, got in zip(grads["cpu"], grads["jax:0"]):
            want_nan, got_nan = want.isnan(), got.cpu().isnan()  # a complex is NaN where a part is
            found += [f"{op}({values[i]})" for i in (got_nan & ~want_nan).nonzero().flatten().tolist()]
    assert found == []
