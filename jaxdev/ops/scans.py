"""Scans along a dim: cumsum, cumprod, logcumsumexp, and cummax/cummin (PyTorch's `_cum*_helper`
kernels, which write values and indices).

Integer and bool inputs accumulate in int64 unless `dtype=` says otherwise, as PyTorch's do; half
precision accumulates in float32. cummax/cummin combine (value, index) pairs with CPU's rule, so ties
and NaNs pick the same index.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import torch

from jaxdev import dtypes, tensor
from jaxdev.ops.kit import J, accumulate_dtype, cpu_numerics, jitted, opmath, out_dtypes, wrap_dim
from jaxdev.ops.kit import transcendentals as tm
from jaxdev.ops.kit import transcendentals_atan as ta
from jaxdev.ops.kit import transcendentals_complex as tc
from jaxdev.ops.kit import transcendentals_trig as trig
from jaxdev.ops.registry import aten, register, register_functional, store_into


def _cumulative(fn, name):
    def kernel(self, dim, *, dtype=None):
        result = accumulate_dtype(self.dtype, dtype)
        a = wrap_dim(dim, self.dim())
        x = dtypes.convert(J(self), opmath(dtypes.to_jax_dtype(result)))
        if x.ndim == 0:  # copied without the kernel
            return x.astype(dtypes.to_jax_dtype(result))
        if result == torch.bool:
            raise NotImplementedError(f"\"{name}_out_cpu\" not implemented for 'Bool'")
        return fn(x, axis=a).astype(dtypes.to_jax_dtype(result))

    return kernel


def _cumulative_inplace(functional, name):
    """`x.cumsum_(dim, dtype=)`: computed in x's own dtype, a `dtype=` other than it refused (as derived
    from the functional kernel, a float64 cumsum_ of a float32 tensor was rounded back into it)."""

    def kernel(self, dim, *, dtype=None):
        wrap_dim(dim, self.dim())
        if dtype is not None and dtype != self.dtype:
            raise RuntimeError(
                f"Bad in-place call: input tensor dtype {dtypes.type_meta_name(self.dtype)} and output tensor "
                f"dtype {dtypes.type_meta_name(dtype)} should match"
            )
        return store_into(self, functional(self, dim, dtype=self.dtype), resize=False)

    return kernel


def _cumulative_out(functional, name):
    """cumsum/cumprod with out=: computed in out's dtype (CPU's structured kernel takes it for the
    result), and a `dtype=` must be out's."""

    def kernel(self, dim, *, dtype=None, out):
        wrap_dim(dim, self.dim())
        if dtype is not None:
            out_dtypes.check_exact(dtype, out)
        tensor.check_no_partial_overlap(out, (self,))
        return store_into(out, functional(self, dim, dtype=out.dtype), resize=True)

    return kernel


for _name in ("cumsum", "cumprod"):
    _functional = _cumulative(getattr(jnp, _name), _name)
    register_functional(getattr(aten, _name).default, inplace=False, out=False)(_functional)
    register(getattr(aten, _name + "_").default)(_cumulative_inplace(_functional, _name))
    register(getattr(aten, _name).out)(_cumulative_out(_functional, _name))


def _pick_later(for_max):
    """Combine (value, index) pairs, the right one later in the scan: CPU's rule
    `isnan(x) || (!isnan(best) && x >= best)` (<= for min), which is associative."""

    def combine(a, b):
        (va, ia), (vb, ib) = a, b
        better = vb >= va if for_max else vb <= va
        if jnp.issubdtype(va.dtype, jnp.floating):
            better = jnp.isnan(vb) | (~jnp.isnan(va) & better)
        return jnp.where(better, vb, va), jnp.where(better, ib, ia)

    return combine


@jitted
def _cum_extreme(axis, for_max):
    def run(x):
        idx = jax.lax.broadcasted_iota(jnp.int64, x.shape, axis)
        return jax.lax.associative_scan(_pick_later(for_max), (x, idx), axis=axis)

    return run


def _cum_helper(for_max):
    def kernel(self, values, indices, dim):
        x = J(self)
        if x.ndim == 0:
            v, i = x, jnp.zeros((), jnp.int64)
        else:
            v, i = _cum_extreme(wrap_dim(dim, self.dim()), for_max)(x)
        tensor.write(values, v)
        tensor.write(indices, i)

    return kernel


register(aten._cummax_helper.default)(_cum_helper(True))


register(aten._cummin_helper.default)(_cum_helper(False))


# CPU's running value is at::acc_type<scalar_t, false>: float for half, double for float32 and
# complex<double> for complex64.
_LCSE_ACC = {jnp.dtype(jnp.float32): jnp.dtype(jnp.float64), jnp.dtype(jnp.complex64): jnp.dtype(jnp.complex128)}


def _c_exp(z):
    """C's cexp, whose exp(inf + 0i) is inf + 0i (not inf + nan i)."""
    m, y = tm.exp(jnp.real(z)), jnp.imag(z)
    return jax.lax.complex(jnp.where(y == 0, m, m * tm.cos(y)), jnp.where(y == 0, y, m * tm.sin(y)))


