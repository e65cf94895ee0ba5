"""Matrix decompositions and solvers of torch.linalg (and their legacy torch.* names).

Only the primitives are kernels here; PyTorch's composites (linalg.svd, linalg.inv, linalg.det,
pinv, matrix_rank, cond, lstsq's backward, ...) decompose into them, and their derivative formulas
call them too. Conventions kept from CPU PyTorch (LAPACK):

* outputs have CPU's strides: a matrix a LAPACK routine writes is batched column-major. The strides
  come from the op's meta kernel (PyTorch's own shape, stride and argument checks, with its messages);
* pivots are LAPACK's: int32, 1-based row swaps; `info` is LAPACK's (first zero pivot of an LU, order
  of the first leading minor that is not positive-definite), and the non-_ex forms raise CPU's
  messages through `_linalg_check_errors` (a traced check inside compiled programs);
* det and slogdet factor A^T when A is contiguous and real, as CPU does: their backward formulas
  solve with that LU and its transposition flag;
* half precision and integers are refused as CPU refuses them (matrix_exp computes half in float32).

Eigenvector and singular-vector phases are what the device's LAPACK (or cuSOLVER) gives: on XLA's CPU
the reference-LAPACK routines (OpenBLAS's gauge, which MKL-built PyTorch does not always share),
elsewhere possibly another (PyTorch documents them as not unique). JAX has no Bunch-Kaufman
factorization: LDL is written here as LAPACK's unblocked ?sytf2 / ?sytrs. matrix_exp is PyTorch's own
Taylor scheme; its half-precision inputs run on CPU (CPU's half result overflows; nothing in float32
reproduces it).
"""

from __future__ import annotations

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import torch

from jaxdev import fallback, tensor, tracing
from jaxdev.ops.registry import aten, out_variant, register, store_into
from jaxdev.ops.toolkit import J, jitted

_HI = jax.lax.Precision.HIGHEST
_SUPPORTED = (torch.float32, torch.float64, torch.complex64, torch.complex128)


# --- presenting results as CPU lays them out --------------------------------------------------------


def _twins(args, kwargs, make):
    twin = lambda x: make(x) if isinstance(x, torch.Tensor) else x
    return [twin(a) for a in args], {k: twin(v) for k, v in kwargs.items()}


def _meta(op, *args, check_dtype=True, **kwargs):
    """`op` on meta twins of the tensor arguments: PyTorch's checks and its output shapes/strides.

    Where the arguments are invalid (a meta kernel's message may differ from CPU's), or the matrix
    is of a dtype CPU's LAPACK kernels are not built for, the error is CPU's own: the op runs on CPU
    twins (ones, so pivots are valid) and what it raises is raised."""
    meta = lambda x: torch.empty_strided(x.shape, x.stride(), dtype=x.dtype, device="meta")
    meta_args, meta_kwargs = _twins(args, kwargs, meta)
    try:
        result = op(*meta_args, **meta_kwargs)
    except Exception as meta_error:
        raise (_cpu_error(op, args, kwargs) or meta_error) from None
    matrix = next(a for a in (*args, *kwargs.values()) if isinstance(a, torch.Tensor))
    if check_dtype and matrix.dtype not in _SUPPORTED:
        error = _cpu_error(op, args, kwargs)
        if error is not None:
            raise error from None
    return result


def _cpu_error(op, args, kwargs) -> Exception | None:
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


def _fortran_strides(shape):
    s = list(tensor.contiguous_strides(shape[:-2] + (shape[-1], shape[-2])))
    s[-1], s[-2] = s[-2], s[-1]
    return tuple(s)


def _present(arr: jax.Array, like: torch.Tensor, fortran: bool = False) -> torch.Tensor:
    """`arr` as a jax tensor with the shape and strides of the meta tensor `like` (batched
    column-major where `fortran`: CPU's layout where the meta kernel's differs)."""
    shape, strides = tuple(like.shape), tuple(like.stride())
    if fortran and len(shape) >= 2:
        strides = _fortran_strides(shape)
    assert tuple(arr.shape) == shape, (arr.shape, shape)
    if like.numel() <= 1 or strides == tensor.contiguous_strides(shape):
        return tensor.wrap(arr)
    if len(shape) >= 2 and strides == _fortran_strides(shape):
        t = tensor.wrap(_swap_body()(arr))
        return tensor.tensor_on_storage(t.untyped_storage(), t.dtype, shape, strides)
    out = tensor.empty(shape, like.dtype, strides)
    tensor.write(out, arr.astype(_jdt(like.dtype)))
    return out


def _out_names(op):
    return [a.name for a in op._schema.arguments if a.kwarg_only and a.alias_info is not None and a.alias_info.is_write]


def _kernel(op, *, out=True):
    """Register `fn(*args) -> tensor(s)` for `op`, and its out= overload (values written into out)."""

    def deco(fn):
        def functional(*args, **kwargs):
            with tensor.out_of_memory_as_torch():
                return fn(*args, **kwargs)

        functional.__qualname__ = fn.__qualname__
        register(op)(functional)
        ov = out_variant(op) if out else None
        if ov is not None:
            names = _out_names(ov)

            def out_kernel(*args, **kwargs):
                outs = [kwargs.pop(n) for n in names]
                r = functional(*args, **kwargs)
                rs = r if isinstance(r, tuple) else (r,)
                for o, v in zip(outs, rs):
                    store_into(o, J(v), resize=True)
                return tuple(outs) if len(outs) > 1 else outs[0]

            out_kernel.__qualname__ = fn.__qualname__ + ".out"
            register(ov)(out_kernel)
        return fn

    return deco


def _torch_name(dtype):
    from jaxdev import dtypes

    return dtypes.scalar_name(dtype)


def _empty(dtype) -> torch.Tensor:
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


def _mT(x):
    return jnp.swapaxes(x, -1, -2)


def _mH(x):
    return jnp.conj(_mT(x)) if jnp.iscomplexobj(x) else _mT(x)


def _lu(a):
    """getrf: (LU, 1-based int32 pivots, info, permutation) of a batch of (m, n) matrices."""
    lu, piv, perm = jax.lax.linalg.lu(a)
    k = min(a.shape[-2], a.shape[-1])
    diag = jnp.diagonal(lu, axis1=-2, axis2=-1)
    zero = diag == 0
    first = jnp.argmax(zero, axis=-1)
    info = jnp.where(zero.any(axis=-1), first + 1, 0).astype(jnp.int32) if k else jnp.zeros(a.shape[:-2], jnp.int32)
    return lu, (piv + 1).astype(jnp.int32), info, perm


def _perm_of(pivots, m):
    """LAPACK's 1-based row swaps -> the permutation `perm` with (P^T A) = A[perm]."""
    return jax.lax.linalg.lu_pivots_to_permutation(pivots.astype(jnp.int32) - 1, m)


