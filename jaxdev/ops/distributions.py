"""The samplers beside uniform_ and normal_: Tensor's other in-place distributions (exponential_,
cauchy_, log_normal_, geometric_) and normal with tensor parameters, drawing keys from the jax device's
RNG state as random.py's ops do (split out of random.py, whose fills and integer draws stay there)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import torch

from jaxdev import dtypes, rng, tensor, tracing
from jaxdev.ops import registry
from jaxdev.ops.kit import J, opmath
from jaxdev.ops.kit import transcendentals as tm
from jaxdev.ops.kit.cpu_numerics import narrowed, round_to
from jaxdev.ops.registry import aten, register, register_functional, store_into


def _continuous(self, distribution, cpp_name):
    if not self.dtype.is_floating_point:
        name = dtypes.type_meta_name(self.dtype) if cpp_name else dtypes.scalar_name(self.dtype)
        raise RuntimeError(
            f"{distribution} distribution is a continuous probability distribution. dtype must be a floating point "
            f"but you specified {name}"
        )
    jdt = dtypes.to_jax_dtype(self.dtype)
    return jdt, opmath(jdt)


def _fill(self, values, jdt):
    tensor.write(self, narrowed(values, jdt))  # a double draw to a half through float, as c10 converts
    return self


@register(aten.exponential_.default)
def exponential_(self, lambd=1.0, *, generator=None):
    if not lambd > 0:
        raise RuntimeError(f"exponential_ expects lambda > 0.0, but found lambda={lambd:g}")
    jdt, c = _continuous(self, "Exponential", cpp_name=False)
    return _fill(self, jax.random.exponential(rng.next_key(generator), tuple(self.shape), c) / lambd, jdt)


@register(aten.cauchy_.default)
def cauchy_(self, median=0.0, sigma=1.0, *, generator=None):
    if not sigma > 0:
        raise RuntimeError(f"cauchy_ expects sigma > 0.0, but found sigma={sigma:g}")
    jdt, c = _continuous(self, "Cauchy", cpp_name=True)
    return _fill(self, jax.random.cauchy(rng.next_key(generator), tuple(self.shape), c) * sigma + median, jdt)


@register(aten.log_normal_.default)
def log_normal_(self, mean=1.0, std=2.0, *, generator=None):
    if not std > 0:
        raise RuntimeError(f"log_normal_ expects std > 0.0, but found std={std:g}")
    if not self.dtype.is_floating_point:
        raise NotImplementedError(f"\"log_normal_cpu\" not implemented for '{dtypes.scalar_name(self.dtype)}'")
    jdt = dtypes.to_jax_dtype(self.dtype)
    v = jax.random.normal(rng.next_key(generator), tuple(self.shape), opmath(jdt)) * std + mean
    return _fill(self, tm.exp(v), jdt)


@register(aten.geometric_.default)
def geometric_(self, p, *, generator=None):
    if not 0 < p < 1:
        raise RuntimeError(f"geometric_ expects p to be in (0, 1), but got p={p:g}")
    if self.dtype in (torch.bool, torch.complex64, torch.complex128):
        raise NotImplementedError(f"\"geometric_cpu\" not implemented for '{dtypes.scalar_name(self.dtype)}'")
    jdt = dtypes.to_jax_dtype(self.dtype)
    # the number of Bernoulli(p) trials up to the first success: ceil(log(u) / log(1 - p)), u in (0, 1]
    u = 1.0 - jax.random.uniform(rng.next_key(generator), tuple(self.shape), jnp.float64)
    return _fill(self, jnp.ceil(tm.log(u) / tm.log1p(-p)), jdt)


def _broadcast_sizes(a, b):
    """The broadcast of two shapes, with TensorIterator's error for sizes that do not broadcast."""
    n = max(len(a), len(b))
    a, b = (1,) * (n - len(a)) + tuple(a), (1,) * (n - len(b)) + tuple(b)
    for d in reversed(range(n)):  # infer_size reports the last dim that does not broadcast
        x, y = a[d], b[d]
        if x != y and 1 not in (x, y):
            raise RuntimeError(
                f"The size of tensor a ({x}) must match the size of tensor b ({y}) at non-singleton dimension {d}"
            )
    return tuple(max(x, y) if 0 not in (x, y) else 0 for x, y in zip(a, b))


def _normal(mean, std, shape, dtype, generator):
    """CPU's normal with tensor parameters: standard normal draws in the output dtype, times std, plus mean."""
    if not (dtype.is_floating_point or dtype.is_complex):
        raise NotImplementedError(f"\"normal_kernel_cpu\" not implemented for '{dtypes.scalar_name(dtype)}'")
    jdt = dtypes.to_jax_dtype(dtype)
    if dtype.is_complex:  # normal_'s complex draw: each part N(0, 1/2)
        real = jax.random.normal(rng.next_key(generator), (*shape, 2), jnp.finfo(jdt).dtype) / 2**0.5
        z = jax.lax.complex(real[..., 0], real[..., 1])
    else:
        z = jax.random.normal(rng.next_key(generator), shape, opmath(jdt)).astype(jdt)
    if jdt in (jnp.float16, jnp.bfloat16):
        # each half operation rounded, stated in float32 (float16 arithmetic's code depends on the CPU,
        # and a traced z * std + mean is one FMA on a CPU with native float16); a double std or mean
        # becomes a half through float, as c10 converts it
        r = round_to(jdt)
        s, m = (narrowed(jnp.asarray(v), jdt).astype(jnp.float32) for v in (std, mean))
        return r(r(z.astype(jnp.float32) * s) + m).astype(jdt)
    return (z * jnp.asarray(std).astype(jdt) + jnp.asarray(mean).astype(jdt)).astype(jdt)


def _check_std(std):
    if std.dtype.is_complex:
        raise RuntimeError("normal expects standard deviation to be non-complex")
    s = J(std)
    tracing.check_values(s < 0, lambda: RuntimeError("normal expects all elements of std >= 0.0"))
    return s


@register_functional(aten.normal.Tensor_Tensor)
def normal_tensor_tensor(mean, std, *, generator=None):
    shape = _broadcast_sizes(mean.shape, std.shape)
    return _normal(J(mean), _check_std(std), shape, mean.dtype, generator)


@register_functional(aten.normal.Tensor_float, out=False)
def normal_tensor_float(mean, std=1.0, *, generator=None):
    if std < 0:
        raise RuntimeError(f"normal expects std >= 0.0, but found std {std:g}")
    return _normal(J(mean), std, tuple(mean.shape), mean.dtype, generator)


@register(aten.normal.Tensor_float_out)
def normal_tensor_float_out(mean, std=1.0, *, generator=None, out):
    """CPU's normal_out_impl: out's own shape broadcasts with mean's (an out of [3] with a 0-dim mean
    draws 3 values; an empty one, none), out is drawn in its dtype, then mean is added in place."""
    if std < 0:
        raise RuntimeError(f"normal expects std >= 0.0, but found std {std:g}")
    tensor.check_no_partial_overlap(out, (mean,))
    shape = _broadcast_sizes(mean.shape, out.shape)
    if tuple(out.shape) != shape:
        store_into(out, jnp.zeros(shape, dtypes.to_jax_dtype(out.dtype)), resize=True)
    value = _normal(J(mean), std, shape, out.dtype, generator)
    registry.check_cast(torch.result_type(out, mean), out.dtype)
    return store_into(out, value, resize=False)


@register_functional(aten.normal.float_Tensor)
def normal_float_tensor(mean, std, *, generator=None):
    return _normal(mean, _check_std(std), tuple(std.shape), std.dtype, generator)
