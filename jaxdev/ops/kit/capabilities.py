"""What XLA's backend on this process's platform has no kernel for, by op family and dtype, and how the
ops that need one are served there: by CPU PyTorch, through the CPU fallback (counted and warned as
every fallback is, jaxdev/fallback.py), never with a raw JAX error.

XLA's CPU backend has every kernel jaxdev's ops use. XLA's TPU backend has no float64 or complex128 LU
("UNIMPLEMENTED: Only F32 and C64 types are implemented in LuDecomposition": inv, solve, det, slogdet)
and no complex128 FFT (INVALID_ARGUMENT), both seen on a TPU v5e with JAX 0.10.2; a TPU has no float64
hardware (XLA emulates float64 elementwise with pairs of float32), so the other float64 and complex128
decompositions are suspected to be missing too. A `confirmed` gap is served on CPU from the start; a
`suspected` one once the platform has refused it: the kernel runs, and an error of the kind a missing
kernel gives (XLA's UNIMPLEMENTED or INVALID_ARGUMENT, JAX's missing lowering) sends this call and
every later one of that family and dtype to CPU (`learned`). benchmarks/tpu_probe_kernels.py tries every
family on a TPU and says which raise, so that suspected gaps become confirmed or are struck.

Facts of a platform that shape every program rather than one op family (`PROGRAM_FACTS`, asked with
`fact(name)`), measured on a TPU v5e with JAX 0.10.2 (DESIGN.md, "TPU facts, third round"):
- `complex128_converts_abort`: XLA's TPU compiler aborts the process (SIGABRT, "Unsupported CVT
  X{64|128} expansion") on a convert into complex128 from any other dtype (bool, integers, floats,
  complex64) and on a complex128 -> complex64 convert; a Python complex number put into a complex64
  op included (JAX makes it complex128 first). Converts out of complex128 into real dtypes, complex128
  parameters and arithmetic are fine. Where the fact holds, every such convert is lowered as its real
  and imaginary parts converted and recombined (`_complex_in_parts`, installed as
  convert_element_type's lowering: jaxdev's programs and any other in the process), the same values
  to the bit. The chip showed the narrowing (pytest, the probe); XLA's TPU compiler run without the
  chip (jaxdev/audit/deviceless.py) showed the widening, in complex128 eigh and every dtype's convert.
- `int64_bitcasts_miscompile`: integer arithmetic (and, shifts, add) on a float64 -> int64 bitcast,
  or an int64 -> float64 bitcast of such a result, raises INVALID_ARGUMENT ("Binary op and with
  different element types: s32[20] and u32[20]") in XLA's TPU compiler; through uint64 it compiles
  (found running it without the chip, jaxdev/audit/deviceless.py: copysign, signbit, frexp, ldexp,
  floor division, exp2, lgamma, digamma, erfinv of float64). Where the fact holds every such bitcast
  is lowered through uint64 (`_bitcast_through_unsigned`), the same bits.
- `float64_emulated`: no float64 hardware (XLA computes float64 with pairs of float32), and several
  float64 programs raise raw XLA errors there (nextafter; sinh, exp2 and igamma of float32 computed in
  float64). float32 kernels that widen to float64 for CPU's last bits (cpu_numerics.wide, widened)
  stay in float32 there with an accurate formulation (transcendentals.py's functions), and float64
  nextafter is computed on the bits (binary/floating.py).
- `division_approximate`: float32 division and reciprocal are not IEEE's there (191 ulps from CPU's
  measured on a v5e, README "On a TPU"), so a division kept from XLA's rewrite into a multiplication
  by the reciprocal (formulas.DIV: its broadcast divisor behind a barrier) gains no CPU bits, while
  the barrier makes XLA write the broadcast divisor to memory as a full array and read it back (every
  AdamW parameter's `_foreach_div_` by a number in the LM's step, issue 37). Where the fact holds the
  divisor is broadcast in the open.
- `products_not_contracted`: float32 `a * b + c` rounds twice there, once on CPU (GCC and XLA's CPU
  backend contract it into an FMA): kernels whose CPU reference is C++ arithmetic emulate the FMA
  there (cpu_arithmetic.py).
- `sqrt_approximate`: float32 sqrt is not IEEE's there (2 ulps off on 41 % of inputs on a v5e): where
  CPU's result hangs on it (torch.sqrt itself, asin, acos, ndtri, the Bessel functions) it is corrected
  (division.sqrt).
- `row_sums_fuse_as_windows`: XLA's TPU compiler makes a row sum broadcast straight back over its rows
  (layer norm's input gradient as CPU's formula has it: rstd / n (n g - sum g - xhat sum(g xhat)))
  a reduce-window inside its consumer's fusion, and that fusion then takes no sibling reduction:
  the bias gradient's sum over the same gradient stayed a pass of its own over it (13 in the LM
  step, 0.71 M of its 19.1 M estimated cycles, issue 37). Where the fact holds the sums are scaled
  at row shape first (normalization.py), as JAX's own derivative has them, and fuse as jax.jit's do.
- `max_gradient_mask_materialized`: the gradient through a row max (softmax's shift in attention) is
  a mask `x == max` of the scores' full shape, which XLA's TPU compiler writes out ([batch, heads, L,
  S] a layer) and reads in the key gradient's product, 3.4x that product's cost (issue 37: 1.0 M of
  the LM step's 18.6 M estimated cycles). Softmax does not depend on its shift, so that gradient is
  rounding residue (CPU's softmax backward has none); where the fact holds attention leaves it out.
- `gradient_producers_fuse_into_products`: XLA's TPU compiler fused the producer of a weight gradient's
  output-gradient operand into the product, itself fused with the weight's AdamW update: the LM step's
  qkv projection (1536 x 512), whose output gradient is q, k and v's concatenated (attention's split),
  was tiled with kernel window 4 at 0.204 M estimated cycles a layer where the compiled step's had 16
  (issue 37). Where the fact holds the operand waits behind an optimization barrier (precision.py's
  matmul_over_rows), which computes nothing: the concatenation is written once, fused with the bias
  gradient's row sum as before, and the product with the update reads it at 0.061 M. The LM's bf16
  step, XLA's TPU cost model without the chip: fused eager 14.167 -> 13.417 M, compiled+fused 13.496
  -> 13.455 M; the other weights' products as without.
- `half_transposed_taps_abort`: CPU's slow_conv_transpose for half inputs (where the host's oneDNN
  lacks the dtype: its columns rounded, then added into the output one kernel tap after another, each
  addition rounded), as conv.py emulates it with one strided update of the output per tap, killed
  XLA's TPU compiler (SIGABRT: fusion_util.cc "TransformWindow: Loop will not make progress") on a
  grouped, dilated float16 conv_transpose3d (found running tests/ops/test_conv.py without the chip,
  jaxdev/audit/deviceless.py). Where the fact holds the transposed convolution rounds once (its
  product accumulated in float32, as every half product on the device), which is closer to the exact
  result than CPU's per-tap rounding (0.0036 against CPU's 0.0064 there) and compiles.

Kernels that widen a float32 matrix to float64 for accuracy (SVD, eigh: decompositions.py) ask
`has(family, dtype)` first and stay in float32 where the wide kernel is missing.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools

import jax
import numpy as np
import torch
from jax._src.interpreters import mlir as mlir_internal  # the usual lowering, to fall back to
from jax.interpreters import mlir

from jaxdev import dtypes, fallback

F64, C128 = torch.float64, torch.complex128


@dataclasses.dataclass(frozen=True)
class Gap:
    dtypes: frozenset
    status: str  # "confirmed": seen refused on the platform; "suspected": not yet tried there
    evidence: str


def _gap(status: str, evidence: str, dtypes=(F64, C128)) -> Gap:
    return Gap(frozenset(dtypes), status, evidence)


_ABORTED = "the process aborted (SIGABRT) inside XLA's TPU compiler on a TPU v5e (the probe, 2026-12-05): "
_SUSPECTED = "suspected: a TPU has no float64 hardware; not yet probed (benchmarks/tpu_probe_kernels.py)"

# platform -> op family -> the dtypes XLA has no kernel for there
GAPS: dict[str, dict[str, Gap]] = {
    "tpu": {
        "lu": _gap("confirmed", "UNIMPLEMENTED: Only F32 and C64 types are implemented in LuDecomposition"),
        "fft": _gap("confirmed", "INVALID_ARGUMENT: complex128 FFT (jax-ml/jax#10158: C128 is not supported on TPU)"),
        # A process that aborts cannot learn a gap: kernels seen killing it are confirmed, every dtype
        # that did (benchmarks/tpu_probe_kernels.py on a TPU v5e, 2026-12-05; DESIGN.md).
        "cholesky": _gap("confirmed", "complex128: raised on a TPU v5e (the probe, 2026-12-05)", (C128,)),
        "triangular_solve": _gap("confirmed", _ABORTED + "solve_triangular complex128", (C128,)),
        "qr": _gap("confirmed", _ABORTED + "qr and householder_product complex128", (C128,)),
        "svd": _gap(
            "confirmed",
            _ABORTED + "svd float32 and complex64 (which of its programs, not isolated: every dtype served on CPU)",
            (torch.float32, F64, torch.complex64, C128),
        ),
        # XLA's TPU compiler, run without the chip (jaxdev/audit/deviceless.py), 2026-12-06
        "integer_product": _gap(
            "confirmed",
            "UNIMPLEMENTED: While rewriting computation to not contain X{64|128} element types, XLA "
            "encountered an HLO for which this rewriting is not implemented (int64 dot and convolution)",
            (torch.int64, torch.uint64),
        ),
        "eigh": _gap("suspected", _SUSPECTED),
        "eig": _gap(
            "confirmed",
            "NotImplementedError: MLIR translation rule for primitive 'eig' not found for platform tpu (JAX "
            "0.10.2, its lowering for CPU and GPU only; the stand-in, 2026-12-06)",
            (torch.float32, F64, torch.complex64, C128),
        ),
    }
}

# platform -> dtype -> why jax tensors of it are refused there (dtypes.PLATFORM_REFUSALS). XLA's TPU
# compiler, run without the chip on every primitive (jaxdev/audit/deviceless.py, libtpu 0.0.42.1,
# 2026-12-06), aborts the process on complex128 abs, division, reciprocal, rsqrt, expm1, tan, tanh, pow
# and on any convert into complex128 (a Python number padded or selected into a complex128 array
# included), and raises on its sign, transpose and concatenate: no kernel family could be kept from it,
# and a copy of a transposed complex128 tensor is already a program it refuses.
REFUSED_DTYPES: dict[str, dict[torch.dtype, str]] = {
    "tpu": {
        C128: "complex128 is not supported on device 'jax' on a TPU: XLA's TPU compiler cannot compile "
        "complex128 programs (it aborts on complex128 division, abs and tanh, and refuses its transposes); "
        "use complex64, or keep complex128 tensors on CPU"
    }
}
for _platform, _refusals in REFUSED_DTYPES.items():
    dtypes.refuse(_platform, _refusals)

# platform -> facts of its XLA backend that shape every program (the module's docstring says what each does)
PROGRAM_FACTS: dict[str, dict[str, str]] = {
    "tpu": {
        "complex128_converts_abort": "any convert into complex128, or from it into complex64, aborts XLA's TPU "
        "compiler (SIGABRT)",
        "float64_emulated": "float64 emulated with float32 pairs; nextafter, and sinh, exp2, igamma float32 "
        "computed in float64, raise raw XLA errors",
        "int64_bitcasts_miscompile": "integer arithmetic on a float64 -> int64 bitcast fails to compile "
        "(INVALID_ARGUMENT: 'with different element types: s32 and u32'; through uint64 it compiles)",
        "row_sums_fuse_as_windows": "a row sum broadcast straight back over its rows becomes a reduce-window "
        "in its consumer's fusion, which then takes no sibling reduction (layer norm's bias gradient)",
        "max_gradient_mask_materialized": "the gradient through a row max is a mask of the scores' full "
        "shape, written out and read in the key gradient's product",
        "division_approximate": "float32 division and reciprocal are not IEEE's (191 ulps from CPU's): a "
        "division kept from becoming a reciprocal's product keeps no CPU bits",
        "sqrt_approximate": "float32 sqrt is not IEEE's (2 ulps off on 41 % of inputs)",
        "products_not_contracted": "float32 a * b + c rounds twice, where CPU's kernels and XLA's CPU backend "
        "fuse it into one rounding (FMA): next to a zero of J0/Y0 a polynomial's last bits become 30-2,123 ulps",
        "gradient_producers_fuse_into_products": "a weight gradient's product takes its output gradient's "
        "producer (a concatenation) into its fusion with the weight's AdamW update, tiled 4x finer",
        "half_transposed_taps_abort": "CPU's tap-by-tap half transposed convolution (a strided update of the "
        "output per kernel tap) aborts XLA's TPU compiler (fusion_util TransformWindow: loop will not make progress)",
    }
}

_NAMES = {
    "lu": "LU decomposition",
    "fft": "FFT",
    "cholesky": "Cholesky decomposition",
    "triangular_solve": "triangular solve",
    "qr": "QR decomposition",
    "svd": "SVD",
    "eigh": "Hermitian eigendecomposition",
    "eig": "eigendecomposition",
    "integer_product": "64-bit integer product or convolution",
}

# aten op (schema name: every overload) -> the family whose kernel its jax kernel needs
FAMILIES = {
    "aten::linalg_lu_factor_ex": "lu",
    "aten::linalg_lu": "lu",
    "aten::_linalg_det": "lu",
    "aten::_linalg_slogdet": "lu",
    "aten::_linalg_solve_ex": "lu",
    "aten::linalg_inv_ex": "lu",
    "aten::linalg_lu_solve": "triangular_solve",
    "aten::linalg_solve_triangular": "triangular_solve",
    "aten::triangular_solve": "triangular_solve",
    "aten::cholesky_inverse": "triangular_solve",
    "aten::_cholesky_solve_helper": "triangular_solve",
    "aten::linalg_cholesky_ex": "cholesky",
    "aten::cholesky": "cholesky",
    "aten::linalg_qr": "qr",
    "aten::geqrf": "qr",
    "aten::linalg_householder_product": "qr",
    "aten::ormqr": "qr",
    "aten::_linalg_svd": "svd",
    "aten::linalg_lstsq": "svd",
    "aten::_linalg_eigh": "eigh",
    "aten::linalg_eig": "eig",
    "aten::_linalg_eigvals": "eig",
    "aten::mm": "integer_product",
    "aten::bmm": "integer_product",
    "aten::mv": "integer_product",
    "aten::dot": "integer_product",
    "aten::vdot": "integer_product",
    "aten::addmm": "integer_product",
    "aten::addmv": "integer_product",
    "aten::baddbmm": "integer_product",
    "aten::addbmm": "integer_product",
    "aten::convolution_overrideable": "integer_product",
    "aten::_fft_r2c": "fft",
    "aten::_fft_c2r": "fft",
    "aten::_fft_c2c": "fft",
}

# (platform, family, dtype) a suspected gap was seen refused for in this process
learned: set[tuple[str, str, torch.dtype]] = set()
_ignored = False


@functools.cache
def platform() -> str:
    """The JAX platform jaxdev's arrays live on (its default backend)."""
    return jax.default_backend()


