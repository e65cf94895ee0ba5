"""Sums and products: sum, mean, prod (with out=, whose dtype they take), nansum, count_nonzero,
trace and logsumexp. Integers and bools sum to int64 unless `dtype=` is given; mean needs a floating
or complex input; float16/bfloat16 accumulate in float32."""

from __future__ import annotations

import jax.numpy as jnp
import torch

from jaxdev import dtypes, tensor
from jaxdev.ops.kit import J, accumulate_dtype, axes, jitted, opmath
from jaxdev.ops.kit import transcendentals as tm
from jaxdev.ops.kit.cpu_numerics import round_to
from jaxdev.ops.reductions.common import reduce_over
from jaxdev.ops.registry import aten, register, register_functional, store_into


@register_functional(aten.sum.dim_IntList, out=False)
def sum_dims(self, dim=None, keepdim=False, *, dtype=None):
    return reduce_over(jnp.sum, self, dim, keepdim, accumulate_dtype(self.dtype, dtype))


@register_functional(aten.sum.default, out=False)
def sum_all(self, *, dtype=None):
    return sum_dims(self, None, False, dtype=dtype)


@register_functional(aten.mean.dim)
def mean(self, dim=None, keepdim=False, *, dtype=None):
    result = dtype or self.dtype
    if not (result.is_floating_point or result.is_complex):
        raise RuntimeError(
            "mean(): could not infer output dtype. Input dtype must be either a floating point or "
            f"complex dtype. Got: {dtypes.scalar_name(result)}"
        )
    return reduce_over(jnp.mean, self, dim, keepdim, result)


@register_functional(aten.mean.default, out=False)
def mean_all(self, *, dtype=None):
    return mean(self, None, False, dtype=dtype)


@register_functional(aten.prod.dim_int, out=False)
def prod(self, dim, keepdim=False, *, dtype=None):
    return reduce_over(jnp.prod, self, dim, keepdim, accumulate_dtype(self.dtype, dtype))


# C++'s typeid names, as CPU's reduction out= check prints them.
_TYPEID = {
    torch.bool: "bool",
    torch.uint8: "unsigned char",
    torch.int8: "signed char",
    torch.int16: "short",
    torch.int32: "int",
    torch.int64: "long",
    **dtypes.FLOATING_CPP_NAMES,
}


def _reduction_out(fn):
    """sum/prod with out=: the result has out's dtype (the input converted to it, as CPU's
    get_dtype_from_result), and a `dtype=` must be out's."""

    def kernel(self, *args, dtype=None, out, **kwargs):
        if dtype is not None and out.dtype != dtype:
            raise RuntimeError(
                f"Expected out tensor to have dtype {_TYPEID.get(dtype, dtype)}, but got "
                f"{_TYPEID.get(out.dtype, out.dtype)} instead"
            )
        tensor.check_no_partial_overlap(out, (self,))
        return store_into(out, fn(self, *args, dtype=out.dtype, **kwargs), resize=True)

    return kernel


register(aten.sum.IntList_out)(_reduction_out(sum_dims))


register(aten.prod.int_out)(_reduction_out(prod))


@register_functional(aten.prod.default, out=False)
def prod_all(self, *, dtype=None):
    return reduce_over(jnp.prod, self, None, False, accumulate_dtype(self.dtype, dtype))


def _nansum(x, axis, keepdims):
    return jnp.nansum(x, axis=axis, keepdims=keepdims)


@register_functional(aten.nansum.default)
def nansum(self, dim=None, keepdim=False, *, dtype=None):
    return reduce_over(_nansum, self, dim, keepdim, accumulate_dtype(self.dtype, dtype))


def _count(x, axis, keepdims):
    return jnp.sum(x != 0, axis=axis, keepdims=keepdims)


@register_functional(aten.count_nonzero.dim_IntList)
def count_nonzero(self, dim):
    return reduce_over(_count, self, dim, False, torch.int64, self.dtype)


