"""Random ops and dropout, drawing keys from the jax device's RNG state (seeded by torch.manual_seed).

Reduced-precision floats are drawn in float32 and rounded, so every dtype sees the same stream.
"""

from __future__ import annotations

import math
import warnings

import jax
import jax.numpy as jnp
import torch

from jaxdev import dtypes, rng, tensor, tracing
from jaxdev.ops.kit import J, chunked_draws, float_of, jitted, opmath
from jaxdev.ops.kit import transcendentals as tm
from jaxdev.ops.registry import aten, register, register_functional, store_into


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


@jitted(maxsize=256)
def _flat_normal(size, real):
    return lambda key, mean, scale: chunked_draws.normal_body(key, size, real, mean, scale)


@jitted(maxsize=256)
def _flat_uniform(size, real):
    return lambda key, low, high: chunked_draws.uniform_body(key, size, real, low, high)


@jitted(maxsize=256)
def _flat_integers(size, low, high):
    return lambda key: jax.random.randint(key, (size,), low, high, jnp.int64)


@jitted(maxsize=4096)
def _shaped(shape, jdt, is_complex):
    """The first values of a flat draw as a tensor of `shape` (pairs of parts for a complex one)."""
    n = math.prod(shape)

    def take(flat):
        if is_complex:  # the pairs of a (*shape, 2) draw: CPU fills both parts alike
            return jax.lax.complex(flat[0 : 2 * n : 2], flat[1 : 2 * n : 2]).reshape(shape).astype(jdt)
        return flat[:n].reshape(shape).astype(jdt)

    return take


def _draws(self) -> int:
    return self.numel() * (2 if self.dtype.is_complex else 1)


def _bounds_name(dtype) -> str:
    """The C++ type name CPU's random samplers print for a dtype ("signed char", "c10::Half")."""
    return _UNSIGNED_NAMES.get(dtype) or dtypes.type_meta_name(dtype)


_UNSIGNED_NAMES = {torch.uint16: "short unsigned int", torch.uint32: "unsigned int", torch.uint64: "long unsigned int"}


def _check_uniform_bounds(dtype, from_, to):
    """CPU's uniform_impl_ before drawing (DistributionTemplates.h): its dispatch names
    "check_uniform_bounds" (so integer and bool tensors raise NotImplementedError), both ends within
    the dtype's finite range (NaN is not), from <= to, and to - from itself finite in the dtype."""
    if not dtype.is_floating_point:
        raise NotImplementedError(f"\"check_uniform_bounds\" not implemented for '{dtypes.scalar_name(dtype)}'")
    top = float(torch.finfo(dtype).max)
    for value, name in ((from_, "from"), (to, "to")):
        if not -top <= value <= top:
            raise RuntimeError(f"{name} is out of bounds for {dtypes.type_meta_name(dtype)}")
    if from_ > to:
        raise RuntimeError(f"uniform_ expects to return a [from, to) range, but found from={from_:g} > to={to:g}")
    if to - from_ > top:
        raise RuntimeError(
            f"uniform_ expects to-from <= std::numeric_limits<{dtypes.scalar_name(dtype)}>::max(), but found "
            f"to={to:g} and from={from_:g} which result in to-from to exceed the limit"
        )


@register(aten.uniform_.default)
def uniform_(self, from_=0.0, to=1.0, *, generator=None):
    # a complex tensor is checked as its real view (float/double); CPU checks empty tensors too
    real = {torch.complex64: torch.float32, torch.complex128: torch.float64}.get(self.dtype, self.dtype)
    _check_uniform_bounds(real, from_, to)
    jdt, c = dtypes.to_jax_dtype(self.dtype), opmath(dtypes.to_jax_dtype(self.dtype))
    key = rng.next_key(generator)
    if chunked_draws.fill(self, "uniform", key, float(from_), float(to)):  # a large tensor: in its own buffer
        return self
    flat = _flat_uniform(_bucket(_draws(self)), jnp.finfo(c).dtype)(key, float(from_), float(to))
    tensor.write(self, _shaped(tuple(self.shape), jdt, self.dtype.is_complex)(flat))
    return self