def has(family: str, dtype: torch.dtype) -> bool:
    """Whether this platform's XLA has `family`'s kernel for `dtype` (as far as jaxdev knows)."""
    if _ignored:
        return True
    where = platform()
    gap = GAPS.get(where, {}).get(family)
    if gap is None or dtype not in gap.dtypes:
        return True
    return gap.status != "confirmed" and (where, family, dtype) not in learned


@contextlib.contextmanager
def ignored():
    """Every kernel tried as it is, gaps or not (benchmarks/tpu_probe_kernels.py: what the platform refuses)."""
    global _ignored
    previous, _ignored = _ignored, True
    try:
        yield
    finally:
        _ignored = previous


_NO_GAPS: dict = {}


def _matrix_dtype(args, kwargs) -> torch.dtype | None:
    for a in (*args, *kwargs.values()):
        if isinstance(a, torch.Tensor):
            return a.dtype
    return None


def _refused(error: Exception) -> bool:
    """A compile error of the kind XLA gives for a kernel it lacks (not a value or shape error)."""
    text = str(error)
    known = ("UNIMPLEMENTED", "INVALID_ARGUMENT", "not implemented", "not supported", "not found for platform")
    return any(k in text for k in known)


def served(op, kernel):
    """`kernel` for `op` as installed: `op`'s family on CPU where this platform lacks it for the
    matrix's dtype (confirmed, or learned from a refusal), the kernel itself everywhere else."""
    family = FAMILIES.get(op._schema.name)
    if family is None:
        return kernel

    def on_cpu(dtype, args, kwargs):
        where, name = platform().upper(), dtypes.name(dtype)
        why = f"{name} kernel on {where} (XLA's {where} backend has no {name} {_NAMES[family]})"
        # CPU has no convolution_overrideable (the hook other backends implement): its convolution
        # takes the same arguments
        twin = torch.ops.aten.convolution.default if op.name() == "aten::convolution_overrideable" else op
        return fallback.run_on_cpu_lacking(twin, why, args, kwargs, gap=True)

    def run(*args, **kwargs):
        gap = GAPS.get(platform(), _NO_GAPS).get(family)
        if gap is None:  # the common case (every family on CPU): two lookups
            return kernel(*args, **kwargs)
        first = args[0] if args else None  # the matrix, as _matrix_dtype finds it, without its tuple
        dtype = first.dtype if isinstance(first, torch.Tensor) else _matrix_dtype(args, kwargs)
        if dtype not in gap.dtypes:  # a TPU's float matrix product: nothing to serve, and no refusal to learn
            return kernel(*args, **kwargs)
        if not has(family, dtype):  # (a dtype of the gap's: None and the others returned above)
            return on_cpu(dtype, args, kwargs)
        try:
            return kernel(*args, **kwargs)
        except (jax.errors.JaxRuntimeError, NotImplementedError) as error:  # XLA's refusal; JAX's: no lowering
            if _ignored or not _refused(error):  # (a dtype of the gap's: the others returned above)
                raise
            learned.add((platform(), family, dtype))
            return on_cpu(dtype, args, kwargs)

    run.__qualname__ = getattr(kernel, "__qualname__", "kernel")
    run.__wrapped__ = kernel
    return run


