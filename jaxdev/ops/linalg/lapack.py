"""What the torch.linalg kernels share: CPU's LAPACK conventions, and the pieces that keep them.

Only the primitives are kernels (in decompositions, lu, cholesky, lstsq, ldl and matrix_exp);
PyTorch's composites (linalg.svd, linalg.inv, linalg.det, pinv, matrix_rank, cond, lstsq's
backward, ...) decompose into them, and their derivative formulas call them too. Conventions kept
from CPU PyTorch (LAPACK):

* outputs have CPU's strides: a matrix a LAPACK routine writes is batched column-major. The strides
  come from the op's meta kernel (PyTorch's own shape, stride and argument checks, with its messages):
  `kernel` registers a body, `meta` checks its arguments, `present` lays its results out;
* `info` is LAPACK's, and the non-_ex forms raise CPU's messages through `_linalg_check_errors`
  (`check_info`: a traced check inside compiled programs);
* half precision and integers are refused as CPU refuses them (`meta` raises CPU's own error for a
  dtype outside LAPACK_DTYPES).
"""

from __future__ import annotations

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import torch

from jaxdev import dtypes, tensor, tracing
from jaxdev.ops.kit import J, jitted, out_dtypes
from jaxdev.ops.registry import aten, out_variant, register, store_into

HIGHEST = jax.lax.Precision.HIGHEST
LAPACK_DTYPES = (torch.float32, torch.float64, torch.complex64, torch.complex128)


# --- presenting results as CPU lays them out --------------------------------------------------------


def _twins(args, kwargs, make):
    twin = lambda x: make(x) if isinstance(x, torch.Tensor) else x
    return [twin(a) for a in args], {k: twin(v) for k, v in kwargs.items()}


def meta(op, *args, check_dtype=True, **kwargs):
    """`op` on meta twins of the tensor arguments: PyTorch's checks and its output shapes/strides.

    Where the arguments are invalid (a meta kernel's message may differ from CPU's), or the matrix
    is of a dtype CPU's LAPACK kernels are not built for, the error is CPU's own: the op runs on CPU
    twins (ones, so pivots are valid) and what it raises is raised."""
    as_meta = lambda x: torch.empty_strided(x.shape, x.stride(), dtype=x.dtype, device="meta")
    meta_args, meta_kwargs = _twins(args, kwargs, as_meta)
    try:
        result = op(*meta_args, **meta_kwargs)
    except Exception as meta_error:
        raise (cpu_error(op, args, kwargs) or meta_error) from None
    matrix = next(a for a in (*args, *kwargs.values()) if isinstance(a, torch.Tensor))
    if check_dtype and matrix.dtype not in LAPACK_DTYPES:
        error = cpu_error(op, args, kwargs)
        if error is not None:
            raise error from None
    return result


def cpu_error(op, args, kwargs) -> Exception | None:
    """What CPU raises for these arguments' shapes and dtypes (None if it raises nothing, or only a
    value error: its inputs are ones, not the caller's values)."""
    cpu_args, cpu_kwargs = _twins(args, kwargs, lambda x: torch.ones(x.shape, dtype=x.dtype))
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            op(*cpu_args, **cpu_kwargs)
    except torch.linalg.LinAlgError:
        return None
    except Exception as e:
        return e
    return None


@jitted
def _swap_body():
    return lambda x: jnp.swapaxes(x, -1, -2)


def fortran_strides(shape):
    s = list(tensor.contiguous_strides(shape[:-2] + (shape[-1], shape[-2])))
    s[-1], s[-2] = s[-2], s[-1]
    return tuple(s)


def present(arr: jax.Array, like: torch.Tensor, fortran: bool = False) -> torch.Tensor:
    """`arr` as a jax tensor with the shape and strides of the meta tensor `like` (batched
    column-major where `fortran`: CPU's layout where the meta kernel's differs)."""
    shape, strides = tuple(like.shape), tuple(like.stride())
    if fortran and len(shape) >= 2:
        strides = fortran_strides(shape)
    assert tuple(arr.shape) == shape, (arr.shape, shape)
    if like.numel() <= 1 or strides == tensor.contiguous_strides(shape):
        return tensor.wrap(arr)
    if len(shape) >= 2 and strides == fortran_strides(shape):
        t = tensor.wrap(_swap_body()(arr))
        return tensor.tensor_on_storage(t.untyped_storage(), t.dtype, shape, strides)
    out = tensor.empty(shape, like.dtype, strides)
    tensor.write(out, arr.astype(jax_dtype(like.dtype)))
    return out


# Ops whose CPU out= kernel is not structured: it lays out only an empty out of the result's dtype as the
# result (any other out of another shape is resized contiguous). Structured ones restride any out they resize (resize_out).
_RESTRIDE_EMPTY_ONLY = frozenset(
    {"aten::linalg_eig", "aten::geqrf", "aten::linalg_householder_product", "aten::ormqr", "aten::cholesky_inverse"}
)


def store_out(out: torch.Tensor, result: torch.Tensor, empty_only: bool = False) -> None:
    """`result` written into `out` as CPU's linalg out= kernels write it: an out of another shape is
    resized and takes the result's strides (batched column-major for a matrix LAPACK wrote); an out of
    the right shape keeps its own. `empty_only`: only an empty out of the result's dtype takes them
    (into any other, the result is computed apart and copied into a contiguous resize)."""
    restride = not empty_only or (out.numel() == 0 and out.dtype == result.dtype)
    if (
        restride
        and tuple(out.shape) != tuple(result.shape)
        and tensor.is_jax(out)
        and torch.can_cast(result.dtype, out.dtype)
    ):
        store_into(out, jnp.zeros(tuple(result.shape), jax_dtype(out.dtype)), resize=True)  # resize_output
        if result.numel() > 1 and out.stride() != result.stride():
            out.as_strided_(result.shape, result.stride())
    store_into(out, J(result), resize=True)