def _lu_solve(lu, perm, b, adjoint):
    """Solve A X = B (or A^H X = B) with P A' = ... as getrs does: A = P L U, A[perm] = L U."""
    if not adjoint:
        pb = jnp.take_along_axis(b, jnp.broadcast_to(perm[..., None], perm.shape + (b.shape[-1],)), axis=-2)
        y = jax.lax.linalg.triangular_solve(lu, pb, left_side=True, lower=True, unit_diagonal=True)
        return jax.lax.linalg.triangular_solve(lu, y, left_side=True, lower=False)
    conj = jnp.iscomplexobj(lu)
    y = jax.lax.linalg.triangular_solve(lu, b, left_side=True, lower=False, transpose_a=True, conjugate_a=conj)
    x = jax.lax.linalg.triangular_solve(
        lu, y, left_side=True, lower=True, transpose_a=True, conjugate_a=conj, unit_diagonal=True
    )
    inverse = jnp.argsort(perm, axis=-1)
    return jnp.take_along_axis(x, jnp.broadcast_to(inverse[..., None], inverse.shape + (x.shape[-1],)), axis=-2)


def _broadcast_batch(a, b):
    batch = jnp.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    return jnp.broadcast_to(a, batch + a.shape[-2:]), jnp.broadcast_to(b, batch + b.shape[-2:])


# --- SVD and Hermitian eigendecomposition ---------------------------------------------------------


@jitted
def _svd_body(full_matrices, compute_uv, is_matrix):
    def run(a):
        finite = jnp.isfinite(a).all(axis=(-2, -1))
        if compute_uv:
            u, s, vh = jnp.linalg.svd(a, full_matrices=full_matrices)
            return u, s, vh, jnp.where(finite, 0, -4).astype(jnp.int32)
        s = jnp.linalg.svd(a, compute_uv=False)
        return s, jnp.where(finite, 0, -4).astype(jnp.int32)

    return run


@_kernel(aten._linalg_svd.default)
def linalg_svd(A, full_matrices=False, compute_uv=True, *, driver=None):
    mu, ms, mv = _meta(aten._linalg_svd.default, A, full_matrices, compute_uv, driver=driver)
    if driver is not None:
        raise RuntimeError(
            "torch.linalg.svd: keyword argument `driver=` is only supported on CUDA inputs with cuSOLVER backend."
        )
    m, n = A.shape[-2], A.shape[-1]
    if A.numel() == 0:
        eye = lambda k, like: _present(jnp.broadcast_to(jnp.eye(k, dtype=J(A).dtype), like.shape), like)
        s = _present(jnp.zeros(ms.shape, J(A).real.dtype), ms)
        if not compute_uv:
            return _empty(A.dtype), s, _empty(A.dtype)
        u = eye(m, mu) if (full_matrices and mu.numel()) else _present(jnp.zeros(mu.shape, J(A).dtype), mu)
        v = eye(n, mv) if (full_matrices and mv.numel()) else _present(jnp.zeros(mv.shape, J(A).dtype), mv)
        return u, s, v
    body = _svd_body(bool(full_matrices), bool(compute_uv), A.dim() == 2)
    if compute_uv:
        u, s, vh, info = body(J(A))
        check_info(info, "linalg.svd", A.dim() == 2)
        return _present(u, mu), _present(s, ms), _present(vh, mv, fortran=True)
    s, info = body(J(A))
    check_info(info, "linalg.svd", A.dim() == 2)
    return _empty(A.dtype), _present(s, ms), _empty(A.dtype)


@jitted
def _eigh_body(lower):
    def run(a):
        v, w = jax.lax.linalg.eigh(a, lower=lower, symmetrize_input=False)
        return w, v

    return run


@_kernel(aten._linalg_eigh.default)
def linalg_eigh(A, UPLO="L", compute_v=True):
    mw, mv = _meta(aten._linalg_eigh.default, A, UPLO, compute_v)
    if A.numel() == 0:
        w = _present(jnp.zeros(mw.shape, J(A).real.dtype), mw)
        return w, (_present(jnp.zeros(mv.shape, J(A).dtype), mv) if compute_v else _empty(A.dtype))
    w, v = _eigh_body(UPLO.upper() == "L")(J(A))
    return _present(w, mw), (_present(v, mv) if compute_v else _empty(A.dtype))


_COMPLEX = {torch.float32: torch.complex64, torch.float64: torch.complex128}


@jitted
def _eig_body(vectors):
    def run(a):
        finite = jnp.isfinite(a).all()
        if vectors:
            w, v = jnp.linalg.eig(a)
            return w, v, finite
        return jnp.linalg.eigvals(a), finite

    return run


@_kernel(aten.linalg_eig.default)
def linalg_eig(A):
    mw, mv = _meta(aten.linalg_eig.default, A)
    if A.numel() == 0:
        return _present(jnp.zeros(mw.shape, _jdt(mw.dtype)), mw), _present(jnp.zeros(mv.shape, _jdt(mv.dtype)), mv)
    w, v, finite = _eig_body(True)(J(A))
    tracing.check_values(
        ~finite, lambda: RuntimeError("torch.linalg.eig: input tensor should not contain infs or NaNs.")
    )
    return _present(w.astype(_jdt(mw.dtype)), mw), _present(v.astype(_jdt(mv.dtype)), mv, fortran=True)


@_kernel(aten._linalg_eigvals.default, out=False)
def linalg_eigvals(A):
    mw = _meta(aten._linalg_eigvals.default, A)
    if A.numel() == 0:
        return _present(jnp.zeros(mw.shape, _jdt(mw.dtype)), mw)
    w, _ = _eig_body(False)(J(A))
    return _present(w.astype(_jdt(mw.dtype)), mw)


def _jdt(dtype):
    from jaxdev import dtypes

    return dtypes.to_jax_dtype(dtype)


# --- LU: factor, unpack, solve; det, slogdet, solve, inv -----------------------------------------


@jitted
def _lu_factor_body():
    def run(a):
        lu, piv, info, _ = _lu(a)
        return lu, piv, info

    return run


def _no_pivot(pivot, api):
    if not pivot:
        raise RuntimeError(f"{api}: LU without pivoting is not implemented on the CPU")


@_kernel(aten.linalg_lu_factor_ex.default)
def linalg_lu_factor_ex(A, *, pivot=True, check_errors=False):
    mlu, mp, mi = _meta(aten.linalg_lu_factor_ex.default, A, pivot=pivot, check_errors=check_errors)
    _no_pivot(pivot, "linalg.lu_factor")
    if A.numel() == 0:
        return (
            _present(jnp.zeros(mlu.shape, J(A).dtype), mlu),
            _present(jnp.zeros(mp.shape, jnp.int32), mp),
            _present(jnp.zeros(mi.shape, jnp.int32), mi),
        )
    lu, piv, info = _lu_factor_body()(J(A))
    if check_errors:
        check_info(info, "torch.linalg.lu_factor_ex", A.dim() == 2)
    return _present(lu, mlu), _present(piv, mp), _present(info, mi)


@jitted
def _unpack_body(m, n, unpack_data, unpack_pivots):
    k = min(m, n)

    def run(lu, pivots):
        out = []
        if unpack_pivots:
            perm = _perm_of(pivots, m) if k else jnp.broadcast_to(jnp.arange(m), pivots.shape[:-1] + (m,))
            # P[perm[i], i] = 1 makes A = P L U
            out.append(jnp.swapaxes(jax.nn.one_hot(perm, m, dtype=lu.dtype), -1, -2))
        if unpack_data:
            L = jnp.tril(lu[..., :, :k], -1) + jnp.eye(m, k, dtype=lu.dtype)
            U = jnp.triu(lu[..., :k, :])
            out += [L, U]
        return tuple(out)

    return run