def fact(name: str) -> bool:
    """Whether `name` (a key of PROGRAM_FACTS' entries) holds on this process's platform."""
    return name in PROGRAM_FACTS.get(platform(), {})


def refuse_float64_bits(what: str, dtype: torch.dtype) -> None:
    """Raise, in one sentence, where `what` reads float64's IEEE bits and the platform's float64 has none:
    a TPU's is a float32 pair, and its float64 -> uint64 bitcast gives the pair's two float32 patterns
    (hi << 32 | lo; measured on a v5e: 1/3 -> 0x3eaaaaabb22aaaab), so a result made from them is garbage."""
    if dtype == F64 and fact("float64_emulated"):
        raise dtypes.PlatformDtypeError(
            f"{what} of float64 is not supported on device 'jax' on a {platform().upper()}: float64 is "
            "emulated there as float32 pairs, which have no IEEE float64 bits to read; use float32, or "
            "run it on CPU"
        )


def _complex_in_parts(ctx, operand, *, new_dtype, **params):
    """convert_element_type's lowering: a convert into complex128 (from another dtype) or from it into
    complex64 as real and imaginary parts converted and recombined, where the platform aborts on the
    convert itself; the usual lowering otherwise."""
    (aval,) = ctx.avals_in
    source, target = np.dtype(aval.dtype), np.dtype(new_dtype)
    widening = target == np.complex128 and source != target
    if (widening or (source == np.complex128 and target == np.complex64)) and fact("complex128_converts_abort"):
        part = np.float64 if widening else np.float32
        parts = mlir.lower_fun(functools.partial(_recombined, part=part), False)
        return parts(ctx, operand)
    return _usual_convert(ctx, operand, new_dtype=new_dtype, **params)


