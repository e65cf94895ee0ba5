"""Reductions: sum, mean, prod, amax/amin, max/min (with indices), argmax/argmin, all/any,
var/std (with correction), vector norms.

Result dtypes follow PyTorch: sum/prod/cumsum of integers and bools give int64 unless `dtype=` is
given; mean needs a floating or complex input; float16/bfloat16 accumulate in float32.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import torch

from jaxdev import dtypes, tensor
from jaxdev.ops.registry import aten, register, register_functional, store_into
from jaxdev.ops.toolkit import J, accumulate_dtype, axes, jitted, on_views, opmath, wrap_dim


@jitted
def _reduction(fn, axis, keepdims, compute, result):
    return lambda x: fn(dtypes.convert(x, compute), axis=axis, keepdims=keepdims).astype(result)


# (fn, dim, keepdim, ndim, result, compute) -> the jitted reduction: one lookup keyed by what the op
# was called with, where building the key of _reduction (axes, numpy dtypes) costs a microsecond.
_REDUCTIONS: dict = {}


def _reduce(fn, x: torch.Tensor, dim, keepdim, result: torch.dtype, compute: torch.dtype | None = None):
    ndim = x.dim()
    key = (fn, tuple(dim) if isinstance(dim, list) else dim, keepdim, ndim, result, compute)
    try:
        body = _REDUCTIONS.get(key)
    except TypeError:  # an unhashable dim (symbolic sizes): no memo
        key, body = None, None
    if body is None:
        # axes() raises on a bad dim before anything is kept.
        jdt = opmath(dtypes.to_jax_dtype(compute or result))
        body = _reduction(fn, axes(dim, ndim), bool(keepdim), jdt, dtypes.to_jax_dtype(result))
        if key is not None:
            if len(_REDUCTIONS) >= 4096:
                _REDUCTIONS.clear()
            _REDUCTIONS[key] = body
    return on_views(body, (x,))


@register_functional(aten.sum.dim_IntList, out=False)
def sum_dims(self, dim=None, keepdim=False, *, dtype=None):
    return _reduce(jnp.sum, self, dim, keepdim, accumulate_dtype(self.dtype, dtype))


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
    return _reduce(jnp.mean, self, dim, keepdim, result)


@register_functional(aten.mean.default, out=False)
def mean_all(self, *, dtype=None):
    return mean(self, None, False, dtype=dtype)


@register_functional(aten.prod.dim_int, out=False)
def prod(self, dim, keepdim=False, *, dtype=None):
    return _reduce(jnp.prod, self, dim, keepdim, accumulate_dtype(self.dtype, dtype))


# C++'s typeid names, as CPU's reduction out= check prints them.
_TYPEID = {
    torch.bool: "bool",
    torch.uint8: "unsigned char",
    torch.int8: "signed char",
    torch.int16: "short",
    torch.int32: "int",
    torch.int64: "long",
    torch.float16: "c10::Half",
    torch.bfloat16: "c10::BFloat16",
    torch.float32: "float",
    torch.float64: "double",
    torch.complex64: "c10::complex<float>",
    torch.complex128: "c10::complex<double>",
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
    return _reduce(jnp.prod, self, None, False, accumulate_dtype(self.dtype, dtype))


def _check_nonempty(self, dim, name):
    if self.numel() == 0 and (dim is None or (isinstance(dim, (list, tuple)) and len(dim) == 0)):
        raise RuntimeError(
            f"{name}(): Expected reduction dim to be specified for input.numel() == 0. "
            "Specify the reduction dim with the 'dim' argument."
        )
    for a in axes(dim, self.dim()):
        if self.shape[a] == 0:
            raise IndexError(f"{name}(): Expected reduction dim {a} to have non-zero size.")


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
        return v.astype(dtype).astype(opmath(dtype))

    def run(x):
        x = step(x, jdt)
        if x.size == 0:
            return step(jnp.log(step(jnp.sum(step(jnp.exp(x), jdt), axis=ax, keepdims=keepdim), out_jdt)), out_jdt)
        peak = jnp.max(jnp.real(x), axis=ax, keepdims=True)
        peak = jnp.where(jnp.isinf(peak), jnp.zeros((), peak.dtype), peak)
        exps = step(jnp.exp(step(x - peak, jdt)), jdt)
        total = step(jnp.sum(exps.astype(opmath(out_jdt)), axis=ax, keepdims=keepdim), out_jdt)
        kept = peak if keepdim else jnp.squeeze(peak, ax)
        return (step(jnp.log(total), out_jdt) + kept.astype(opmath(out_jdt))).astype(out_jdt)

    return run


@register_functional(aten.amax.default)
def amax(self, dim=(), keepdim=False):
    _check_nonempty(self, dim, "amax")
    if self.dtype.is_complex and self.numel():  # CPU's kernel runs (and refuses complex) only on elements
        raise NotImplementedError(f"\"max_values_cpu\" not implemented for '{dtypes.scalar_name(self.dtype)}'")
    return _reduce(jnp.max, self, dim, keepdim, self.dtype, self.dtype)


@register_functional(aten.amin.default)
def amin(self, dim=(), keepdim=False):
    _check_nonempty(self, dim, "amin")
    if self.dtype.is_complex and self.numel():  # CPU's kernel runs (and refuses complex) only on elements
        raise NotImplementedError(f"\"min_values_cpu\" not implemented for '{dtypes.scalar_name(self.dtype)}'")
    return _reduce(jnp.min, self, dim, keepdim, self.dtype, self.dtype)


def _no_complex(name: str, dtype: torch.dtype, kernel: str | None = None) -> None:
    """CPU's max, min, argmax and argmin refuse complex (and argmax/argmin bool) inputs: in their own
    words, or as their kernel's missing dtype case (`kernel`). jnp ordered complex by real part, or
    raised its own TypeError."""
    if dtype.is_complex:
        if kernel is not None:
            raise NotImplementedError(f"\"{kernel}\" not implemented for '{dtypes.scalar_name(dtype)}'")
        raise RuntimeError(f"{name}(): does not support complex input")
    if dtype == torch.bool and name in ("argmax", "argmin"):
        raise RuntimeError(f"{name}(): does not support bool input")


@register_functional(aten.max.default, out=False)
def max_all(self):
    _check_nonempty(self, None, "max")
    _no_complex("max", self.dtype, "max_all")
    return _reduce(jnp.max, self, None, False, self.dtype, self.dtype)


@register_functional(aten.min.default, out=False)
def min_all(self):
    _check_nonempty(self, None, "min")
    _no_complex("min", self.dtype, "min_all")
    return _reduce(jnp.min, self, None, False, self.dtype, self.dtype)


def _with_index(pick, arg):
    def fn(x, axis, keepdims):
        (a,) = axis or (0,)
        if x.ndim == 0:
            return x, jnp.zeros((), jnp.int64)
        idx = arg(x, axis=a, keepdims=keepdims)
        vals = jnp.take_along_axis(x, idx if keepdims else jnp.expand_dims(idx, a), axis=a)
        return (vals if keepdims else jnp.squeeze(vals, a)), idx.astype(jnp.int64)

    return fn


@jitted
def _indexed(fn, axis, keepdims):
    return lambda x: fn(x, axis, keepdims)


_max_with_index = _with_index(jnp.max, jnp.argmax)
_min_with_index = _with_index(jnp.min, jnp.argmin)


@register_functional(aten.max.dim)
def max_dim(self, dim, keepdim=False):
    _check_nonempty(self, dim, "max")
    _no_complex("max", self.dtype)
    return _indexed(_max_with_index, axes(dim, self.dim()), bool(keepdim))(J(self))


@register_functional(aten.min.dim)
def min_dim(self, dim, keepdim=False):
    _check_nonempty(self, dim, "min")
    _no_complex("min", self.dtype)
    return _indexed(_min_with_index, axes(dim, self.dim()), bool(keepdim))(J(self))


def _arg(fn, self, dim, keepdim, name):
    _no_complex(name, self.dtype)
    if dim is None:
        if self.numel() == 0:
            raise IndexError(f"{name}(): Expected reduction dim to be specified for input.numel() == 0.")
        flat = jnp.ravel(J(self))
        r = fn(flat).astype(jnp.int64)
        return r.reshape((1,) * self.dim()) if keepdim else r
    _check_nonempty(self, dim, name)
    a = wrap_dim(dim, self.dim())
    x = J(self)
    if x.ndim == 0:
        return jnp.zeros((), jnp.int64)
    return fn(x, axis=a, keepdims=bool(keepdim)).astype(jnp.int64)


@register_functional(aten.argmax.default)
def argmax(self, dim=None, keepdim=False):
    return _arg(jnp.argmax, self, dim, keepdim, "argmax")


@register_functional(aten.argmin.default)
def argmin(self, dim=None, keepdim=False):
    return _arg(jnp.argmin, self, dim, keepdim, "argmin")


def _logical(fn):
    def nonzero_then(x, axis, keepdims):
        return fn(x != 0, axis=axis, keepdims=keepdims)

    def kernel(self, dim=None, keepdim=False):
        result = torch.uint8 if self.dtype == torch.uint8 else torch.bool
        if isinstance(dim, (list, tuple)) and len(dim) == 0:  # any/all.dims over no dims reduce nothing
            return (J(self) != 0).astype(dtypes.to_jax_dtype(result))
        return _reduce(nonzero_then, self, dim, keepdim, result, self.dtype)

    return kernel


_all = _logical(jnp.all)
_any = _logical(jnp.any)
register_functional(aten.all.default, aten.all.dim, aten.all.dims)(_all)
register_functional(aten.any.default, aten.any.dim, aten.any.dims)(_any)


def _moments(self, dim, correction, keepdim):
    result = self.dtype if (self.dtype.is_floating_point or self.dtype.is_complex) else None
    if result is None:
        raise RuntimeError("std and var only support floating point and complex dtypes")
    ddof = 1 if correction is None else correction
    ax = axes(dim, self.dim())
    return _variance_and_mean(ax, ddof, bool(keepdim), dtypes.to_jax_dtype(result))(J(self))


@jitted
def _variance_and_mean(ax, ddof, keepdim, jdt):
    """(variance, mean) in one program, computed in opmath: the variance divides by max(0, N - ddof), as
    CPU does (a correction past the count divides by 0: inf, not jnp.var's nan)."""
    real = jnp.finfo(jdt).dtype if jnp.issubdtype(jdt, jnp.complexfloating) else jdt

    def run(x):
        x = x.astype(opmath(jdt))
        mean = jnp.mean(x, axis=ax, keepdims=True)
        centered = x - mean
        squares = jnp.real(centered) ** 2 + jnp.imag(centered) ** 2 if jnp.iscomplexobj(x) else centered**2
        total = jnp.sum(squares, axis=ax, keepdims=keepdim)
        count = math.prod(x.shape[a] for a in ax)
        var = total / max(0, count - ddof)
        mean = mean if keepdim else jnp.squeeze(mean, ax)
        return var.astype(real), mean.astype(jdt)

    return run


@register_functional(aten.var.correction)
def var(self, dim=None, *, correction=None, keepdim=False):
    return _moments(self, dim, correction, keepdim)[0]


@register_functional(aten.std.correction)
def std(self, dim=None, *, correction=None, keepdim=False):
    v = _moments(self, dim, correction, keepdim)[0]
    return jnp.sqrt(v.astype(opmath(v.dtype))).astype(v.dtype)


@register_functional(aten.var_mean.correction)
def var_mean(self, dim=None, *, correction=None, keepdim=False):
    return _moments(self, dim, correction, keepdim)


@register_functional(aten.std_mean.correction)
def std_mean(self, dim=None, *, correction=None, keepdim=False):
    v, m = _moments(self, dim, correction, keepdim)
    return jnp.sqrt(v.astype(opmath(v.dtype))).astype(v.dtype), m


def _check_norm_dtype(self, dtype):
    if dtype.is_complex and not self.dtype.is_complex:
        raise RuntimeError(
            f"linalg.vector_norm: dtype should be real for real inputs, but got {dtypes.scalar_name(dtype)}"
        )
    if self.dtype.is_complex and not dtype.is_complex:
        raise RuntimeError(
            f"linalg.vector_norm: dtype should be complex for complex inputs, but got {dtypes.scalar_name(dtype)}"
        )
    if torch.promote_types(self.dtype, dtype) != dtype:
        raise RuntimeError(
            f"linalg.vector_norm: the dtype of the input ({dtypes.scalar_name(self.dtype)}) should be convertible "
            f"without narrowing to the specified dtype ({dtypes.scalar_name(dtype)})"
        )


@register_functional(aten.linalg_vector_norm.default)
def vector_norm(self, ord=2, dim=None, keepdim=False, *, dtype=None):
    if not (self.dtype.is_floating_point or self.dtype.is_complex):
        raise RuntimeError(
            f"linalg.vector_norm: Expected a floating point or complex tensor as input. Got {dtypes.scalar_name(self.dtype)}"
        )
    ax = axes(dim, self.dim())
    _check_norm_identity(self, ord, dim)
    if dtype is not None:
        _check_norm_dtype(self, dtype)
    src = dtype or self.dtype
    return _vector_norm(ord, ax, bool(keepdim), src)(J(self))


@jitted
def _vector_norm(ord, ax, keepdim, src):
    """vector_norm_value as one program (eagerly its abs, power, sum and root were ~50 us)."""
    return lambda values: vector_norm_value(values, ord, ax, keepdim, src)


def _check_norm_identity(self, ord, dim) -> None:
    """CPU's error for the inf norm or a negative one (a min or max, or a sum of infinities) over no
    elements, which has no identity: jnp raised its own ValueError. The dim is named as given (and the
    missing space after it is CPU's)."""
    if self.numel() != 0 or not (ord < 0 or ord == float("inf")):
        return
    dims = [dim] if isinstance(dim, int) else list(dim or ())
    if not dims:
        raise RuntimeError(
            f"linalg.vector_norm cannot compute the {ord:g} norm on an empty tensor because the operation "
            "does not have an identity"
        )
    for d in dims:
        if self.dim() > 0 and self.shape[d] == 0:
            raise RuntimeError(
                f"linalg.vector_norm cannot compute the {ord:g} norm on the dimension {d}because this dimension "
                "is empty and the operation does not have an identity"
            )


def vector_norm_value(values, ord, ax: tuple, keepdim: bool, src: torch.dtype) -> jax.Array:
    """linalg.vector_norm's value on arrays (traceable; jaxdev/ops/foreach.py's _foreach_norm runs it
    too): `values` computed in `src`'s opmath dtype, the result in `src`'s real dtype."""
    x = jnp.abs(values.astype(opmath(dtypes.to_jax_dtype(src))))
    if ord == float("inf"):
        r = jnp.max(x, axis=ax, keepdims=keepdim)
    elif ord == float("-inf"):
        r = jnp.min(x, axis=ax, keepdims=keepdim)
    elif ord == 0:
        r = jnp.sum((x != 0).astype(x.dtype), axis=ax, keepdims=keepdim)
    else:
        r = jnp.sum(x**ord, axis=ax, keepdims=keepdim) ** (1.0 / ord)
    return r.astype(dtypes.to_jax_dtype(src.to_real()))


def _nansum(x, axis, keepdims):
    return jnp.nansum(x, axis=axis, keepdims=keepdims)


@register_functional(aten.nansum.default)
def nansum(self, dim=None, keepdim=False, *, dtype=None):
    return _reduce(_nansum, self, dim, keepdim, accumulate_dtype(self.dtype, dtype))


def _count(x, axis, keepdims):
    return jnp.sum(x != 0, axis=axis, keepdims=keepdims)


@register_functional(aten.count_nonzero.dim_IntList)
def count_nonzero(self, dim):
    return _reduce(_count, self, dim, False, torch.int64, self.dtype)


@register_functional(aten.count_nonzero.default)
def count_nonzero_dim(self, dim=None):
    return count_nonzero(self, [] if dim is None else [dim])


@register_functional(aten.aminmax.default)
def aminmax(self, *, dim=None, keepdim=False):
    if dim is None and self.numel() == 0:
        raise RuntimeError(
            "aminmax(): cannot compute aminmax over an empty dimension as the operation has no identity."
        )
    if dim is not None and self.dim() > 0 and self.shape[wrap_dim(dim, self.dim())] == 0:
        raise IndexError(f"aminmax: Expected reduction dim {wrap_dim(dim, self.dim())} to have non-zero size.")
    if self.dtype.is_complex:  # refused by its kernel even where the result is empty
        raise NotImplementedError(f"\"aminmax_cpu\" not implemented for '{dtypes.scalar_name(self.dtype)}'")
    dims = None if dim is None else [dim]
    keep = bool(keepdim) and dim is not None
    low = _reduce(jnp.min, self, dims, keep, self.dtype, self.dtype)
    high = _reduce(jnp.max, self, dims, keep, self.dtype, self.dtype)
    if dim is None and keepdim:  # the whole tensor, kept as all-ones dims
        low, high = low.reshape((1,) * self.dim()), high.reshape((1,) * self.dim())
    return low, high


def _trace(x, axis, keepdims):
    return jnp.trace(x)


@register_functional(aten.trace.default)
def trace(self):
    if self.dim() != 2:
        raise RuntimeError(f"trace: expected a matrix, but got tensor with dim {self.dim()}")
    if self.dtype == torch.bool:
        raise NotImplementedError("\"trace\" not implemented for 'Bool'")
    return _reduce(_trace, self, None, False, accumulate_dtype(self.dtype, None))


# --- torch.norm's aten overloads, renorm, equal ---------------------------------------------------------


def _norm(self, p, dim, keepdim, dtype):
    if not (self.dtype.is_floating_point or self.dtype.is_complex):
        raise RuntimeError(
            f"norm(): input dtype should be either floating point or complex. Got {dtypes.scalar_name(self.dtype)} instead."
        )
    if dtype is not None:
        if not (dtype.is_floating_point or dtype.is_complex):
            raise RuntimeError(
                "norm(): the desired output dtype should be either floating point or complex. "
                f"Got {dtypes.scalar_name(dtype)} instead."
            )
        _check_norm_dtype(self, dtype)
        if dtype.is_complex:  # CPU's norm writes a real result into a complex-typed out and refuses it
            real = {torch.complex64: "float", torch.complex128: "double"}.get(dtype, str(dtype.to_real()))
            raise RuntimeError(f"Expected out tensor to have dtype {real}, but got c10::complex<{real}> instead")
    return vector_norm(self, 2 if p is None else p, dim, keepdim, dtype=dtype)


@register_functional(aten.norm.ScalarOpt_dim)
def norm_dim(self, p, dim, keepdim=False):
    return _norm(self, p, dim, keepdim, None)


@register_functional(aten.norm.ScalarOpt_dim_dtype)
def norm_dim_dtype(self, p, dim, keepdim, *, dtype):
    return _norm(self, p, dim, keepdim, dtype)


@register_functional(aten.norm.Scalar)
def norm_all(self, p=2):
    return _norm(self, p, None, False, None)


@register_functional(aten.norm.ScalarOpt_dtype)
def norm_all_dtype(self, p, *, dtype):
    return _norm(self, p, None, False, dtype)


def _renorm_factor(norm, maxnorm):
    """CPU's scale: maxnorm / (norm + 1e-7) where the norm exceeds maxnorm, else 1."""
    return jnp.where(norm > maxnorm, maxnorm / (norm + jnp.asarray(1e-7, norm.dtype)), jnp.ones((), norm.dtype))


@register_functional(aten.renorm.default)
def renorm(self, p, dim, maxnorm):
    if self.dim() <= 1:
        raise RuntimeError(f"renorm: input needs at least 2 dimensions, got {self.dim()} dimensions")
    if p <= 0:
        raise RuntimeError("renorm: non-positive-norm not supported")
    if maxnorm < 0:
        raise RuntimeError(f"renorm: expected maxnorm to be >= 0 but got {maxnorm:g}")
    d = wrap_dim(dim, self.dim())
    others = [i for i in range(self.dim()) if i != d]
    acc = torch.float32 if self.dtype in (torch.float16, torch.bfloat16) else None
    norm = vector_norm(self, p, others, True, dtype=acc)
    # the factor is held in the input's dtype (complex inputs: a complex factor), then multiplies
    factor = _renorm_factor(norm, jnp.asarray(maxnorm, norm.dtype)).astype(dtypes.to_jax_dtype(self.dtype))
    return J(self) * factor


@register(aten.equal.default)
def equal(self, other):
    if self.shape != other.shape:
        return False
    common = dtypes.to_jax_dtype(torch.promote_types(self.dtype, other.dtype))
    return bool(jnp.array_equal(J(self).astype(common), J(other).astype(common)))


def _xor_all(x, axis, keepdims):
    r = jax.lax.reduce(x, jnp.uint64(0), jax.lax.bitwise_xor, axis)
    return jnp.expand_dims(r, axis) if keepdims else r


@register_functional(aten.hash_tensor.default)
def hash_tensor(self, dim=(), *, keepdim=False, mode=0):
    """mode 0: the elements widened to 64-bit float or integer, their bits xor-reduced as uint64."""
    if mode != 0:
        raise RuntimeError(f"Unknown hash_tensor mode: {mode}")
    if self.dtype.is_complex or self.dtype in (torch.uint16, torch.uint32, torch.uint64):
        raise NotImplementedError(f"\"xor_sum_cpu\" not implemented for '{dtypes.scalar_name(self.dtype)}'")
    ax = axes(dim if dim else None, self.dim())
    for a in ax:
        if self.shape[a] == 0:
            raise IndexError(f"hash_tensor: Expected reduction dim {a} to have non-zero size.")
    x = J(self)
    wide = x.astype(jnp.float64) if jnp.issubdtype(x.dtype, jnp.floating) else x.astype(jnp.int64)
    return _xor_all(jax.lax.bitcast_convert_type(wide, jnp.uint64), ax, bool(keepdim))