def _lu_unpack(LU, pivots, unpack_data, unpack_pivots, metas):
    mp, ml, mu = metas
    m, n = LU.shape[-2], LU.shape[-1]
    arrays = list(_unpack_body(m, n, bool(unpack_data), bool(unpack_pivots))(J(LU), J(pivots)))
    P = _present(arrays.pop(0), mp) if unpack_pivots else _empty(LU.dtype)
    if unpack_data:
        return P, _present(arrays[0], ml), _present(arrays[1], mu)
    return P, _empty(LU.dtype), _empty(LU.dtype)


@_kernel(aten.lu_unpack.default)
def lu_unpack(LU_data, LU_pivots, unpack_data=True, unpack_pivots=True):
    metas = _meta(aten.lu_unpack.default, LU_data, LU_pivots, unpack_data, unpack_pivots, check_dtype=False)
    if unpack_pivots and LU_pivots.numel():
        p, m = J(LU_pivots), LU_data.shape[-2]
        tracing.check_values(
            (p < 1) | (p > m),
            lambda: RuntimeError(
                "pivots passed to lu_unpack must be between 1 and LU.size(-2) inclusive."
                "Did you properly pass the result of lu_factor?"
            ),
        )
    return _lu_unpack(LU_data, LU_pivots, unpack_data, unpack_pivots, metas)


@_kernel(aten.linalg_lu.default)
def linalg_lu(A, *, pivot=True):
    metas = _meta(aten.linalg_lu.default, A, pivot=pivot)
    _no_pivot(pivot, "linalg.lu_factor")
    m, n = A.shape[-2], A.shape[-1]
    if A.numel() == 0:
        lu = J(A)
        piv = jnp.zeros(A.shape[:-2] + (min(m, n),), jnp.int32)
    else:
        lu, piv, _ = _lu_factor_body()(J(A))
    return _lu_unpack(tensor.wrap(lu), tensor.wrap(piv), True, True, metas)


@jitted
def _lu_solve_body(left, adjoint):
    def run(lu, pivots, b):
        if not left:  # X A = B  <=>  A^H X^H = B^H
            return _mH(run_left(lu, pivots, _mH(b), not adjoint))
        return run_left(lu, pivots, b, adjoint)

    def run_left(lu, pivots, b, adj):
        lu, b = _broadcast_batch(lu, b)
        pivots = jnp.broadcast_to(pivots, lu.shape[:-1])
        return _lu_solve(lu, _perm_of(pivots, lu.shape[-1]), b, adj)

    return run


@_kernel(aten.linalg_lu_solve.default)
def linalg_lu_solve(LU, pivots, B, *, left=True, adjoint=False):
    mx = _meta(aten.linalg_lu_solve.default, LU, pivots, B, left=left, adjoint=adjoint)
    if mx.numel() == 0:
        return _present(jnp.zeros(mx.shape, J(B).dtype), mx)
    p, m = J(pivots), LU.shape[-2]
    for bad, what in ((p < 1, "greater or equal to 1"), (p > m, "smaller or equal to LU.size(-2)")):
        tracing.check_values(
            bad,
            lambda what=what: RuntimeError(
                f"Pivots given to lu_solve must all be {what}. Did you properly pass the result of lu_factor?"
            ),
        )
    return _present(_lu_solve_body(bool(left), bool(adjoint))(J(LU), p, J(B)), mx)


def _use_transpose(A) -> bool:
    """CPU's det and slogdet factor A^T when A is contiguous and real (their backward knows; solve,
    in this PyTorch, factors A itself)."""
    return A.is_contiguous() and not A.is_complex()


@jitted
def _det_body(transposed, log):
    def run(a):
        lu, piv, _, _ = _lu(_mT(a) if transposed else a)
        diag = jnp.diagonal(lu, axis1=-2, axis2=-1)
        swaps = jnp.sum(piv != jnp.arange(1, piv.shape[-1] + 1, dtype=piv.dtype), axis=-1)
        parity = jnp.where(swaps % 2 == 1, -1, 1).astype(a.dtype)
        if not log:
            return jnp.prod(diag, axis=-1) * parity, lu, piv
        mag = jnp.abs(diag)
        unit = jnp.where(mag == 0, jnp.zeros((), a.dtype), diag / jnp.where(mag == 0, 1, mag).astype(a.dtype))
        sign = jnp.prod(unit, axis=-1) * parity
        return sign, jnp.sum(jnp.log(mag), axis=-1), lu, piv

    return run


@_kernel(aten._linalg_det.default)
def linalg_det(A):
    md, mlu, mp = _meta(aten._linalg_det.default, A)
    if A.numel() == 0:
        return (
            _present(jnp.ones(md.shape, J(A).dtype), md),
            _present(jnp.zeros(mlu.shape, J(A).dtype), mlu),
            _present(jnp.zeros(mp.shape, jnp.int32), mp),
        )
    d, lu, piv = _det_body(_use_transpose(A), False)(J(A))
    return _present(d, md), _present(lu, mlu), _present(piv, mp)


@_kernel(aten._linalg_slogdet.default)
def linalg_slogdet(A):
    ms, ml, mlu, mp = _meta(aten._linalg_slogdet.default, A)
    if A.numel() == 0:
        return (
            _present(jnp.ones(ms.shape, J(A).dtype), ms),
            _present(jnp.zeros(ml.shape, J(A).real.dtype), ml),
            _present(jnp.zeros(mlu.shape, J(A).dtype), mlu),
            _present(jnp.zeros(mp.shape, jnp.int32), mp),
        )
    s, logabs, lu, piv = _det_body(_use_transpose(A), True)(J(A))
    return _present(s, ms), _present(logabs, ml), _present(lu, mlu), _present(piv, mp)


@jitted
def _solve_body(transposed, left, vector):
    def run(a, b):
        lu, piv, info, perm = _lu(_mT(a) if transposed else a)
        rhs = b[..., None] if vector else b
        if left:
            lu_b, rhs = _broadcast_batch(lu, rhs)
            perm_b = jnp.broadcast_to(perm, lu_b.shape[:-1])
            x = _lu_solve(lu_b, perm_b, rhs, transposed)
        else:
            lu_b, rhs_h = _broadcast_batch(lu, _mH(rhs))
            perm_b = jnp.broadcast_to(perm, lu_b.shape[:-1])
            x = _mH(_lu_solve(lu_b, perm_b, rhs_h, not transposed))
        return (x[..., 0] if vector else x), lu, piv, info

    return run