@register(aten.normal_.default)
def normal_(self, mean=0.0, std=1.0, *, generator=None):
    # CPU's order: std first, an empty tensor of any dtype then returns, and only then the dtype
    # ("normal_kernel_cpu" dispatches floating types only)
    if std < 0:
        raise RuntimeError(f"normal expects std >= 0.0, but found std {std:g}")
    if self.numel() == 0:
        return self
    if not (self.dtype.is_floating_point or self.dtype.is_complex):
        raise NotImplementedError(f"\"normal_kernel_cpu\" not implemented for '{dtypes.scalar_name(self.dtype)}'")
    jdt = dtypes.to_jax_dtype(self.dtype)
    c = opmath(jdt)
    # complex: each part normal(mean, std / sqrt(2)), as CPU, so |z - mean| has std `std`
    scale = std / 2**0.5 if self.dtype.is_complex else std
    key = rng.next_key(generator)
    if chunked_draws.fill(self, "normal", key, float(mean), float(scale)):  # a large tensor: in its own buffer
        return self
    flat = _flat_normal(_bucket(_draws(self)), jnp.finfo(c).dtype)(key, float(mean), float(scale))
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


def _check_from_to_in_range(dtype, from_, to_inc):
    """CPU's check_from_to_in_range: `from` and `to - 1` within the dtype's range (a float's finite
    range), and a warning where a float cannot hold every integer between them."""
    name = _bounds_name(dtype)
    if dtype.is_floating_point:
        top = float(torch.finfo(dtype).max)
        low = -top
    elif dtype == torch.uint64:  # compared as int64, as CPU does, so it cannot wrap
        low, top = 0, 2**63 - 1
    elif dtype == torch.bool:
        low, top = 0, 1
    elif not dtype.is_complex:
        low, top = int(torch.iinfo(dtype).min), int(torch.iinfo(dtype).max)
    else:
        raise RuntimeError("check_random_bounds handles only integral, floating-point and boolean types")
    for value, what in ((from_, "from"), (to_inc, "to - 1")):
        if not low <= value <= top:
            raise RuntimeError(f"{what} is out of bounds for {name}")
    if dtype.is_floating_point:
        digits = _DIGITS[dtype]
        for value, what in ((from_, "from"), (to_inc, "to - 1")):
            if not -(1 << digits) <= value <= 1 << digits:
                warnings.warn(
                    f"{what} is out of bounds [-(2^{digits}), 2^{digits}]. Due to precision limitations {name} can "
                    "support discrete uniform distribution only within this range. This warning will become an "
                    "error in version 1.7 release, please fix the code in advance",
                    UserWarning,
                    stacklevel=2,
                )


@register(getattr(aten.random_, "from"))
def random_from(self, from_, to=None, *, generator=None):
    # CPU's random_from_to_impl: the checks run on empty tensors too
    if to is None:  # [from, the dtype's largest integer]
        if self.dtype.is_complex:
            raise RuntimeError("random_from_to_impl handles only integral, floating-point and boolean types")
        to_inc = (
            1 << _DIGITS[self.dtype]
            if self.dtype.is_floating_point
            else 1
            if self.dtype == torch.bool
            else 2**63 - 1
            if self.dtype == torch.uint64
            else int(torch.iinfo(self.dtype).max)
        )
        if self.dtype.is_floating_point and from_ >= to_inc:
            raise RuntimeError(
                "random_ expects 'from' casted to dtype to be less than or equal to 'to_inc' casted to dtype, but "
                f"got from={from_} > to_inc={to_inc}"
            )
        _check_from_to_in_range(self.dtype, from_, to_inc)
        return _integers(self, from_, min(to_inc + 1, 2**63 - 1), generator)
    if from_ >= to:
        raise RuntimeError(f"random_ expects 'from' to be less than 'to', but got from={from_} >= to={to}")
    _check_from_to_in_range(self.dtype, from_, to - 1)
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
    if self.dtype.is_complex:
        raise NotImplementedError(f"\"random_kernel_cpu\" not implemented for '{dtypes.scalar_name(self.dtype)}'")
    top = int(torch.iinfo(self.dtype).max) + 1 if self.dtype != torch.int64 else 2**63 - 1
    return _integers(self, 0, top, generator)


def _bernoulli(shape, p, jdt, generator=None):
    return jax.random.bernoulli(rng.next_key(generator), p, shape).astype(jdt)


# CPU's bernoulli kernels dispatch on self (any real dtype and bool), then on p (floating only),
# after an empty self has returned; each probability is then checked as it is read (NaN fails).
_P_RANGE = (
    "Expected p_in >= 0 && p_in <= 1 to be true, but got false.  (Could this error message be improved?  "
    "If so, please report an enhancement request to PyTorch.)"
)


def _check_bernoulli_dtypes(self, p_dtype, p_kernel):
    if self.numel() == 0:
        return
    if self.dtype.is_complex:
        raise NotImplementedError(f"\"{p_kernel[0]}\" not implemented for '{dtypes.scalar_name(self.dtype)}'")
    if p_dtype is not None and not p_dtype.is_floating_point:
        raise NotImplementedError(f"\"{p_kernel[1]}\" not implemented for '{dtypes.scalar_name(p_dtype)}'")


