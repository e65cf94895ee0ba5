"""Why bmm's float16 cells were wrong on a TPU v5e (2.4x the OpInfo tolerance from float64 forward, 3.1x
backward; CPU 0.43x) while its float32 and bfloat16 cells, and einsum's and mv's float16 ones, passed:
float16 products on JAX's default backend, each spelling against NumPy float64 on the host.

kit.precision.product_precision asks for float16 operands at the highest precision, accumulated in
float32 (CPU's contract: exact products, a float32 sum, one rounding). XLA's TPU compiler folds an
explicit float16 -> float32 widening into the product (tpu_aot: the convolution takes the float16
operands either way), so what the chip does with float16 operands at the highest precision decides it.
The suspicion to test: one bfloat16 pass (each operand rounded to 8 significant bits, 2^-9 relative).

Spellings (a [B, M, K] x [B, K, N] product, float16 inputs from OpInfo's range [-9, 9], K 5..256):
* plain: float16 operands, precision HIGHEST, float32 result (jaxdev's kernel today);
* widened: operands converted to float32 first (XLA may fold it: the same program as plain);
* barrier: widened behind an optimization barrier (float32 operands reach the product: bmm's float32
  cells pass on the chip);
* split: each float16 operand as a bfloat16 pair hi + lo (exact: 11 bits in two 8-bit pieces), four
  bfloat16 products accumulated in float32 (what a fix would do if plain is one bfloat16 pass);
* bf16: operands rounded to bfloat16, one pass (the suspected behaviour, for comparison).
One line each: the max error of the float32 result against float64 in units of float32's epsilon times
sum |a_i b_i| (an exact-product float32 sum is ~K/2 at most; one bfloat16 pass is ~2^14 = 16,384 of them),
and of the float16-rounded result in float16 ulps of the exact one.

    python benchmarks/tpu_probe_half_products.py          # on the chip (scripts/tpu_env.sh sets it up)
    JAX_PLATFORMS=cpu .venv/bin/python benchmarks/tpu_probe_half_products.py   # here: plain == split
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

HIGHEST = jax.lax.Precision.HIGHEST
F32 = jnp.float32


def _plain(a, b):
    return jnp.matmul(a, b, precision=HIGHEST, preferred_element_type=F32)


def _widened(a, b):
    return jnp.matmul(a.astype(F32), b.astype(F32), precision=HIGHEST)


def _barrier(a, b):
    # the widening kept apart from the product, so the compiler cannot fold it back into float16 operands
    a, b = jax.lax.optimization_barrier((a.astype(F32), b.astype(F32)))
    return jnp.matmul(a, b, precision=HIGHEST)


def _pair(x):
    hi = x.astype(jnp.bfloat16)
    return hi, (x.astype(F32) - hi.astype(F32)).astype(jnp.bfloat16)


def _split(a, b):
    (ah, al), (bh, bl) = _pair(a), _pair(b)

    def dot(x, y):
        return jnp.matmul(x, y, preferred_element_type=F32)

    return (dot(ah, bh) + (dot(ah, bl) + dot(al, bh))) + dot(al, bl)


def _bf16(a, b):
    return jnp.matmul(a.astype(jnp.bfloat16), b.astype(jnp.bfloat16), preferred_element_type=F32)


SPELLINGS = {"plain": _plain, "widened": _widened, "barrier": _barrier, "split": _split, "bf16": _bf16}


def _ulps16(got: np.ndarray, exact: np.ndarray) -> float:
    """Distance of float16-rounded results from the float16 rounding of the exact ones, in ulps."""
    g = got.astype(np.float16).view(np.int16).astype(np.int64)
    e = exact.astype(np.float16).view(np.int16).astype(np.int64)
    g = np.where(g < 0, -(g & 0x7FFF), g)
    e = np.where(e < 0, -(e & 0x7FFF), e)
    return float(np.abs(g - e).max())


def main() -> None:
    print(f"backend {jax.default_backend()}: {jax.devices()[0].device_kind}, jax {jax.__version__}")
    rng = np.random.default_rng(0)
    for k in (5, 32, 256):
        a = rng.uniform(-9, 9, (4, 64, k)).astype(np.float16)
        b = rng.uniform(-9, 9, (4, k, 48)).astype(np.float16)
        exact = np.matmul(a.astype(np.float64), b.astype(np.float64))
        scale = np.matmul(np.abs(a.astype(np.float64)), np.abs(b.astype(np.float64)))
        for name, fn in SPELLINGS.items():
            got = np.asarray(jax.jit(fn)(a, b)).astype(np.float64)
            eps = float((np.abs(got - exact) / (scale * 2.0**-24)).max())
            print(f"K {k:>3} {name:<8} max err {eps:10.1f} x eps32 x sum|ab|   float16 ulps {_ulps16(got, exact):5.0f}")


if __name__ == "__main__":
    main()