def _solve(A, B, left, check_errors, api, metas):
    mx, mlu, mp, mi = metas
    if A.numel() == 0 or B.numel() == 0:
        lu, piv, info = (
            (jnp.zeros(mlu.shape, J(A).dtype), jnp.zeros(mp.shape, jnp.int32), jnp.zeros(mi.shape, jnp.int32))
            if A.numel() == 0
            else _lu_factor_body()(J(A))
        )
        x = jnp.zeros(mx.shape, J(B).dtype)
    else:
        vector = B.dim() == 1 or (A.dim() - 1 == B.dim() and tuple(B.shape) == tuple(A.shape[:-1]))
        x, lu, piv, info = _solve_body(False, bool(left), vector)(J(A), J(B))
    if check_errors:
        check_info(info, api, A.dim() == 2)
    return _present(x, mx), _present(lu, mlu), _present(piv, mp), _present(info, mi)


@_kernel(aten._linalg_solve_ex.default)
def linalg_solve_ex(A, B, *, left=True, check_errors=False):
    metas = _meta(aten._linalg_solve_ex.default, A, B, left=left, check_errors=check_errors)
    return _solve(A, B, left, check_errors, "torch.linalg.solve_ex", metas)


@jitted
def _inv_body():
    def run(a):
        lu, _, info, perm = _lu(a)
        eye = jnp.broadcast_to(jnp.eye(a.shape[-1], dtype=a.dtype), a.shape)
        return _lu_solve(lu, perm, eye, False), info

    return run


@_kernel(aten.linalg_inv_ex.default)
def linalg_inv_ex(A, *, check_errors=False):
    """CPU solves A X = I with the LU of A (linalg_solve_ex), its info included."""
    mi, minfo = _meta(aten.linalg_inv_ex.default, A, check_errors=check_errors)
    if A.numel() == 0:
        return _present(jnp.zeros(mi.shape, J(A).dtype), mi), _present(jnp.zeros(minfo.shape, jnp.int32), minfo)
    x, info = _inv_body()(J(A))
    if check_errors:
        check_info(info, "linalg.inv_ex", A.dim() == 2)
    return _present(x, mi), _present(info, minfo)


# --- Cholesky ---------------------------------------------------------------------------------------


def _potf2(a):
    """LAPACK's unblocked Cholesky (lower) of tril(a), stopping at the first non-positive pivot:
    (partial L as potf2 leaves it, info). Runs only where the fast factorization failed."""
    n = a.shape[-1]
    idx = jnp.arange(n)

    def step(j, state):
        L, info = state
        active = info == 0
        row = jnp.where(idx < j, L[..., j, :], 0)
        ajj = jnp.real(L[..., j, j]) - jnp.sum(jnp.abs(row) ** 2, axis=-1)
        bad = active & ~(ajj > 0)
        ljj = jnp.sqrt(jnp.where(bad, 1, ajj))
        below = L[..., :, j] - jnp.einsum("...ik,...k->...i", jnp.where(idx < j, L, 0), jnp.conj(row), precision=_HI)
        col = jnp.where((idx > j) & ~bad[..., None], below / ljj[..., None].astype(L.dtype), L[..., :, j])
        col = jnp.where(idx == j, jnp.where(bad, ajj, ljj)[..., None].astype(L.dtype), col)
        L = jnp.where(active[..., None, None] & (idx == j), col[..., :, None], L)
        return L, jnp.where(bad, j + 1, info).astype(jnp.int32)

    return jax.lax.fori_loop(0, n, step, (jnp.tril(a), jnp.zeros(a.shape[:-2], jnp.int32)))


def _cholesky_lower(a):
    """(L, info) of the lower triangle of `a`, LAPACK's potrf."""
    L = jax.lax.linalg.cholesky(a, symmetrize_input=False)
    failed = ~jnp.isfinite(L).all(axis=(-2, -1))
    slow_L, slow_info = jax.lax.cond(
        failed.any(), _potf2, lambda x: (jnp.zeros_like(x), jnp.zeros(x.shape[:-2], jnp.int32)), a
    )
    return jnp.where(failed[..., None, None], slow_L, jnp.tril(L)), jnp.where(failed, slow_info, 0)


def _upper_as_lower(a):
    return _mH(jnp.triu(a))  # the Hermitian matrix the upper triangle stands for, as a lower one


@jitted
def _cholesky_body(upper):
    def run(a):
        L, info = _cholesky_lower(_upper_as_lower(a) if upper else a)
        return (_mH(L) if upper else L), info

    return run


@_kernel(aten.linalg_cholesky_ex.default)
def linalg_cholesky_ex(A, *, upper=False, check_errors=False):
    ml, mi = _meta(aten.linalg_cholesky_ex.default, A, upper=upper, check_errors=check_errors)
    if A.numel() == 0:
        return _present(jnp.zeros(ml.shape, J(A).dtype), ml), _present(jnp.zeros(mi.shape, jnp.int32), mi)
    L, info = _cholesky_body(bool(upper))(J(A))
    if check_errors:
        check_info(info, "linalg.cholesky_ex", A.dim() == 2)
    return _present(L, ml), _present(info, mi)


@_kernel(aten.cholesky.default)
def cholesky(self, upper=False):
    ml = _meta(aten.cholesky.default, self, upper)
    if self.numel() == 0:
        return tensor.wrap(jnp.zeros(tuple(self.shape), J(self).dtype))
    L, info = _cholesky_body(bool(upper))(J(self))
    check_info(info, "cholesky", self.dim() == 2)
    return _present(L, ml, fortran=True)


@jitted
def _cholesky_inverse_body(upper):
    def run(f):
        # A = L L^H (or U^H U): A^{-1} from the factor's own triangle, as potri reads it
        L = _mH(jnp.triu(f)) if upper else jnp.tril(f)
        n = f.shape[-1]
        eye = jnp.broadcast_to(jnp.eye(n, dtype=f.dtype), f.shape)
        y = jax.lax.linalg.triangular_solve(L, eye, left_side=True, lower=True)
        inv = jax.lax.linalg.triangular_solve(L, y, left_side=True, lower=True, transpose_a=True, conjugate_a=True)
        diag = jnp.diagonal(f, axis1=-2, axis2=-1) == 0
        info = jnp.where(diag.any(axis=-1), jnp.argmax(diag, axis=-1) + 1, 0).astype(jnp.int32)
        return inv, info

    return run


@_kernel(aten.cholesky_inverse.default)
def cholesky_inverse(self, upper=False):
    mr = _meta(aten.cholesky_inverse.default, self, upper)
    if self.numel() == 0:
        return _present(jnp.zeros(mr.shape, J(self).dtype), mr)
    inv, info = _cholesky_inverse_body(bool(upper))(J(self))
    check_info(info, "cholesky_inverse", self.dim() == 2)
    return _present(inv, mr, fortran=True)


@jitted
def _cholesky_solve_body(upper):
    def run(b, f):
        L = _mH(jnp.triu(f)) if upper else jnp.tril(f)
        y = jax.lax.linalg.triangular_solve(L, b, left_side=True, lower=True)
        return jax.lax.linalg.triangular_solve(L, y, left_side=True, lower=True, transpose_a=True, conjugate_a=True)

    return run


@_kernel(aten._cholesky_solve_helper.default)
def cholesky_solve_helper(self, A, upper):
    mx = _meta(aten._cholesky_solve_helper.default, self, A, upper)
    if mx.numel() == 0:
        return _present(jnp.zeros(mx.shape, J(self).dtype), mx, fortran=True)
    return _present(_cholesky_solve_body(bool(upper))(J(self), J(A)), mx, fortran=True)


