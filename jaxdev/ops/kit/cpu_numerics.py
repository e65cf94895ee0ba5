"""CPU-fidelity numerics: the one place kernels get CPU PyTorch's rounding from.

Policy. The auditor judges a float32, complex64, float16 or bfloat16 result that differs from CPU's
beyond tolerance by float64 arbitration (audit/arbitration.py): it passes when it is within tolerance
of the exact (float64) result of the same inputs, or no farther from it than CPU is. So a kernel
computes the way XLA likes by default, and is right when its own error is within tolerance. It
follows CPU step by step, with the helpers below, only where that does not settle it:
- where arbitration does not apply: integer, bool and float64 outputs, and the ops facts.NOT_ARBITRATED
  and facts.DTYPE_DEPENDENT name (a result that depends on the dtype itself, or on its epsilon);
- where one rounding difference is amplified past any tolerance (an ulp of a coordinate moves
  grid_sample's bicubic by up to 255 ulps; a branch, bin or index chosen by a rounded value);
- where CPU's result is not the exact one rounded and users compare against it bit for bit: half
  precision whose every operation rounds to the half dtype (c10::Half / BFloat16 scalar code,
  Vectorized<Half>), Cephes special functions evaluated in the input's own precision, libm's float32
  exp/log/lgamma, and the elements CPU's loop hands to its scalar op rather than its vector one.
A kernel that emulates must also stop XLA from improving on CPU: its simplifier rewrites a / c into
a * (1 / c) and 1 / sqrt(b) into rsqrt(b) (``opaque``, ``divide_by``, ``sqrt_divisor``), and its
float32 exp/log/lgamma are not libm's (``widened``). Families call these; none writes its own.

What XLA keeps (settled by tests/ops/test_cpu_numerics.py, on XLA's CPU backend, under jit and
eagerly): a round trip a program writes, float32 -> float16/bfloat16 -> float32 or float64 ->
float32 -> float64, is kept, and equals the correctly rounded value. What it does not give: a
bfloat16 operation whose result the same program converts to float32 keeps float32's precision (the
operation's own rounding is dropped: XLA computes bfloat16 in float32); a division by a constant
becomes a multiplication; converting float64 to a half rounds twice (through float32), and to
float32 flushes subnormals. ``round_to`` takes the path that is exact for each case.

What depends on the CPU (issue 41): XLA generates code for the host's instruction set. LLVM narrows a
float32 operation on widened halves whose result is narrowed again into a half operation, and XLA lets
LLVM fuse a product into the sum that uses it; without native float16 each half operation is computed
in float and rounded back, with AVX512-FP16 it is float16 arithmetic and the pair becomes one FMA (one
rounding where CPU rounds twice). The one-step float64 -> float16 convert rounds once there. So a
kernel whose half results must be CPU's computes in float32 (or float64), rounds with ``round_to``
(reduce_precision: integer operations on the bits, the same code on every CPU), never with a convert
round trip, and converts a float64 to a half through float32 (``narrowed``, as c10 builds a half from
a float). tests/half_programs.py checks a program for this; tests/README.md runs the half-precision
tests under each instruction set XLA can be capped to.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import torch
from jax import lax

from jaxdev import layout
from jaxdev.ops.kit import transcendentals as tm
from jaxdev.ops.kit.division import divide as divide  # re-exported: the kernels' division
from jaxdev.ops.kit.division import division_ieee as division_ieee
from jaxdev.ops.kit.division import exact_product
from jaxdev.ops.kit.division import fmod as fmod  # re-exported: C's fmod, exact where rem is not
from jaxdev.ops.kit.division import sqrt as sqrt  # re-exported: IEEE's where the platform's is not

_HALVES = (jnp.dtype(jnp.float16), jnp.dtype(jnp.bfloat16))


# --- rounding ----------------------------------------------------------------------------------------


def round_to(dtype):
    """The function v -> v rounded once to `dtype`'s grid (subnormals kept), staying in v's dtype: the
    rounding a C++ value of type `dtype` gets after each operation.

    A value already of a half dtype is pinned with reduce_precision (XLA may compute a chain of half
    operations in float32); float32 and float64 values of their own dtype are left as they are. A
    wider float value (float64, or float32 to a half) is rounded by reduce_precision, which XLA emits
    as integer operations on the bits, the same code on every CPU; it flushes what falls below the
    target's smallest normal where the target's exponent range is narrower, so those values are
    rounded to the target's subnormal grid here (the gradient passing straight through). It is not
    a convert round trip, v.astype(dtype).astype(v.dtype): LLVM narrows an operation on widened
    halves whose result is narrowed again into half arithmetic, and on a CPU with native float16
    (AVX512-FP16) fuses a product and a sum of those into one FMA, one rounding where CPU rounds
    twice (issue 41). Integers and narrower floats round-trip through `dtype`: exact wherever run."""
    target = jnp.dtype(dtype)
    info = jnp.finfo(target)

    def rounded(v):
        if v.dtype == target:
            return lax.reduce_precision(v, info.nexp, info.nmant) if target in _HALVES else v
        if jnp.issubdtype(v.dtype, jnp.floating) and jnp.finfo(v.dtype).bits > info.bits:
            return _rounded_from_wider(v, info)
        return v.astype(target).astype(v.dtype)

    return rounded


def _rounded_from_wider(v, info):
    """v rounded to the grid of the float type `info` describes, in v's own (wider) dtype."""
    if v.dtype == jnp.float64 and not float64_native():
        kept = _emulated_float64_rounded(v, info)
    else:
        kept = lax.reduce_precision(v, exponent_bits=info.nexp, mantissa_bits=info.nmant)
    if jnp.finfo(v.dtype).nexp == info.nexp:
        return kept  # float32 -> bfloat16: one exponent range, subnormals rounded by reduce_precision
    step = float(info.smallest_subnormal)
    grid = jnp.round(v / step) * step  # exact: step is a power of two
    # value: grid; gradient: v's. copysign keeps the sign of a value that rounds to zero (-1e-9 -> -0)
    subnormal = jnp.copysign(grid + (v - lax.stop_gradient(v)), v)
    return jnp.where(jnp.abs(v) < float(info.smallest_normal), subnormal, kept)