def _probabilities(p):
    probs = J(p)
    tracing.check_values(_outside_unit()(probs), lambda: RuntimeError(_P_RANGE))
    return probs.astype(jnp.float64)


@jitted
def _outside_unit():
    """The flag "a probability lies outside [0, 1] (or is NaN)" as one program (eagerly: four ops)."""
    return lambda probs: jnp.any(~((probs >= 0) & (probs <= 1)))


@register(aten.bernoulli_.float)
def bernoulli_float_(self, p=0.5, *, generator=None):
    if not 0 <= p <= 1:
        raise RuntimeError(f"bernoulli_ expects p to be in [0, 1], but got p={p}")
    _check_bernoulli_dtypes(self, None, ("bernoulli_scalar_cpu_", None))
    tensor.write(self, _bernoulli(tuple(self.shape), p, dtypes.to_jax_dtype(self.dtype), generator))
    return self


_TENSOR_KERNELS = ("bernoulli_tensor_cpu_self_", "bernoulli_tensor_cpu_p_")


@register(aten.bernoulli_.Tensor)
def bernoulli_tensor_(self, p, *, generator=None):
    _check_bernoulli_dtypes(self, p.dtype, _TENSOR_KERNELS)
    if self.numel() == 0:
        return self
    probs = jnp.broadcast_to(_probabilities(p), tuple(self.shape))
    tensor.write(self, _bernoulli(tuple(self.shape), probs, dtypes.to_jax_dtype(self.dtype), generator))
    return self


@register(aten.bernoulli.default)
def bernoulli(self, *, generator=None):
    # CPU: empty_like(self).bernoulli_(self), so self is both the output's dtype and the probabilities
    _check_bernoulli_dtypes(self, self.dtype, _TENSOR_KERNELS)
    if self.numel() == 0:
        return tensor.wrap(J(self))
    probs = _probabilities(self)
    return tensor.wrap(_bernoulli(probs.shape, probs, dtypes.to_jax_dtype(self.dtype), generator))


# CPU's randperm_out_cpu: its check_supported_max_int_with_precision first converts n - 1 to the
# result's dtype (c10's checked conversion, which refuses what an integer dtype cannot hold), then bounds n where floats stop holding every integer,
# and its dispatch takes the real types but unsigned ones beyond uint8.
_RANDPERM_LIMITS = {
    torch.float16: (1 << 11) + 1,
    torch.float32: (1 << 24) + 1,
    torch.float64: (1 << 53) + 1,
}
_RANDPERM_LIMIT_WORDS = {torch.float16: "2049", torch.float32: "2^24+1", torch.float64: "2^53+1"}


@register(aten.randperm.generator_out)
def randperm_out(n, *, generator=None, out):
    if n < 0:
        raise RuntimeError(f"n must be non-negative, got{n}")
    if not out.dtype.is_floating_point:  # (a float conversion is not checked: 70000 is inf in half)
        dtypes.check_scalar(n - 1 if n > 0 else n, out.dtype)
    limit = _RANDPERM_LIMITS.get(out.dtype)
    if limit is not None and n > limit:
        raise RuntimeError(
            f"n cannot be greater than {_RANDPERM_LIMIT_WORDS[out.dtype]} for {dtypes.scalar_name(out.dtype)} type."
        )
    if out.dtype in (torch.bool, torch.uint16, torch.uint32, torch.uint64) or out.dtype.is_complex:
        raise NotImplementedError(f"\"randperm\" not implemented for '{dtypes.scalar_name(out.dtype)}'")
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
    logits = tm.log(batch)
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
    return _dropout()(x, rng.next_key(), 1.0 - p)


@jitted
def _dropout():
    """One program: the kept mask (a uniform draw below `keep`) and the kept values scaled by 1/keep in
    x's compute dtype (`keep` an argument as eagerly, not a constant XLA might fold differently)."""

    def run(x, key, keep):
        mask = jax.random.bernoulli(key, keep, x.shape)
        c = opmath(x.dtype)
        return (x.astype(c) * mask / keep).astype(x.dtype), mask

    return run


@register_functional(aten.native_dropout_backward.default)
def native_dropout_backward(grad_output, mask, scale):
    # CPU: grad_output * mask * scale, so integer and bool gradients give the default float dtype
    jdt = dtypes.to_jax_dtype(float_of(grad_output.dtype))
    c = opmath(jdt)
    return ((J(grad_output) * J(mask)).astype(c) * jnp.asarray(scale, c)).astype(jdt)