# --- triangular solves --------------------------------------------------------------------------------


@jitted
def _triangular_body(upper, left, unit, transpose):
    def run(a, b):
        a, b = _broadcast_batch(a, b)
        a = jnp.triu(a) if upper else jnp.tril(a)
        x = jax.lax.linalg.triangular_solve(
            a, b, left_side=left, lower=not upper, transpose_a=transpose, unit_diagonal=unit
        )
        return x, a

    return run


@_kernel(aten.linalg_solve_triangular.default)
def linalg_solve_triangular(self, B, *, upper, left=True, unitriangular=False):
    mx = _meta(aten.linalg_solve_triangular.default, self, B, upper=upper, left=left, unitriangular=unitriangular)
    if mx.numel() == 0:
        return _present(jnp.zeros(mx.shape, J(B).dtype), mx, fortran=True)
    x, _ = _triangular_body(bool(upper), bool(left), bool(unitriangular), False)(J(self), J(B))
    return _present(x, mx, fortran=True)


@jitted
def _clone_coefficient_body():
    def run(a, b):
        return _broadcast_batch(a, b)[0]

    return run


@_kernel(aten.triangular_solve.default)
def triangular_solve(self, A, upper=True, transpose=False, unitriangular=False):
    mx, ma = _meta(aten.triangular_solve.default, self, A, upper, transpose, unitriangular)
    if mx.numel() == 0 or ma.numel() == 0:
        coefficient = _clone_coefficient_body()(J(A), J(self)) if ma.numel() else jnp.zeros(ma.shape, J(A).dtype)
        return _present(jnp.zeros(mx.shape, J(self).dtype), mx, True), _present(coefficient, ma, True)
    x, _ = _triangular_body(bool(upper), True, bool(unitriangular), bool(transpose))(J(A), J(self))
    coefficient = _clone_coefficient_body()(J(A), J(self))
    return _present(x, mx, fortran=True), _present(coefficient, ma, fortran=True)


# --- QR and Householder products ----------------------------------------------------------------


@jitted
def _qr_body(mode):
    def run(a):
        if mode == "r":
            return jnp.linalg.qr(a, mode="r")
        return jnp.linalg.qr(a, mode=mode)

    return run


@_kernel(aten.linalg_qr.default)
def linalg_qr(A, mode="reduced"):
    mq, mr = _meta(aten.linalg_qr.default, A, mode)
    if A.numel() == 0:
        m = A.shape[-2]
        q = jnp.broadcast_to(jnp.eye(m, mq.shape[-1], dtype=J(A).dtype), mq.shape) if mq.numel() else None
        q = _present(q, mq) if q is not None else _present(jnp.zeros(mq.shape, J(A).dtype), mq)
        return q, _present(jnp.zeros(mr.shape, J(A).dtype), mr)
    if mode == "r":
        return _empty(A.dtype), _present(_qr_body("r")(J(A)), mr)
    q, r = _qr_body(mode)(J(A))
    return _present(q, mq), _present(r, mr)


@jitted
def _geqrf_body():
    def run(a):
        h, tau = jnp.linalg.qr(a, mode="raw")  # LAPACK's geqrf, its reflectors transposed
        return _mT(h), tau

    return run


@_kernel(aten.geqrf.default)
def geqrf(self):
    if self.dim() < 2 or self.dtype not in _SUPPORTED:
        raise _cpu_error(aten.geqrf.default, (self,), {}) or RuntimeError("geqrf: unsupported input")
    shape = tuple(self.shape)
    k = min(shape[-2], shape[-1])
    ma = torch.empty_strided(shape, _fortran_strides(shape), dtype=self.dtype, device="meta")
    mt = torch.empty(shape[:-2] + (k,), dtype=self.dtype, device="meta")
    if self.numel() == 0:
        return _present(jnp.zeros(shape, J(self).dtype), ma), _present(jnp.zeros(mt.shape, J(self).dtype), mt)
    a, tau = _geqrf_body()(J(self))
    return _present(a, ma), _present(tau, mt)


@jitted
def _householder_body():
    return lambda a, tau: jax.lax.linalg.householder_product(a, tau)


@_kernel(aten.linalg_householder_product.default)
def linalg_householder_product(input, tau):
    mq = _meta(aten.linalg_householder_product.default, input, tau)
    if input.numel() == 0:
        return _present(jnp.zeros(mq.shape, J(input).dtype), mq, fortran=True)
    if tau.shape[-1] == 0:  # no reflectors: the first n columns of the identity
        eye = jnp.broadcast_to(jnp.eye(input.shape[-2], input.shape[-1], dtype=J(input).dtype), mq.shape)
        return _present(eye, mq, fortran=True)
    return _present(_householder_body()(J(input), J(tau)), mq, fortran=True)


@jitted
def _ormqr_body(left, transpose):
    def run(a, tau, c):
        batch = jnp.broadcast_shapes(a.shape[:-2], tau.shape[:-1], c.shape[:-2])
        a = jnp.broadcast_to(a, batch + a.shape[-2:])
        return jax.lax.linalg.ormqr(a, jnp.broadcast_to(tau, batch + tau.shape[-1:]), c, left=left, transpose=transpose)

    return run


@_kernel(aten.ormqr.default)
def ormqr(self, input2, input3, left=True, transpose=False):
    mc = _meta(aten.ormqr.default, self, input2, input3, left, transpose)
    if mc.numel() == 0 or self.shape[-2] == 0:
        return _present(jnp.zeros(mc.shape, J(input3).dtype) + J(input3), mc, fortran=True)
    return _present(_ormqr_body(bool(left), bool(transpose))(J(self), J(input2), J(input3)), mc, fortran=True)


# --- matrix exponential -----------------------------------------------------------------------------


# PyTorch's algorithm (Bader, Blanes, Casas 2019: optimized Taylor polynomials of degree 1, 2, 4, 8,
# 12 and 18, picked by the 1-norm, scaling and squaring past the last), evaluated in the same order:
# a Pade approximant (jax.scipy.linalg.expm) lands 1e-4 (relative) away in float32.
_THETAS = {
    4: (
        1.192092800768788e-07,
        5.978858893805233e-04,
        5.116619363445086e-02,
        5.800524627688768e-01,
        1.461661507209034e00,
        3.010066362817634e00,
    ),
    8: (
        2.220446049250313e-16,
        2.580956802971767e-08,
        3.397168839976962e-04,
        4.991228871115323e-02,
        2.996158913811580e-01,
        1.090863719290036e00,
    ),
}
_B12 = (
    (9.0198e-16, 0.46932117595418237389, -0.20099424927047284052, -0.04623946134063071740),
    (5.31597895759871264183, 1.19926790417132231573, 0.01179296240992997031, 0.01108844528519167989),
    (0.18188869982170434744, 0.05502798439925399070, 0.09351590770535414968, 0.00610700528898058230),
    (-2.0861320e-13, -0.13181061013830184015, -0.02027855540589259079, -0.00675951846863086359),
)
_B18 = (
    (0.0, -1.00365581030144618291e-01, -8.02924648241156932449e-03, -8.92138498045729985177e-04, 0.0),
    (
        0.0,
        3.97849749499645077844e-01,
        1.36783778460411720168e00,
        4.98289622525382669416e-01,
        -6.37898194594723280150e-04,
    ),
    (
        -1.09676396052962061844e01,
        1.68015813878906206114e00,
        5.71779846478865511061e-02,
        -6.98210122488052056106e-03,
        3.34975017086070470649e-05,
    ),
    (
        -9.04316832390810593223e-02,
        -6.76404519071381882256e-02,
        6.75961301770459654925e-02,
        2.95552570429315521194e-02,
        -1.39180257516060693404e-05,
    ),
    (0.0, 0.0, -9.23364619367118555360e-02, -1.69364939002081722752e-02, -1.40086798182036094347e-05),
)


