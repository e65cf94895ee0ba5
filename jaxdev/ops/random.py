"""Random ops and dropout, drawing keys from the jax device's RNG state (seeded by torch.manual_seed).

Reduced-precision floats are drawn in float32 and rounded, so every dtype sees the same stream.
"""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
import torch

from jaxdev import dtypes, rng, tensor, tracing
from jaxdev.ops import registry
from jaxdev.ops.registry import aten, register, register_functional, store_into
from jaxdev.ops.toolkit import J, float_of, opmath


def _floating(self, name):
    if not (self.dtype.is_floating_point or self.dtype.is_complex):
        raise RuntimeError(
            f"{name} expects a floating point dtype, got {self.dtype}"
            if name != "normal_"
            else f"normal expects floating-point outputs but got dtype={self.dtype}"
        )
    jdt = dtypes.to_jax_dtype(self.dtype)
    return jdt, opmath(jdt)


# Compile storms: XLA takes ~0.1-1 s to compile a threefry draw, once per shape. Eager code that draws
# on many shapes (PyTorch's test_atleast: randn/randint on random shapes, 12 dtypes) spent its time
# there. So values are drawn flat, for a size rounded up to a bucket (a power of two; above 64 Ki
# elements, a multiple of an eighth of one), and a cheap per-shape program takes the first `numel`
# and shapes them. With JAX's partitionable threefry the i-th value of a draw depends on i only, so
# the values are those of a draw of the tensor's own shape (to an ulp of the scaling; tests/test_hostile.py).
def _bucket(n: int) -> int:
    if n <= 16:
        return 16
    top = 1 << (n - 1).bit_length()
    if n <= 1 << 16:
        return top
    step = top >> 3
    return -(-n // step) * step


@functools.lru_cache(maxsize=256)
def _flat_normal(size, real):
    return jax.jit(lambda key, mean, scale: jax.random.normal(key, (size,), real) * scale + mean)


@functools.lru_cache(maxsize=256)
def _flat_uniform(size, real):
    return jax.jit(lambda key, low, high: jax.random.uniform(key, (size,), real, low, high))


@functools.lru_cache(maxsize=256)
def _flat_integers(size, low, high):
    return jax.jit(lambda key: jax.random.randint(key, (size,), low, high, jnp.int64))


@functools.lru_cache(maxsize=4096)
def _shaped(shape, jdt, is_complex):
    """The first values of a flat draw as a tensor of `shape` (pairs of parts for a complex one)."""
    n = math.prod(shape)

    def take(flat):
        if is_complex:  # the pairs of a (*shape, 2) draw: CPU fills both parts alike
            return jax.lax.complex(flat[0 : 2 * n : 2], flat[1 : 2 * n : 2]).reshape(shape).astype(jdt)
        return flat[:n].reshape(shape).astype(jdt)

    return jax.jit(take)


def _draws(self) -> int:
    return self.numel() * (2 if self.dtype.is_complex else 1)


@register(aten.uniform_.default)
def uniform_(self, from_=0.0, to=1.0, *, generator=None):
    jdt, c = _floating(self, "uniform_")
    if from_ > to:
        raise RuntimeError(f"uniform_ expects to return a [from, to) range, but found from={from_} > to={to}")
    flat = _flat_uniform(_bucket(_draws(self)), jnp.finfo(c).dtype)(rng.next_key(generator), float(from_), float(to))
    tensor.write(self, _shaped(tuple(self.shape), jdt, self.dtype.is_complex)(flat))
    return self


@register(aten.normal_.default)
def normal_(self, mean=0.0, std=1.0, *, generator=None):
    jdt, c = _floating(self, "normal_")
    if std < 0:
        raise RuntimeError(f"normal expects std >= 0.0, but found std {std}")
    # complex: each part normal(mean, std / sqrt(2)), as CPU, so |z - mean| has std `std`
    scale = std / 2**0.5 if self.dtype.is_complex else std
    flat = _flat_normal(_bucket(_draws(self)), jnp.finfo(c).dtype)(rng.next_key(generator), float(mean), float(scale))
    tensor.write(self, _shaped(tuple(self.shape), jdt, self.dtype.is_complex)(flat))
    return self


def _integers(self, low, high, generator=None):
    jdt = dtypes.to_jax_dtype(self.dtype)
    flat = _flat_integers(_bucket(self.numel()), low, high)(rng.next_key(generator))
    tensor.write(self, _shaped(tuple(self.shape), jdt, False)(flat))
    return self


# Significand bits (std::numeric_limits<T>::digits): random_ on a float draws integers up to 2**digits,
# the largest range the dtype holds exactly.
_DIGITS = {torch.float16: 11, torch.bfloat16: 8, torch.float32: 24, torch.float64: 53}


@register(getattr(aten.random_, "from"))
def random_from(self, from_, to=None, *, generator=None):
    if to is None:
        to = (
            2**63 - 1
            if self.dtype == torch.int64
            else (1 << _DIGITS[self.dtype]) + 1
            if self.dtype.is_floating_point
            else int(torch.iinfo(self.dtype).max) + 1
        )
    if from_ >= to:
        raise RuntimeError(f"random_ expects 'from' to be less than 'to', but got from={from_} >= to={to}")
    return _integers(self, from_, to, generator)


@register(aten.random_.to)
def random_to(self, to, *, generator=None):
    return random_from(self, 0, to, generator=generator)


@register(aten.random_.default)
def random_default(self, *, generator=None):
    if self.dtype == torch.bool:
        return _integers(self, 0, 2, generator)
    if self.dtype.is_floating_point:
        return _integers(self, 0, (1 << _DIGITS[self.dtype]) + 1, generator)
    top = int(torch.iinfo(self.dtype).max) + 1 if self.dtype != torch.int64 else 2**63 - 1
    return _integers(self, 0, top, generator)


def _bernoulli(shape, p, jdt, generator=None):
    return jax.random.bernoulli(rng.next_key(generator), p, shape).astype(jdt)


@register(aten.bernoulli_.float)
def bernoulli_float_(self, p=0.5, *, generator=None):
    if not 0 <= p <= 1:
        raise RuntimeError(f"bernoulli_ expects p to be in [0, 1], but got p={p}")
    tensor.write(self, _bernoulli(tuple(self.shape), p, dtypes.to_jax_dtype(self.dtype), generator))
    return self


@register(aten.bernoulli_.Tensor)
def bernoulli_tensor_(self, p, *, generator=None):
    probs = jnp.broadcast_to(J(p).astype(jnp.float64), tuple(self.shape))
    tensor.write(self, _bernoulli(tuple(self.shape), probs, dtypes.to_jax_dtype(self.dtype), generator))
    return self


@register(aten.bernoulli.default)
def bernoulli(self, *, generator=None):
    probs = J(self)
    if not (self.dtype.is_floating_point):
        raise RuntimeError(f"bernoulli expects a floating point input, got {self.dtype}")
    return tensor.wrap(_bernoulli(probs.shape, probs.astype(jnp.float64), probs.dtype, generator))


# --- the other distributions of Tensor's in-place samplers ----------------------------------------


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
    tensor.write(self, values.astype(jdt))
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
    return _fill(self, jnp.exp(v), jdt)


@register(aten.geometric_.default)
def geometric_(self, p, *, generator=None):
    if not 0 < p < 1:
        raise RuntimeError(f"geometric_ expects p to be in (0, 1), but got p={p:g}")
    if self.dtype in (torch.bool, torch.complex64, torch.complex128):
        raise NotImplementedError(f"\"geometric_cpu\" not implemented for '{dtypes.scalar_name(self.dtype)}'")
    jdt = dtypes.to_jax_dtype(self.dtype)
    # the number of Bernoulli(p) trials up to the first success: ceil(log(u) / log(1 - p)), u in (0, 1]
    u = 1.0 - jax.random.uniform(rng.next_key(generator), tuple(self.shape), jnp.float64)
    return _fill(self, jnp.ceil(jnp.log(u) / jnp.log1p(-p)), jdt)


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


@register(aten.randperm.generator_out)
def randperm_out(n, *, generator=None, out):
    if n < 0:
        raise RuntimeError(f"n must be non-negative, got{n}")
    v = jax.random.permutation(rng.next_key(generator), n).astype(dtypes.to_jax_dtype(out.dtype))
    return store_into(out, v, resize=True)


@register_functional(aten.multinomial.default)
def multinomial(self, num_samples, replacement=False, *, generator=None):
    if self.dim() not in (1, 2):
        raise RuntimeError("prob_dist must be 1 or 2 dim")
    p = J(self).astype(jnp.float64)
    n = self.shape[-1]
    if not replacement and num_samples > n:
        raise RuntimeError("cannot sample n_sample > prob_dist.size(-1) samples without replacement")
    tracing.check_values(
        (p < 0) | ~jnp.isfinite(p),
        lambda: RuntimeError("probability tensor contains either `inf`, `nan` or element < 0"),
    )
    tracing.check_values(
        jnp.sum(p, axis=-1) <= 0, lambda: RuntimeError("invalid multinomial distribution (sum of probabilities <= 0)")
    )
    batch = p if p.ndim == 2 else p[None]
    logits = jnp.log(batch)
    key = rng.next_key(generator)
    if replacement:
        out = jax.random.categorical(key, logits, axis=-1, shape=(num_samples, batch.shape[0])).T
    else:
        # Gumbel top-k: sampling without replacement in proportion to the weights.
        g = jax.random.gumbel(key, batch.shape, jnp.float64)
        out = jnp.argsort(-(logits + g), axis=-1)[:, :num_samples]
    out = out.astype(jnp.int64)
    return out if p.ndim == 2 else out[0]


@register_functional(aten.native_dropout.default)
def native_dropout(input, p, train):
    x = J(input)
    if not train or p == 0:
        return x, jnp.ones(x.shape, jnp.bool_)
    if p == 1:
        return jnp.zeros_like(x), jnp.zeros(x.shape, jnp.bool_)
    return _dropout(x, rng.next_key(), 1.0 - p)


@jax.jit
def _dropout(x, key, keep):
    """One program: the kept mask (a uniform draw below `keep`) and the kept values scaled by 1/keep in
    x's compute dtype (`keep` an argument as eagerly, not a constant XLA might fold differently)."""
    mask = jax.random.bernoulli(key, keep, x.shape)
    c = opmath(x.dtype)
    return (x.astype(c) * mask / keep).astype(x.dtype), mask


@register_functional(aten.native_dropout_backward.default)
def native_dropout_backward(grad_output, mask, scale):
    # CPU: grad_output * mask * scale, so integer and bool gradients give the default float dtype
    jdt = dtypes.to_jax_dtype(float_of(grad_output.dtype))
    c = opmath(jdt)
    return ((J(grad_output) * J(mask)).astype(c) * jnp.asarray(scale, c)).astype(jdt)