@register_functional(aten.count_nonzero.default)
def count_nonzero_dim(self, dim=None):
    return count_nonzero(self, [] if dim is None else [dim])


def _trace(x, axis, keepdims):
    return jnp.trace(x)


@register_functional(aten.trace.default)
def trace(self):
    if self.dim() != 2:
        raise RuntimeError(f"trace: expected a matrix, but got tensor with dim {self.dim()}")
    if self.dtype == torch.bool:
        raise NotImplementedError("\"trace\" not implemented for 'Bool'")
    return reduce_over(_trace, self, None, False, accumulate_dtype(self.dtype, None))


@register_functional(aten.logsumexp.default, out=False)
def logsumexp(self, dim, keepdim=False):
    """One program for what CPU composes of seven ops (amax of the real part, its infinities zeroed,
    sub, exp, sum, log, add; 350 us here as separate programs), each step rounded to the dtype as
    CPU's separate ops round it. Integer and bool inputs give the default float dtype."""
    integral = not (self.dtype.is_floating_point or self.dtype.is_complex)
    jdt = dtypes.to_jax_dtype(torch.get_default_dtype() if integral else self.dtype)
    return _logsumexp(_logsumexp_axes(self, dim, keepdim), bool(keepdim), jdt, jdt)(J(self))


def _logsumexp_axes(self, dim, keepdim) -> tuple:
    if not keepdim and len(dim) == 0 and self.dim() > 0 and self.numel() != 0:
        # CPU adds the kept-dims maxima into the reduced result in place: over no dims that fails
        raise RuntimeError(f"output with shape [] doesn't match the broadcast shape {[1] * self.dim()}")
    return axes(dim, self.dim())


@register(aten.logsumexp.out)
def logsumexp_out(self, dim, keepdim=False, *, out):
    """CPU's logsumexp_out: the exponentials in the input's dtype (an integer input's in out's), the
    sum, log and add in out's dtype."""
    if not (out.dtype.is_floating_point or out.dtype.is_complex):
        raise RuntimeError(
            f"logsumexp(): Expected floating point type for result tensor, but got: {dtypes.scalar_name(out.dtype)}"
        )
    integral = not (self.dtype.is_floating_point or self.dtype.is_complex)
    jdt = dtypes.to_jax_dtype(out.dtype if integral else self.dtype)
    ax = _logsumexp_axes(self, dim, keepdim)
    return store_into(out, _logsumexp(ax, bool(keepdim), jdt, dtypes.to_jax_dtype(out.dtype))(J(self)), resize=True)


@jitted
def _logsumexp(ax, keepdim, jdt, out_jdt):
    """CPU's steps, each rounded as its separate op rounds it: the exponentials in `jdt`, the sum, log
    and add in `out_jdt` (the functional op's result dtype, or an out= tensor's)."""

    def step(v, dtype):  # one of CPU's ops: computed in opmath, rounded to its dtype
        if dtype in (jnp.float16, jnp.bfloat16):  # by round_to, not a float16 round trip (issue 41)
            return round_to(dtype)(v.astype(opmath(dtype)))
        return v.astype(dtype).astype(opmath(dtype))

    def run(x):
        x = step(x, jdt)
        if x.size == 0:
            return step(tm.log(step(jnp.sum(step(tm.exp(x), jdt), axis=ax, keepdims=keepdim), out_jdt)), out_jdt)
        peak = jnp.max(jnp.real(x), axis=ax, keepdims=True)
        peak = jnp.where(jnp.isinf(peak), jnp.zeros((), peak.dtype), peak)
        exps = step(tm.exp(step(x - peak, jdt)), jdt)
        total = step(jnp.sum(exps.astype(opmath(out_jdt)), axis=ax, keepdims=keepdim), out_jdt)
        kept = peak if keepdim else jnp.squeeze(peak, ax)
        return (step(tm.log(total), out_jdt) + kept.astype(opmath(out_jdt))).astype(out_jdt)

    return run