def _emulated_float64_rounded(v, info):
    """_rounded_from_wider's normal grid for a float64 where float64 is float32 pairs (a TPU), whose
    compiler has no float64 reduce_precision (UNIMPLEMENTED in its X64 rewrite: a raw error from
    logspace in half there). To float32 the convert rounds once; to a half, float32 rounded to odd
    (truncated, its last bit set where the truncation dropped anything) keeps what decides the half's
    rounding, so reduce_precision from it rounds once too."""
    hi = v.astype(jnp.float32)  # nearest
    if info.bits == 32:
        return hi.astype(v.dtype)
    lo = v - hi.astype(v.dtype)  # the part hi dropped, of either sign
    bits = lax.bitcast_convert_type(hi, jnp.int32)
    past = (lo != 0) & (hi != 0) & ((lo < 0) == (hi > 0))  # |hi| > |v|: one step toward zero truncates
    bits = jnp.where(past, bits - 1, bits)
    odd = lax.bitcast_convert_type(jnp.where(lo != 0, bits | 1, bits), jnp.float32)
    odd = jnp.where(jnp.isfinite(hi), odd, hi)  # infinities and NaN as they are
    return lax.reduce_precision(odd, exponent_bits=info.nexp, mantissa_bits=info.nmant).astype(v.dtype)


def narrowed(v, dtype):
    """v converted to `dtype` as C++ converts a double: to a half through float (c10::Half and
    c10::BFloat16 are built from float), since XLA's one-step float64 -> float16 convert rounds once
    on a CPU with native float16 and twice elsewhere."""
    target = jnp.dtype(dtype)
    if target in _HALVES and v.dtype in (jnp.float64, jnp.complex128):
        v = v.astype(jnp.float32 if v.dtype == jnp.float64 else jnp.complex64)  # a complex: its real part
    return v.astype(target)


def float64_native() -> bool:
    """Whether float32 kernels may widen to float64 for CPU's last bits: not where the platform
    emulates float64 (capabilities' `float64_emulated`: a TPU, where several such programs raise raw
    XLA errors); there they compute in float32 with transcendentals.py's functions. Read when a
    kernel is traced."""
    from jaxdev.ops.kit import capabilities  # imports the fallback, which needs the ops package loaded

    return not capabilities.fact("float64_emulated")


def wide_dtype(dtype):
    """The dtype a float32 computation widens to for CPU's last bits: float64, or float32 itself
    where float64 is emulated (float64_native); other dtypes as they are."""
    dtype = jnp.dtype(dtype)
    return jnp.dtype(jnp.float64) if dtype == jnp.float32 and float64_native() else dtype