def _recombined(v, *, part):
    """`v` as a complex number of `part` parts: real and imaginary parts converted apart (a real `v`'s
    imaginary part is +0, as a convert makes it)."""
    if np.issubdtype(v.dtype, np.complexfloating):
        return jax.lax.complex(jax.lax.real(v).astype(part), jax.lax.imag(v).astype(part))
    real = v.astype(part)
    return jax.lax.complex(real, jax.lax.full_like(real, 0))


def _lowering_over(primitive, rule):
    """`rule` installed as `primitive`'s lowering for every program in the process; returns the usual
    lowering it falls back to (on a reloaded module, the one before ours, which `rule.usual` keeps)."""
    entry = mlir_internal._lowerings[primitive]
    rule.usual = getattr(entry.rule, "usual", entry.rule)
    mlir.register_lowering(primitive, rule, inline=entry.inline)
    return rule.usual


_usual_convert = _lowering_over(jax.lax.convert_element_type_p, _complex_in_parts)


def _bitcast_through_unsigned(ctx, operand, *, new_dtype, **params):
    """bitcast_convert_type's lowering: float64 -> int64 as a bitcast to uint64 and a convert to int64
    (the same bits: XLA's convert between integers of one width wraps), int64 -> float64 the other way
    round, where the platform miscompiles integer arithmetic on a float64 -> int64 bitcast; the usual
    lowering otherwise."""
    (aval,) = ctx.avals_in
    source, target = np.dtype(aval.dtype), np.dtype(new_dtype)
    pair = {source, target} == {np.dtype(np.float64), np.dtype(np.int64)}
    if pair and fact("int64_bitcasts_miscompile"):
        if source == np.float64:
            body = lambda v: jax.lax.bitcast_convert_type(v, np.uint64).astype(np.int64)
        else:
            body = lambda v: jax.lax.bitcast_convert_type(v.astype(np.uint64), np.float64)
        return mlir.lower_fun(body, False)(ctx, operand)
    return _usual_bitcast(ctx, operand, new_dtype=new_dtype, **params)


_usual_bitcast = _lowering_over(jax.lax.bitcast_convert_type_p, _bitcast_through_unsigned)