def _mm(a, b):
    return jnp.matmul(a, b, precision=_HI)


def _combine(mats, coefficients):
    """sum_j c_j * M_j, in j order (ATen's _compute_linear_combination)."""
    real = mats[0].real.dtype
    acc = jnp.asarray(coefficients[0], real) * mats[0]
    for c, m in zip(coefficients[1:], mats[1:]):
        acc = acc + jnp.asarray(c, real) * m
    return acc


def _taylor(a, degree):
    eye = jnp.broadcast_to(jnp.eye(a.shape[-1], dtype=a.dtype), a.shape)
    if degree == 1:
        return eye + a
    a2 = _mm(a, a)
    if degree == 2:
        return eye + a + a2 / jnp.asarray(2.0, a.real.dtype)
    if degree == 4:
        x = _mm(a2, _combine((eye, a, a2), (1 / 2.0, 1 / 6.0, 1 / 24.0)))
        return _combine((eye, a, a2, x), (1.0, 1.0, 0.0, 1.0))
    if degree == 8:
        sqrt_177 = 0.1330413469565007072504e2
        x3 = 2.0 / 3.0
        x1, x2 = x3 * ((1.0 + sqrt_177) / 88.0), x3 * ((1.0 + sqrt_177) / 352.0)
        x4 = (-271.0 + 29.0 * sqrt_177) / (315.0 * x3)
        x5 = (-11.0 + 11.0 * sqrt_177) / (1260.0 * x3)
        x6 = (-99.0 + 11.0 * sqrt_177) / (5040.0 * x3)
        x7 = (89.0 - sqrt_177) / (5040.0 * x3)
        y2 = (857.0 - 58.0 * sqrt_177) / 630.0
        a4 = _mm(a2, _combine((a, a2), (x1, x2)))
        a8 = _mm(_combine((a2, a4), (x3, 1.0)), _combine((eye, a, a2, a4), (x4, x5, x6, x7)))
        return _combine((eye, a, a2, a4, a8), (1.0, 1.0, y2, 0.0, 1.0))
    a3 = _mm(a, a2)
    if degree == 12:
        bs = [_combine((eye, a, a2, a3), row) for row in _B12]
        a6 = bs[2] + _mm(bs[3], bs[3])
        return bs[0] + _mm(bs[1] + a6, a6)
    a6 = _mm(a3, a3)
    bs = [_combine((eye, a, a2, a3, a6), row) for row in _B18]
    a9 = bs[3] + _mm(bs[0], bs[4])
    return bs[1] + _mm(bs[2] + a9, a9)


@jitted
def _expm_body():
    def run(a):
        thetas = _THETAS[a.real.dtype.itemsize]
        norm = jnp.max(jnp.sum(jnp.abs(a), axis=-2), axis=-1)  # the 1-norm, as a.real's dtype
        theta = lambda t: jnp.asarray(t, norm.dtype)
        # the last interval scales by 2^s and squares s times (s per matrix: a bounded loop)
        s = jnp.maximum(0, jnp.ceil(jnp.log2(norm / theta(thetas[5])))).astype(jnp.int64)
        s = jnp.where(norm >= theta(thetas[4]), s, 0)
        scaled = a / jnp.exp2(s.astype(norm.dtype))[..., None, None].astype(a.dtype)
        result = _taylor(jnp.where((norm >= theta(thetas[4]))[..., None, None], scaled, a), 18)
        result = jax.lax.fori_loop(
            0,
            jnp.max(jnp.where(jnp.isfinite(norm), s, 0), initial=0),
            lambda p, m: jnp.where((p < s)[..., None, None], _mm(m, m), m),
            result,
        )
        result = jnp.where((norm >= theta(thetas[4]))[..., None, None], result, jnp.nan)
        lower = -1.0
        for degree, upper in zip((1, 2, 4, 8, 12), thetas[:5]):
            inside = (theta(lower) < norm) & (norm <= theta(upper))
            result = jnp.where(inside[..., None, None], _taylor(a, degree), result)
            lower = upper
        return result

    return run


@_kernel(aten.linalg_matrix_exp.default)
def linalg_matrix_exp(self):
    me = _meta(aten.linalg_matrix_exp.default, self, check_dtype=self.dtype not in (torch.float16, torch.bfloat16))
    if self.dtype in (torch.float16, torch.bfloat16):
        # CPU evaluates its degree-18 Taylor/Pade scheme in half precision, whose coefficients
        # overflow (NaN or inf for most inputs): no float32 computation reproduces that, so half
        # inputs go to CPU's own kernel.
        return fallback.run_on_cpu(aten.linalg_matrix_exp.default, self)
    if self.dtype not in _SUPPORTED:
        raise NotImplementedError(f"\"linalg_matrix_exp\" not implemented for '{_torch_name(self.dtype)}'")
    if self.numel() == 0:
        return _present(jnp.zeros(me.shape, J(self).dtype), me)
    if self.shape[-1] == 1:
        return _present(_exp_body()(J(self)), me)
    return _present(_expm_body()(J(self)), me)


@jitted
def _exp_body():
    return jnp.exp


# --- least squares ----------------------------------------------------------------------------------

_DRIVERS = ("gels", "gelsy", "gelsd", "gelss")


@jitted
def _lstsq_body(rcond, driver, vector, residuals):
    def run(a, b):
        rhs = b[..., None] if vector else b
        a, rhs = _broadcast_batch(a, rhs)
        u, s, vh = jnp.linalg.svd(a, full_matrices=False)
        cutoff = rcond * s[..., :1]
        keep = s > cutoff
        rank = jnp.sum(keep, axis=-1).astype(jnp.int64)
        inv = jnp.where(keep, 1 / jnp.where(keep, s, 1), 0).astype(a.dtype)
        x = jnp.matmul(_mH(vh), inv[..., :, None] * jnp.matmul(_mH(u), rhs, precision=_HI), precision=_HI)
        out = [x[..., 0] if vector else x, rank, s]
        if residuals:
            r = jnp.sum(jnp.abs(jnp.matmul(a, x, precision=_HI) - rhs) ** 2, axis=-2)
            out.append(r)
        return tuple(out)

    return run