def wide(v):
    """v in wide_dtype(v.dtype)."""
    return v.astype(wide_dtype(v.dtype))


def widened(fn):
    """fn taken in float64 and rounded once to its first argument's dtype (float64 as it is): how a
    float32 result of the C library CPU calls (expf, logf, log1pf, expm1f, erfcf, lgammaf, all
    nearly correctly rounded) is reached, where XLA's float32 versions are an ulp or more off. Where
    float64 is emulated (float64_native), fn in float32 itself: fn must then be accurate in float32
    (transcendentals.py's functions are, off the CPU backend)."""

    def run(*args):
        dt = args[0].dtype
        if wide_dtype(dt) == dt:
            return fn(*args)
        return fn(*(a.astype(jnp.float64) for a in args)).astype(dt)

    return run


exp_wide, log_wide = widened(tm.exp), widened(tm.log)


def fma32(a, b, c):
    """a * b + c for float32 arrays with one rounding, as CPU's compiler contracts it: in float64
    where the platform has it (an exact product, one rounding to float32); where float64 is emulated
    (float64_native: a TPU, where each float64 op costs dozens of float32 ones) in float32 alone,
    Dekker's exact product and a compensated sum: the same bits but for double roundings (rare,
    half an ulp at most), and exactly the fused result where p + c cancels (x == mean in a norm's
    gradient: the product's rounding error, not 0)."""
    if float64_native():
        f64 = jnp.float64
        return (a.astype(f64) * b.astype(f64) + c.astype(f64)).astype(jnp.float32)
    p, e = exact_product(a, b)
    s = p + c
    z = s - p
    err = (p - (s - z)) + (c - z)  # s + err == p + c exactly
    return s + (err + e)


def product32(a, b):
    """a * b for float32 arrays rounded to float32 by itself, as CPU computes a product its compiler
    does not contract into the sum that uses it. In one XLA program (fused eager's, a compiled step's)
    LLVM contracts a float32 product into the next addition (one FMA, one rounding), and a barrier
    does not stop it (XLA's CPU pipeline removes barriers before LLVM). Here the product is exact in
    float64 and rounded to float32 by reduce_precision, which XLA emits as integer operations on the
    bits: no multiply is left to contract, and per-op mode's separate programs give the same bits.
    Where float64 is emulated (float64_native), the platform's product."""
    if not float64_native():
        return a * b
    exact = a.astype(jnp.float64) * b.astype(jnp.float64)
    return _rounded_from_wider(exact, jnp.finfo(jnp.float32)).astype(jnp.float32)


def const(value, like):
    """C++'s T(value): a constant in `like`'s dtype."""
    return jnp.asarray(value, like.dtype)


def opaque(x):
    """`x` (an array or a tuple of arrays) hidden from XLA's algebraic simplifier, which would
    otherwise compute differently from CPU: a / c into a * (1 / c), a / sqrt(b) into a * rsqrt(b),
    (a / b) / c into a / (b * c), x * convert(bool) into a select that loses inf * 0 = NaN."""
    return lax.optimization_barrier(x)


def sqrt_divisor(x):
    """sqrt(x) for use as a divisor: a rounded square root (IEEE's where the platform's is not), kept
    from becoming rsqrt."""
    return opaque(sqrt(x))


def divide_by(x, constant):
    """x / constant as a true division (a constant divisor must be a full array behind the barrier),
    IEEE's where the platform's is not (division.divide: a TPU's is 2 ulps off)."""
    return divide(x, opaque(jnp.full_like(x, constant)))


def log_half(x):
    """log(0.5 * x) with 0.5 * x subnormal as CPU has it: XLA flushes subnormals to zero (log would
    give -inf at the smallest normal x). float32 halves in float64 and rounds to float32's
    subnormal grid; float64, having no wider type (and float32 where float64 is emulated), takes
    log(x * 2^52) - 53 log 2 there."""
    if x.dtype == jnp.float32 and wide_dtype(x.dtype) == jnp.float64:
        y = 0.5 * x.astype(jnp.float64)
        y = jnp.round(y * 2.0**149) * 2.0**-149
        return jnp.log(y).astype(jnp.float32)
    subnormal = x < 2 * jnp.finfo(x.dtype).tiny
    scaled = tm.log(x * 2.0**52) - 53 * math.log(2.0)
    return jnp.where(subnormal, scaled, tm.log(0.5 * x))


