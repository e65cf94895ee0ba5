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

A platform without complex128 (`has("complex128", ...)`, not an op family: the dtype in any program)
gets Python complex numbers into programs as complex64 (toolkit.jitted: `narrowing_complex_numbers`).

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

from jaxdev import dtypes, fallback

F64, C128 = torch.float64, torch.complex128


@dataclasses.dataclass(frozen=True)
class Gap:
    dtypes: frozenset
    status: str  # "confirmed": seen refused on the platform; "suspected": not yet tried there
    evidence: str


def _gap(status: str, evidence: str, dtypes=(F64, C128)) -> Gap:
    return Gap(frozenset(dtypes), status, evidence)


_SUSPECTED = "suspected: a TPU has no float64 hardware; not yet probed (benchmarks/tpu_probe_kernels.py)"

# platform -> op family -> the dtypes XLA has no kernel for there
GAPS: dict[str, dict[str, Gap]] = {
    "tpu": {
        "lu": _gap("confirmed", "UNIMPLEMENTED: Only F32 and C64 types are implemented in LuDecomposition"),
        "fft": _gap("confirmed", "INVALID_ARGUMENT: complex128 FFT (jax-ml/jax#10158: C128 is not supported on TPU)"),
        "cholesky": _gap("suspected", _SUSPECTED),
        "triangular_solve": _gap("suspected", _SUSPECTED),
        "qr": _gap("suspected", _SUSPECTED),
        "svd": _gap("suspected", _SUSPECTED),
        "eigh": _gap("suspected", _SUSPECTED),
        "complex128": _gap(
            "suspected",
            "suspected: pytest aborted in XLA's TPU compiler on tests/ops/test_views.py::test_conj_and_neg_views "
            "(complex64 with Python complex numbers, which enter programs as complex128); jax-ml/jax#10158",
            (C128,),
        ),
        "eig": _gap(
            "suspected",
            "suspected: JAX lowers its nonsymmetric eigendecomposition for CPU and GPU only",
            (torch.float32, F64, torch.complex64, C128),
        ),
    }
}

# gaps of a dtype in any program rather than of an op family
DTYPE_GAPS = frozenset({"complex128"})

_NAMES = {
    "lu": "LU decomposition",
    "fft": "FFT",
    "cholesky": "Cholesky decomposition",
    "triangular_solve": "triangular solve",
    "qr": "QR decomposition",
    "svd": "SVD",
    "eigh": "Hermitian eigendecomposition",
    "eig": "eigendecomposition",
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
        return fallback.run_on_cpu_lacking(op, why, args, kwargs)

    def run(*args, **kwargs):
        dtype = _matrix_dtype(args, kwargs)
        if dtype is not None and not has(family, dtype):
            return on_cpu(dtype, args, kwargs)
        try:
            return kernel(*args, **kwargs)
        except (jax.errors.JaxRuntimeError, NotImplementedError) as error:  # XLA's refusal; JAX's: no lowering
            gap = GAPS.get(platform(), {}).get(family)
            if _ignored or gap is None or dtype not in gap.dtypes or not _refused(error):
                raise
            learned.add((platform(), family, dtype))
            return on_cpu(dtype, args, kwargs)

    run.__qualname__ = getattr(kernel, "__qualname__", "kernel")
    run.__wrapped__ = kernel
    return run


def narrowing_complex_numbers(jit):
    """`jit` whose programs take a Python complex number as complex64, where the platform has no
    complex128 (a Python complex enters a program as a complex128 parameter otherwise). The values
    are those of the number converted inside the program to the complex64 it computes in; only a
    complex128 result (of a number beside a float64 tensor) narrows too, which such a platform
    cannot compute anyway."""
    return lambda body: _NarrowedNumbers(jit(body))


class _NarrowedNumbers:
    """A jitted function (its attributes, lower included, are the wrapped one's) called with Python
    complex numbers as complex64."""

    def __init__(self, compiled):
        self._compiled = compiled

    def __getattr__(self, name):
        return getattr(self._compiled, name)

    @staticmethod
    def _narrowed(args):
        return [np.complex64(a) if type(a) is complex else a for a in args]

    def __call__(self, *args, **kwargs):
        return self._compiled(*self._narrowed(args), **kwargs)

    def lower(self, *args, **kwargs):
        return self._compiled.lower(*self._narrowed(args), **kwargs)
