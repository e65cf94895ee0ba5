"""Composite ops whose PyTorch kernel reads raw memory as if every tensor were on CPU.

These ops have no backend kernels: PyTorch registers them CompositeImplicitAutograd (or
CompositeExplicitAutograd) and their C++ bodies read `data_ptr()` / accessors directly. A jax
tensor's data pointer is a fake address (jaxdev/tensor.py keeps its values in a box), so on jax they
killed the interpreter (SIGSEGV, SIGBUS) on inputs CPU accepts. Each gets a PrivateUse1 kernel here
(registry.RAW_MEMORY_COMPOSITES lets the CompositeImplicitAutograd ones through, as none has a
derivative to lose):

* run on CPU copies, through the CPU fallback (counted, subject to JAXDEV_FALLBACK): integer/
  quantization helpers with no gradient and nothing to gain from a jax kernel: the Sobol engine
  steps, `_rowwise_prune`, `choose_qparams_optimized`, `fbgemm_linear_quantize_weight`;
* a jax kernel: `_saturate_weight_to_fp16` (a clamp, in place as on CPU) and `range.out_`
  (`range.out` with step 1; CPU's composite calls the CPU kernel of range.out directly);
* refused with an error: the fbgemm packing ops and the linear ops that take their result. A packed
  weight is a CPU pointer to an fbgemm object wearing a uint8 tensor's clothes; a jax tensor cannot
  hold one, and copying its bytes would hand fbgemm a dangling pointer.

`_grid_sampler_2d_cpu_fallback` (CompositeExplicitAutograd, float32 only) is grid_sampler_2d
computed another way: jaxdev/ops/grid_sample.py registers it on its grid_sample kernel.
"""

from __future__ import annotations

import jax.numpy as jnp
import torch

from jaxdev import dtypes, fallback, tensor
from jaxdev.ops.kit import J
from jaxdev.ops.registry import RAW_MEMORY_COMPOSITES, aten, register

ON_CPU = (
    aten._sobol_engine_draw.default,
    aten._sobol_engine_ff_.default,
    aten._sobol_engine_scramble_.default,
    aten._sobol_engine_initialize_state_.default,
    aten._rowwise_prune.default,
    aten.choose_qparams_optimized.default,
    aten.fbgemm_linear_quantize_weight.default,
)

REFUSED = (
    aten.fbgemm_pack_gemm_matrix_fp16.default,
    aten.fbgemm_pack_quantized_matrix.default,
    aten.fbgemm_pack_quantized_matrix.KN,
    aten.fbgemm_linear_fp16_weight.default,
    aten.fbgemm_linear_fp16_weight.out,
    aten.fbgemm_linear_fp16_weight_fp32_activation.default,
    aten.fbgemm_linear_fp16_weight_fp32_activation.out,
    aten.fbgemm_linear_int8_weight.default,
    aten.fbgemm_linear_int8_weight_fp32_activation.default,
)


def _on_cpu(op):
    def kernel(*args, **kwargs):
        return fallback.run_on_cpu(op, *args, **kwargs)

    return kernel


def _refused(op):
    name = op.name()

    def kernel(*args, **kwargs):
        raise RuntimeError(
            f"{name} uses weights packed by fbgemm, a CPU object that a jax tensor cannot hold; run it on CPU tensors"
        )

    return kernel


for _op in ON_CPU:
    register(_op)(_on_cpu(_op))
for _op in REFUSED:
    register(_op)(_refused(_op))


# A CompositeImplicitAutograd op given a PrivateUse1 kernel has no autograd kernel: PyTorch's autograd
# fallback would hang a not-implemented grad_fn on its outputs. On CPU they are built from raw memory and
# never require grad, so these ops run below autograd here (the in-place _saturate_weight_to_fp16 returns
# its input itself, which keeps its own requires_grad).
_AUTOGRAD = torch.library.Library("aten", "IMPL")


def _below_autograd(op):
    def kernel(*args, **kwargs):
        with torch._C._AutoDispatchBelowAutograd():
            return op(*args, **kwargs)

    return kernel


for _name in sorted(RAW_MEMORY_COMPOSITES):
    _packet, _, _overload = _name.removeprefix("aten::").partition(".")
    _op = getattr(getattr(aten, _packet), _overload or "default")
    _AUTOGRAD.impl(_op, _below_autograd(_op), "AutogradPrivateUse1")


_FP16_MAX = 65504.0


@register(aten._saturate_weight_to_fp16.default)
def saturate_weight_to_fp16(weight):
    """CPU's kernel: saturates the first size(0) * size(1) elements of `weight.contiguous()` to
    +-65504 in place and returns `weight` itself, so a contiguous weight changes and a strided one does
    not (the saturated copy is dropped). Float32 only. (CPU's "FOUND weight out of range" is a C++ warning
    printed to stderr, not a Python warning: not reproduced.)"""
    if weight.dtype != torch.float32:
        raise RuntimeError(f"expected scalar type Float but found {dtypes.scalar_name(weight.dtype)}")
    n = weight.size(0) * weight.size(1)  # torch's IndexError for a 0-d or 1-d weight, as on CPU
    if not weight.is_contiguous() or n == 0:
        return weight
    flat = J(weight).reshape(-1)
    saturated = jnp.clip(flat[:n], -_FP16_MAX, _FP16_MAX)  # NaN stays NaN, as CPU's comparisons leave it
    tensor.write(weight, jnp.concatenate([saturated, flat[n:]]).reshape(weight.shape))
    return weight


@register(aten.range.out_)
def range_out_(start, end, *, out):
    return aten.range.out(start, end, 1, out=out)
