"""Kernel arguments as jax values, and the dtypes kernels compute in.

`J` (a tensor argument's jax.Array), `value` (tensors or Python scalars), `any_device` (index tensors
may live on CPU, as with CUDA); `opmath` (the dtype a half-precision op computes in), `accumulate_dtype`,
`result_type`, `float_of`, and `cast` (as copy_ casts). The names PyTorch prints are jaxdev.dtypes'
(`dtypes.scalar_name`: "Float", `dtypes.name`: "float32")."""

from __future__ import annotations

import warnings

import jax
import jax.numpy as jnp
import torch

from jaxdev import dtypes, tensor, tracing
from jaxdev.dtypes import opmath  # noqa: F401  (kernels take it from here)
from jaxdev.ops.kit.jit import jitted

Tensor = torch.Tensor


def J(x) -> jax.Array:
    """The jax.Array of a tensor argument. A 0-dim CPU tensor is accepted as a scalar, as CUDA does."""
    if not x.is_cpu:
        return tensor.read(x)  # a tensor of another device fails there with a clear error
    if x.dim() == 0:
        return jnp.asarray(x.item(), dtype=dtypes.to_jax_dtype(x.dtype))
    raise tensor.mixed_devices(x.device)


def value(x):
    """Tensor -> jax array; Python scalars pass through (cast inside the jitted body)."""
    return J(x) if isinstance(x, torch.Tensor) else x


def any_device(t: torch.Tensor) -> jax.Array:
    """Index tensors may live on CPU, as with CUDA."""
    return J(t) if t.device.type == "jax" else tensor.from_cpu(t)


def accumulate_dtype(dtype: torch.dtype, requested: torch.dtype | None) -> torch.dtype:
    """What sum/prod/cumsum accumulate and return: `dtype=` if given, int64 for integers and bool."""
    if requested is not None:
        return requested
    return torch.int64 if not (dtype.is_floating_point or dtype.is_complex) else dtype


def result_type(a, b) -> torch.dtype:
    """torch.result_type(a, b); two tensors of one dtype give that dtype without the call (the common
    case of every binary op, where the call costs a quarter of a microsecond)."""
    if isinstance(a, Tensor) and isinstance(b, Tensor) and a.dtype is b.dtype:
        return a.dtype
    if tracing.is_traced(b):  # a float fused eager lifted into its program (registry.DYNAMIC_NUMBERS)
        b = 0.0  # promotes as the Python float it stands for
    return torch.result_type(a, b)


def float_of(dtype: torch.dtype) -> torch.dtype:
    """The dtype of a float-valued op's result: integers and bool give the default float dtype."""
    return dtype if (dtype.is_floating_point or dtype.is_complex) else torch.get_default_dtype()


def cast(value: jax.Array, dtype: torch.dtype) -> jax.Array:
    """`value` converted to `dtype` as `copy_` converts it (complex -> bool tests both parts, as CPU's),
    with PyTorch's warning when a complex value loses its imaginary part."""
    jdt = dtypes.to_jax_dtype(dtype)
    if value.dtype == jdt:
        return value
    if jnp.issubdtype(value.dtype, jnp.complexfloating) and not dtype.is_complex and dtype != torch.bool:
        warnings.warn("Casting complex values to real discards the imaginary part", UserWarning, stacklevel=3)
    return _converter(value.dtype, jdt)(value)


@jitted
def _converter(source, target):
    """dtypes.convert as one program (eagerly even float32 -> bfloat16 took 15-18 us: `.to(dtype)` is
    autocast's and mixed precision's most frequent op)."""
    return lambda x: dtypes.convert(x, target)