@_kernel(aten.linalg_lstsq.default)
def linalg_lstsq(self, b, rcond=None, *, driver=None):
    vector = b.dim() == self.dim() - 1
    if (
        (driver is not None and driver not in _DRIVERS)
        or self.dim() < 2
        or self.dtype != b.dtype
        or self.dtype not in _SUPPORTED
        or b.dim() not in (self.dim(), self.dim() - 1)
        or b.shape[-2 + vector] != self.shape[-2]
    ):
        args = (self, b, rcond)
        raise _cpu_error(aten.linalg_lstsq.default, args, {"driver": driver}) or RuntimeError("lstsq: bad input")
    driver = driver or "gelsy"
    m, n = self.shape[-2], self.shape[-1]
    real = J(self).real.dtype
    eps = float(jnp.finfo(real).eps)
    rc = float(rcond) if rcond is not None and rcond > 0 else eps * max(m, n)
    want_residuals = m > n and driver != "gelsy"
    x, rank, s, *res = _lstsq_body(rc, driver, vector, want_residuals)(J(self), J(b))
    solution = _lstsq_solution(x, m, n, vector)
    residuals = _empty(torch.float64 if real == jnp.float64 else torch.float32)
    if want_residuals:
        # CPU gives the residuals only when every matrix has full rank: a shape that depends on values
        if tracing.is_traced(rank):
            raise RuntimeError(
                "torch.linalg.lstsq: the residuals' shape depends on the rank of the input, which a compiled "
                "program does not know; use driver='gelsy' or run it eagerly"
            )
        if bool(jnp.all(rank == n)):
            residuals = tensor.wrap(res[0])
    rank_t = tensor.wrap(rank) if driver != "gels" else tensor.empty((0,), torch.int64)
    sv = tensor.wrap(s) if driver in ("gelsd", "gelss") else _empty(residuals.dtype)
    return solution, residuals, rank_t, sv


def _lstsq_solution(x, m, n, vector):
    """CPU's solution is the first n rows of a column-major (max(m, n), k) buffer."""
    if vector:
        return tensor.wrap(x)
    rows = max(m, n)
    padded = jnp.zeros(x.shape[:-2] + (x.shape[-1], rows), x.dtype).at[..., :n].set(_mT(x))
    t = tensor.wrap(padded)
    shape = x.shape
    strides = list(t.stride())
    strides[-1], strides[-2] = strides[-2], strides[-1]
    return tensor.tensor_on_storage(t.untyped_storage(), t.dtype, tuple(shape), tuple(strides))


# --- LDL^T / LDL^H (Bunch-Kaufman) -----------------------------------------------------------------
# JAX has no sytrf: this is LAPACK's unblocked ?sytf2 / ?hetf2 (lower), the routine ?sytrf runs for
# the matrices it does not block (n <= 64), step for step: the same pivot decisions, the same
# interchanges and updates, so LD and pivots are LAPACK's (to rounding) and ldl_solve follows ?sytrs.

_ALPHA = (1.0 + 17.0**0.5) / 8.0


def _cabs1(x):
    return jnp.abs(x.real) + jnp.abs(x.imag) if jnp.iscomplexobj(x) else jnp.abs(x)


def _sytf2(a, hermitian):
    """One matrix: (LD, 1-based pivots, info) of tril(a)."""
    n = a.shape[-1]
    idx = jnp.arange(n)
    herm = hermitian and jnp.iscomplexobj(a)
    conj = jnp.conj if herm else (lambda x: x)
    real = a.real.dtype
    diag_abs = (lambda x: jnp.abs(x.real)) if herm else _cabs1
    lower = idx[:, None] >= idx[None, :]

    def swap_rows_cols(A, kk, kp, k, kstep):
        """The symmetric interchange of kk and kp in the trailing lower triangle."""
        ckk, ckp = A[:, kk], A[:, kp]
        below = idx > kp
        A = A.at[:, kk].set(jnp.where(below, ckp, ckk)).at[:, kp].set(jnp.where(below, ckk, ckp))
        # A(j, kk) <-> A(kp, j) for kk < j < kp (conjugated when Hermitian)
        mid = (idx > kk) & (idx < kp)
        col, row = A[:, kk], A[kp, :]
        A = A.at[:, kk].set(jnp.where(mid, conj(row), col)).at[kp, :].set(jnp.where(mid, conj(col), row))
        if herm:
            A = A.at[kp, kk].set(jnp.conj(A[kp, kk]))
        dkk, dkp = A[kk, kk], A[kp, kp]
        A = A.at[kk, kk].set(dkp).at[kp, kp].set(dkk)
        t1, t2 = A[k + 1, k], A[kp, k]
        two = kstep == 2
        A = A.at[k + 1, k].set(jnp.where(two, t2, t1)).at[kp, k].set(jnp.where(two, t1, t2))
        return A

    def step(state):
        A, piv, info, k = state
        col = A[:, k]
        absakk = diag_abs(A[k, k])
        colabs = jnp.where(idx > k, _cabs1(col), -1)
        imax = jnp.argmax(colabs)
        colmax = jnp.where(k < n - 1, colabs[imax], 0).astype(real)
        singular = (jnp.maximum(absakk, colmax) == 0) | jnp.isnan(absakk)
        rowabs = jnp.where((idx >= k) & (idx < imax), _cabs1(A[imax, :]), -1)
        colabs2 = jnp.where(idx > imax, _cabs1(A[:, imax]), -1)
        rowmax = jnp.maximum(jnp.max(rowabs), jnp.max(colabs2)).astype(real)
        c1 = absakk >= _ALPHA * colmax
        c2 = absakk >= _ALPHA * colmax * (colmax / rowmax)
        c3 = diag_abs(A[imax, imax]) >= _ALPHA * rowmax
        keep = singular | c1 | c2
        kp = jnp.where(keep, k, imax).astype(jnp.int32)
        kstep = jnp.where(keep | c3, 1, 2)
        kk = k + kstep - 1
        swapped = jax.lax.cond(~singular & (kp != kk), lambda X: swap_rows_cols(X, kk, kp, k, kstep), lambda X: X, A)
        if herm:  # the pivot block's diagonal is real
            swapped = swapped.at[k, k].set(swapped[k, k].real.astype(a.dtype))
            swapped = swapped.at[kk, kk].set(swapped[kk, kk].real.astype(a.dtype))
        updated = jax.lax.cond(kstep == 1, lambda X: one(X, k), lambda X: two(X, k), swapped)
        A = jnp.where(singular, A, updated)
        info = jnp.where(singular & (info == 0), k + 1, info)
        piv = jnp.where(kstep == 1, piv.at[k].set(kp + 1), piv.at[k].set(-(kp + 1)).at[k + 1].set(-(kp + 1)))
        return A, piv, info, k + kstep

    def one(A, k):
        x = jnp.where(idx > k, A[:, k], 0)
        d = A[k, k].real if herm else A[k, k]
        r1 = (1 / d).astype(a.dtype)
        trailing = (idx[:, None] > k) & (idx[None, :] > k) & lower
        A = jnp.where(trailing, A - r1 * x[:, None] * conj(x)[None, :], A)
        if herm:
            A = jnp.where((idx[:, None] == idx[None, :]) & trailing, A.real.astype(a.dtype), A)
        return A.at[:, k].set(jnp.where(idx > k, x * r1, A[:, k]))

    def two(A, k):
        ck, ck1 = A[:, k], A[:, k + 1]
        if herm:
            d = jnp.abs(A[k + 1, k])
            d11 = A[k + 1, k + 1].real / d
            d22 = A[k, k].real / d
            tt = 1 / (d11 * d22 - 1)
            d21 = A[k + 1, k] / d
            dd = tt / d
            wk = dd * (d11 * ck - d21 * ck1)
            wkp1 = dd * (d22 * ck1 - jnp.conj(d21) * ck)
        else:
            d21 = A[k + 1, k]
            d11 = A[k + 1, k + 1] / d21
            d22 = A[k, k] / d21
            t = 1 / (d11 * d22 - 1)
            d21 = t / d21
            wk = d21 * (d11 * ck - ck1)
            wkp1 = d21 * (d22 * ck1 - ck)
        rows = idx > k + 1
        wk, wkp1 = jnp.where(rows, wk, 0), jnp.where(rows, wkp1, 0)
        trailing = (idx[:, None] > k + 1) & (idx[None, :] > k + 1) & lower
        update = ck[:, None] * conj(wk)[None, :] + ck1[:, None] * conj(wkp1)[None, :]
        A = jnp.where(trailing, A - update, A)
        if herm:
            A = jnp.where((idx[:, None] == idx[None, :]) & trailing, A.real.astype(a.dtype), A)
        return A.at[:, k].set(jnp.where(rows, wk, ck)).at[:, k + 1].set(jnp.where(rows, wkp1, ck1))

    state = (jnp.tril(a), jnp.zeros(n, jnp.int32), jnp.zeros((), jnp.int32), jnp.zeros((), jnp.int32))
    A, piv, info, _ = jax.lax.while_loop(lambda s: s[3] < n, step, state)
    return A, piv, info


