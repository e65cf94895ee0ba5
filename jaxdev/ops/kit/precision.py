"""Products at the device's precision: `product_precision`, `widened_product_precision`, `matmul`, and
`body_at_precision` (a kernel's product body for a dtype at the precision in force)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import torch

_FLOAT32_PRECISION = {
    "highest": jax.lax.Precision.HIGHEST,  # full float32: PyTorch's default, bit-faithful on CPU
    "high": jax.lax.Precision.HIGH,  # TF32-class passes where the device has them
    "medium": jax.lax.Precision.DEFAULT,  # bfloat16-class passes
}


def product_precision(jdt) -> tuple:
    """(precision, accumulation dtype) for a matrix product or convolution over `jdt` inputs.

    Half inputs multiply as they are and accumulate in float32 (CUDA's contract, and CPU's: tensor
    cores on a GPU, a float32 accumulator in CPU's BLAS), rounded once by the caller: bfloat16 at the
    default precision, which a TPU computes in one exact bfloat16 pass, float16 at the highest, as
    a TPU's one pass would round float16's 11-bit significands to bfloat16's 8 (its float32 passes
    are exact for them; XLA's CPU backend ignores the setting). float32 follows
    `torch.set_float32_matmul_precision`, read at each call. Everything else (float64, complex,
    integers) is exact."""
    jdt = jnp.dtype(jdt)
    if jdt == jnp.bfloat16:
        return jax.lax.Precision.DEFAULT, jnp.dtype(jnp.float32)
    if jdt == jnp.float16:
        return jax.lax.Precision.HIGHEST, jnp.dtype(jnp.float32)
    if jdt == jnp.float32:
        return _FLOAT32_PRECISION[torch.get_float32_matmul_precision()], None
    return jax.lax.Precision.HIGHEST, None


def widened_product_precision(jdt) -> tuple:
    """product_precision for a kernel that widens half inputs to float32 before its products, as
    CPU's math paths do (attention, the transformer's fused ops): float32 products, at float32's
    setting. (At the half dtype's own setting a TPU multiplies the widened float32 operands in one
    bfloat16 pass, rounding every intermediate it multiplies to bfloat16: a bfloat16 attention's
    gradient was 118x the OpInfo tolerance from float64 there, CPU's 0.24x.)"""
    return product_precision(jnp.promote_types(jdt, jnp.float32))


_BODIES: dict = {}


def body_at_precision(factory, dtype: torch.dtype, settings, *static):
    """`factory(*settings(jdt), *static)` for torch `dtype` (jdt its jax dtype) at the float32 matmul
    precision in force now, found with one lookup keyed by torch objects: the jitted factory's own key
    hashes numpy dtypes and enums, and the settings promote numpy dtypes (~1.2 us an addmm, ~2.5 us an
    attention call, measured). `settings` is product_precision or widened_product_precision (or one that
    puts jdt before them)."""
    key = (factory, dtype, torch.get_float32_matmul_precision(), settings, *static)
    body = _BODIES.get(key)
    if body is None:
        if len(_BODIES) >= 1024:  # static arguments that keep changing (attention's scale): start over
            _BODIES.clear()
        from jaxdev import dtypes  # jaxdev.dtypes loads after the kit's products

        body = _BODIES[key] = factory(*settings(dtypes.to_jax_dtype(dtype)), *static)
    return body


def matmul(a, b, precision, accumulate):
    """jnp.matmul at the device's product precision (product_precision). On XLA's CPU backend a
    half x half -> float32 dot has no kernel for every operand layout (a transposed view read inside
    the product's program: "Unsupported element type for DotThunk::Execute: BF16 x BF16 = F32"), so
    there half operands are widened first: their products are exact in float32, the result the same."""
    a, b = _operands(a, b, accumulate)
    return jnp.matmul(a, b, precision=precision, preferred_element_type=accumulate)


def _operands(a, b, accumulate):
    """a and b as a product takes them: widened to `accumulate` on XLA's CPU backend (see matmul)."""
    if accumulate is not None and a.dtype != accumulate and jax.default_backend() == "cpu":
        return a.astype(accumulate), b.astype(accumulate)
    return a, b


def matmul_over_rows(a, b, precision, accumulate):
    """`matmul` of a's rows' transpose and b's rows, where a [..., m] and b [..., n] are N-D arrays over
    the same leading dims (a linear layer's input and output gradient, whose product is its weight's
    gradient): contracted over those dims unflattened, as a hand-written jax.jit step contracts them,
    rather than over [rows, m] and [rows, n] (issue 37). The same values: XLA's CPU backend makes it
    the same [m, rows] x [rows, n] dot (checked bit for bit). Where capabilities'
    `gradient_producers_fuse_into_products` holds (a TPU), a (the output gradient) waits behind an
    optimization barrier: XLA's TPU compiler otherwise fused its producer (the qkv projection's: q, k and
    v's gradients concatenated) into the product with the weight's AdamW update and tiled it badly."""
    from jaxdev.ops.kit import capabilities  # imports the fallback, which needs the ops package loaded

    a, b = _operands(a, b, accumulate)
    if capabilities.fact("gradient_producers_fuse_into_products"):  # see the fact; a barrier computes nothing
        a = jax.lax.optimization_barrier(a)
    lead = tuple(range(a.ndim - 1))
    dims = ((lead, lead), ((), ()))
    return jax.lax.dot_general(a, b, dims, precision=precision, preferred_element_type=accumulate)