def _c_log(z):
    """C's clog: log|z| (inf when a part is infinite, even beside a NaN) + i arg(z)."""
    x, y = jnp.real(z), jnp.imag(z)
    modulus = jnp.where(jnp.isinf(x) | jnp.isinf(y), jnp.inf, tm.log(jnp.hypot(x, y)))
    return jax.lax.complex(modulus, ta.atan2(y, x))


def _complex_log_add_exp(x, cum):
    """CPU's _log_add_exp_helper for complex (LogAddExp.h): min/max by real part, NaN infectious,
    log1p(exp(min - max)) + max, so the imaginary part accumulates instead of wrapping to (-pi, pi]."""
    nan_x = jnp.isnan(jnp.real(x)) | jnp.isnan(jnp.imag(x))
    nan_c = jnp.isnan(jnp.real(cum)) | jnp.isnan(jnp.imag(cum))
    x_first = jnp.real(x) < jnp.real(cum)
    lo, hi = jnp.where(x_first, x, cum), jnp.where(x_first, cum, x)
    lo_r, hi_r = jnp.real(lo), jnp.real(hi)
    general = tc.log1p_c10(tc.exp(lo - hi)) + hi
    both_inf = ~jnp.isfinite(lo_r) & (lo_r == hi_r)
    infinite = jnp.where(lo_r < 0, lo, _c_log(_c_exp(lo) + _c_exp(hi)))
    out = jnp.where(both_inf, infinite, general)
    nan = jnp.full((), jnp.nan + 1j * jnp.nan, out.dtype)
    return jnp.where(nan_x | nan_c, nan, out)


def _log_add_exp_pairs(a, b):
    """log(e^a + e^b) of two float pairs (hi, lo), as a pair: max + log1p(exp(min - max)) with the
    difference and the final sum error-free (trig.two_sum), so that a scan's levels add no rounding
    of the running value but the last; jaxdev's exp and log1p. A pair with an infinite or NaN part,
    or a -inf beside a finite one, takes transcendentals.logaddexp's rules (CPU's), lo 0."""
    (ah, al), (bh, bl) = a, b
    first = ah >= bh
    mh, ml = jnp.where(first, ah, bh), jnp.where(first, al, bl)
    nh, nl = jnp.where(first, bh, ah), jnp.where(first, bl, al)
    dh, de = trig.two_sum(nh, -mh)
    t = tm.log1p(tm.exp(dh + (de + (nl - ml))))
    s, e = trig.two_sum(mh, t)
    lo = e + ml
    hi = s + lo
    lo = lo - (hi - s)
    hi, lo = jnp.where(nh == -jnp.inf, mh, hi), jnp.where(nh == -jnp.inf, ml, lo)
    special = ~jnp.isfinite(mh) | jnp.isnan(nh) | ~jnp.isfinite(hi)
    return jnp.where(special, tm.logaddexp(ah, bh), hi), jnp.where(special, jnp.zeros_like(lo), lo)


def _own_cumlogsumexp(x, axis):
    """jax.lax.cumlogsumexp with jaxdev's functions, where they are chosen (a TPU: XLA's exp and log
    there left float32 logcumsumexp 1,259 ulps from CPU's, whose running value is a double): an
    associative scan of float pairs, rounded once."""
    hi, lo = jax.lax.associative_scan(_log_add_exp_pairs, (x, jnp.zeros_like(x)), axis=axis)
    return hi + lo


@jitted
def _logcumsumexp(axis, acc):
    def run(x):
        if not jnp.iscomplexobj(x):
            if tm.own(acc):
                return _own_cumlogsumexp(x.astype(acc), axis).astype(x.dtype)
            return jax.lax.cumlogsumexp(x.astype(acc), axis=axis).astype(x.dtype)

        def step(cum, xi):
            cum = _complex_log_add_exp(xi.astype(acc), cum)
            return cum, cum.astype(x.dtype)

        moved = jnp.moveaxis(x, axis, 0)
        init = jnp.full(moved.shape[1:], -jnp.inf, acc)
        return jnp.moveaxis(jax.lax.scan(step, init, moved)[1], 0, axis)

    return run


@register_functional(aten._logcumsumexp.default)
def logcumsumexp(self, dim):
    if not (self.dtype.is_floating_point or self.dtype.is_complex):  # jnp took them, or overflowed
        wrap_dim(dim, self.dim())
        raise NotImplementedError(f"\"logcumsumexp_out_cpu\" not implemented for '{dtypes.scalar_name(self.dtype)}'")
    x = J(self)
    if x.ndim == 0:
        return x
    # where float64 is emulated (a TPU) the running value stays in the input's opmath dtype: XLA's TPU
    # compiler aborted on the complex128 scan and took over 150 s on the float64 one (deviceless.py)
    wide = _LCSE_ACC.get(x.dtype) if cpu_numerics.float64_native() else None
    acc = wide or opmath(x.dtype)
    return _logcumsumexp(wrap_dim(dim, self.dim()), acc)(x)