@jitted
def _ldl_body(hermitian):
    def run(a):
        flat = a.reshape((-1,) + a.shape[-2:])
        A, piv, info = jax.vmap(lambda m: _sytf2(m, hermitian))(flat)
        return A.reshape(a.shape), piv.reshape(a.shape[:-1]), info.reshape(a.shape[:-2])

    return run


@_kernel(aten.linalg_ldl_factor_ex.default)
def linalg_ldl_factor_ex(self, *, hermitian=False, check_errors=False):
    mld, mp, mi = _meta(aten.linalg_ldl_factor_ex.default, self, hermitian=hermitian, check_errors=check_errors)
    if self.numel() == 0:
        return (
            _present(jnp.zeros(mld.shape, J(self).dtype), mld),
            _present(jnp.zeros(mp.shape, jnp.int32), mp),
            _present(jnp.zeros(mi.shape, jnp.int32), mi),
        )
    ld, piv, info = _ldl_body(bool(hermitian))(J(self))
    if check_errors:
        check_info(info, "torch.linalg.ldl_factor_ex", self.dim() == 2)
    return _present(ld, mld), _present(piv, mp), _present(info, mi)


def _sytrs(ld, piv, b, hermitian):
    """One system: A X = B from ?sytrf's lower factor (?sytrs / ?hetrs, step for step)."""
    n = ld.shape[-1]
    idx = jnp.arange(n)
    herm = hermitian and jnp.iscomplexobj(ld)
    conj = jnp.conj if herm else (lambda x: x)

    def swap(B, i, j):
        ri, rj = B[i], B[j]
        return B.at[i].set(rj).at[j].set(ri)

    def forward(state):  # L D Y = P^T B
        B, k = state
        one = piv[k] > 0

        def step1(B):
            B = swap(B, k, piv[k] - 1)
            B = B - jnp.where(idx[:, None] > k, ld[:, k][:, None] * B[k][None, :], 0)
            d = ld[k, k].real if herm else ld[k, k]
            return B.at[k].set(B[k] * (1 / d).astype(B.dtype))  # scaled by the reciprocal, as ?scal

        def step2(B):
            B = swap(B, k + 1, -piv[k] - 1)
            below = idx[:, None] > k + 1
            B = B - jnp.where(below, ld[:, k][:, None] * B[k][None, :], 0)
            B = B - jnp.where(below, ld[:, k + 1][:, None] * B[k + 1][None, :], 0)
            akm1k = ld[k + 1, k]
            akm1 = ld[k, k] / conj(akm1k)
            ak = ld[k + 1, k + 1] / akm1k
            denom = akm1 * ak - 1
            bkm1 = B[k] / conj(akm1k)
            bk = B[k + 1] / akm1k
            return B.at[k].set((ak * bkm1 - bk) / denom).at[k + 1].set((akm1 * bk - bkm1) / denom)

        return jax.lax.cond(one, step1, step2, B), k + jnp.where(one, 1, 2)

    def backward(state):  # L^T (L^H) X = Y, then the interchanges
        B, k = state
        one = piv[k] > 0
        below = idx > k

        def back1(B):
            B = B.at[k].add(-jnp.sum(jnp.where(below[:, None], conj(ld[:, k])[:, None] * B, 0), axis=0))
            return swap(B, k, piv[k] - 1)

        def back2(B):
            B = B.at[k].add(-jnp.sum(jnp.where(below[:, None], conj(ld[:, k])[:, None] * B, 0), axis=0))
            B = B.at[k - 1].add(-jnp.sum(jnp.where(below[:, None], conj(ld[:, k - 1])[:, None] * B, 0), axis=0))
            return swap(B, k, -piv[k] - 1)

        return jax.lax.cond(one, back1, back2, B), k - jnp.where(one, 1, 2)

    B, _ = jax.lax.while_loop(lambda s: s[1] < n, forward, (b, jnp.zeros((), jnp.int32)))
    B, _ = jax.lax.while_loop(lambda s: s[1] >= 0, backward, (B, jnp.asarray(n - 1, jnp.int32)))
    return B


@jitted
def _ldl_solve_body(hermitian):
    def run(ld, piv, b):
        batch = jnp.broadcast_shapes(ld.shape[:-2], piv.shape[:-1], b.shape[:-2])
        ld = jnp.broadcast_to(ld, batch + ld.shape[-2:]).reshape((-1,) + ld.shape[-2:])
        piv = jnp.broadcast_to(piv, batch + piv.shape[-1:]).reshape((-1,) + piv.shape[-1:])
        flat_b = jnp.broadcast_to(b, batch + b.shape[-2:]).reshape((-1,) + b.shape[-2:])
        x = jax.vmap(lambda f, p, r: _sytrs(f, p, r, hermitian))(ld, piv, flat_b)
        return x.reshape(batch + b.shape[-2:])

    return run


@_kernel(aten.linalg_ldl_solve.default)
def linalg_ldl_solve(LD, pivots, B, *, hermitian=False):
    mx = _meta(aten.linalg_ldl_solve.default, LD, pivots, B, hermitian=hermitian)
    if mx.numel() == 0:
        return _present(jnp.zeros(mx.shape, J(B).dtype), mx)
    return _present(_ldl_solve_body(bool(hermitian))(J(LD), J(pivots).astype(jnp.int32), J(B)), mx)