def _out_names(op):
    return [a.name for a in op._schema.arguments if a.kwarg_only and a.alias_info is not None and a.alias_info.is_write]


def kernel(op, *, out=True):
    """Register `fn(*args) -> tensor(s)` for `op`, and its out= overload (values written into out)."""

    def deco(fn):
        def functional(*args, **kwargs):
            with tensor.out_of_memory_as_torch():
                return fn(*args, **kwargs)

        functional.__qualname__, functional.__module__ = fn.__qualname__, fn.__module__  # where explain points
        register(op)(functional)
        ov = out_variant(op) if out else None
        if ov is not None:
            names = _out_names(ov)
            empty_only = op.name() in _RESTRIDE_EMPTY_ONLY

            def out_kernel(*args, **kwargs):
                outs = [kwargs.pop(n) for n in names]
                r = functional(*args, **kwargs)
                rs = r if isinstance(r, tuple) else (r,)
                inputs = (*args, *kwargs.values())
                out_dtypes.check(ov.name(), op.name(), outs, rs, inputs, otherwise_exact=True)
                for o, v in zip(outs, rs):
                    store_out(o, v, empty_only)
                return tuple(outs) if len(outs) > 1 else outs[0]

            out_kernel.__qualname__, out_kernel.__module__ = fn.__qualname__ + ".out", fn.__module__
            register(ov)(out_kernel)
        return fn

    return deco


def empty(dtype) -> torch.Tensor:
    return tensor.empty((0,), dtype)


# --- LAPACK's error codes, raised as CPU raises them --------------------------------------------


class _Info:
    """CPU's `_linalg_check_errors` message for an info array (host copy)."""

    @staticmethod
    def error(info: np.ndarray, api: str, is_matrix: bool) -> Exception:
        flat = np.asarray(info).reshape(-1)
        where = int(np.flatnonzero(flat)[0])
        code = int(flat[where])
        batch = "" if is_matrix else f": (Batch element {where})"
        linalg = torch.linalg.LinAlgError
        if code < 0:
            if "svd" in api and code == -4:
                return linalg(
                    f"{api}{batch}: The algorithm failed to converge because the input matrix contained non-finite values."
                )
            return RuntimeError(
                f"{api}{batch}: Argument {-code} has illegal value. Most certainly there is a bug in the "
                "implementation calling the backend library."
            )
        if "inv" in api:
            return linalg(
                f"{api}{batch}: The diagonal element {code} is zero, the inversion could not be completed "
                "because the input matrix is singular."
            )
        if "solve" in api:
            return linalg(f"{api}{batch}: The solver failed because the input matrix is singular.")
        if "cholesky" in api:
            return linalg(
                f"{api}{batch}: The factorization could not be completed because the input is not "
                f"positive-definite (the leading minor of order {code} is not positive-definite)."
            )
        if "svd" in api:
            return linalg(
                f"{api}{batch}: The algorithm failed to converge because the input matrix is ill-conditioned "
                f"or has too many repeated singular values (error code: {code})."
            )
        if "eig" in api or "syevd" in api:
            return linalg(
                f"{api}{batch}: The algorithm failed to converge because the input matrix is ill-conditioned "
                f"or has too many repeated eigenvalues (error code: {code})."
            )
        if "lstsq" in api:
            return linalg(
                f"{api}{batch}: The least squares solution could not be computed because the input matrix "
                f"does not have full rank (error code: {code})."
            )
        if "lu_factor" in api:
            return RuntimeError(
                f"{api}{batch}: U[{code},{code}] is zero and using it on lu_solve would result in a division by "
                "zero. If you still want to perform the factorization, consider calling linalg.lu(A, pivot) or "
                "linalg.lu_factor_ex(A, pivot)"
            )
        return RuntimeError(  # CPU's internal assert, as torch 2.13 words it (ldl_factor's singular D)
            'false INTERNAL ASSERT FAILED at "/__w/pytorch/pytorch/aten/src/ATen/native/BatchLinearAlgebra.cpp":1642, '
            f"please report a bug to PyTorch. {api}: Unknown error code: {code}."
        )


def check_info(info: jax.Array, api: str, is_matrix: bool) -> None:
    if info.size == 0:
        return
    tracing.check_values(info != 0, lambda: _Info.error(np.asarray(info), api, is_matrix))


@register(aten._linalg_check_errors.default)
def linalg_check_errors(info, api_name, *, is_matrix):
    check_info(J(info), api_name, is_matrix)


# --- shared pieces of the bodies ------------------------------------------------------------------


def mT(x):
    return jnp.swapaxes(x, -1, -2)


def mH(x):
    return jnp.conj(mT(x)) if jnp.iscomplexobj(x) else mT(x)


def broadcast_batch(a, b):
    batch = jnp.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    return jnp.broadcast_to(a, batch + a.shape[-2:]), jnp.broadcast_to(b, batch + b.shape[-2:])


def jax_dtype(dtype):

    return dtypes.to_jax_dtype(dtype)