# --- polynomial evaluation ---------------------------------------------------------------------------


def horner(coefficients, z, *, from_zero=False):
    """sum c_i z^(n-i), highest power first, as CPU's loop computes it: acc = acc * z + c. Cephes'
    polevl (and ratevl) starts from acc = c_0; PyTorch's own Bessel loops (Math.h) start from
    acc = 0 (`from_zero`), which gives NaN rather than an infinity at an infinite z."""
    acc = jnp.zeros_like(z) if from_zero else jnp.full_like(z, coefficients[0])
    for c in coefficients if from_zero else coefficients[1:]:
        acc = acc * z + c
    return acc


def chebyshev(coefficients, y, rounded=None):
    """Cephes' chbevl recurrence b0 = y * b1 - b2 + c; returns (b0, b2), the series being
    0.5 * (b0 - b2). `rounded` is applied to each coefficient and after every operation (CPU's
    c10::Half / BFloat16 scalar arithmetic); without it the dtype's own arithmetic rounds."""
    if rounded is None:
        p = q = jnp.zeros_like(y)
        b = jnp.full_like(y, coefficients[0])
        for c in coefficients[1:]:
            p, q = q, b
            b = y * q - p + c
        return b, p
    cs = [rounded(jnp.asarray(c, y.dtype)) for c in coefficients]
    b2 = b1 = jnp.zeros_like(y)
    b0 = jnp.full_like(y, cs[0])
    for c in cs[1:]:
        b2, b1 = b1, b0
        b0 = rounded(rounded(rounded(y * b1) - b2) + c)
    return b0, b2


# --- CPU's elementwise loop --------------------------------------------------------------------------

# TensorIterator hands more than GRAIN_SIZE elements to at::parallel_for, one chunk per thread.
GRAIN_SIZE = 32768


def cpu_threads() -> int:
    """The number of threads CPU PyTorch's loops split work over in this process
    (torch.get_num_threads()). Where CPU's result depends on it (which elements a chunk leaves to
    the scalar op), so does jaxdev's: it reproduces this process's CPU, and torch.set_num_threads(n)
    reproduces a host with n threads."""
    return torch.get_num_threads()


def iteration_order(shape, strides):
    """TensorIterator's order for a unary op with a fresh output: its dims fastest first (reorder_dimensions:
    an insertion sort by the input's strides, a broadcast dim deciding nothing, equal strides the larger
    size last), then the first coalesced dim's size and the input's stride there (coalesce_dimensions)."""
    ndim = len(shape)
    perm = layout.iteration_order(shape, [strides])
    size0, stride0 = (1, 1) if ndim == 0 else (shape[perm[0]], strides[perm[0]])
    for d in perm[1:]:
        if size0 == 1 or shape[d] == 1 or size0 * stride0 == strides[d]:
            if size0 == 1:
                stride0 = strides[d]
            size0 *= shape[d]
        else:
            break
    return perm, size0, stride0


def scalar_lanes(shape, strides, block, threads):
    """Where CPU's elementwise loop (Loops.h vectorized_loop) computes an element with the scalar op
    (True) rather than the vector one, for an input of this layout and `threads` threads. The loop
    walks the output in TensorIterator's order; each run of the first coalesced dim (cut by the
    per-thread chunks past GRAIN_SIZE) goes `block` elements at a time through the vector op when
    the input's stride there is 1 or 0, its remainder (or, for another stride, the whole run)
    through the scalar op."""
    n = 1
    for s in shape:
        n *= s
    perm, size0, stride0 = iteration_order(shape, strides)
    if stride0 not in (0, 1):
        return jnp.ones(shape, bool)
    # each element's position in the output's memory order (the output is laid out in `perm`)
    linear, step = jnp.zeros(shape, jnp.int64), 1
    for d in perm:
        linear = linear + jax.lax.broadcasted_iota(jnp.int64, shape, d) * step
        step *= shape[d]
    chunks = 1 if n < GRAIN_SIZE or threads == 1 else min(threads, -(-n // GRAIN_SIZE))
    chunk = max(-(-n // chunks), 1)
    row = linear // size0 * size0
    first = jnp.maximum(row, linear // chunk * chunk)
    length = jnp.minimum(row + size0, (linear // chunk + 1) * chunk) - first
    return linear - first >= length // block * block
