"""LU: factor, unpack and solve; det and slogdet; solve and inv (all made of one LU, as on CPU).

* pivots are LAPACK's: int32, 1-based row swaps; `info` is getrf's (the first zero pivot), raised
  with CPU's messages by the non-_ex forms;
* det and slogdet factor A^T when A is contiguous and real, as CPU does: their backward formulas
  solve with that LU and its transposition flag.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from jaxdev import tensor, tracing
from jaxdev.ops.kit import J, jitted
from jaxdev.ops.kit import transcendentals as tm
from jaxdev.ops.linalg.lapack import broadcast_batch, check_info, empty, kernel, meta, mH, mT, present
from jaxdev.ops.registry import aten

# --- LAPACK's getrf and getrs ------------------------------------------------------------------------


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


@kernel(aten.linalg_lu_factor_ex.default)
def linalg_lu_factor_ex(A, *, pivot=True, check_errors=False):
    mlu, mp, mi = meta(aten.linalg_lu_factor_ex.default, A, pivot=pivot, check_errors=check_errors)
    _no_pivot(pivot, "linalg.lu_factor")
    if A.numel() == 0:
        return (
            present(jnp.zeros(mlu.shape, J(A).dtype), mlu),
            present(jnp.zeros(mp.shape, jnp.int32), mp),
            present(jnp.zeros(mi.shape, jnp.int32), mi),
        )
    lu, piv, info = _lu_factor_body()(J(A))
    if check_errors:
        check_info(info, "torch.linalg.lu_factor_ex", A.dim() == 2)
    return present(lu, mlu), present(piv, mp), present(info, mi)


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
    P = present(arrays.pop(0), mp) if unpack_pivots else empty(LU.dtype)
    if unpack_data:
        return P, present(arrays[0], ml), present(arrays[1], mu)
    return P, empty(LU.dtype), empty(LU.dtype)


@kernel(aten.lu_unpack.default)
def lu_unpack(LU_data, LU_pivots, unpack_data=True, unpack_pivots=True):
    metas = meta(aten.lu_unpack.default, LU_data, LU_pivots, unpack_data, unpack_pivots, check_dtype=False)
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


@kernel(aten.linalg_lu.default)
def linalg_lu(A, *, pivot=True):
    metas = meta(aten.linalg_lu.default, A, pivot=pivot)
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
            return mH(run_left(lu, pivots, mH(b), not adjoint))
        return run_left(lu, pivots, b, adjoint)

    def run_left(lu, pivots, b, adj):
        lu, b = broadcast_batch(lu, b)
        pivots = jnp.broadcast_to(pivots, lu.shape[:-1])
        return _lu_solve(lu, _perm_of(pivots, lu.shape[-1]), b, adj)

    return run


@kernel(aten.linalg_lu_solve.default)
def linalg_lu_solve(LU, pivots, B, *, left=True, adjoint=False):
    mx = meta(aten.linalg_lu_solve.default, LU, pivots, B, left=left, adjoint=adjoint)
    if mx.numel() == 0:
        return present(jnp.zeros(mx.shape, J(B).dtype), mx)
    p, m = J(pivots), LU.shape[-2]
    for bad, what in ((p < 1, "greater or equal to 1"), (p > m, "smaller or equal to LU.size(-2)")):
        tracing.check_values(
            bad,
            lambda what=what: RuntimeError(
                f"Pivots given to lu_solve must all be {what}. Did you properly pass the result of lu_factor?"
            ),
        )
    return present(_lu_solve_body(bool(left), bool(adjoint))(J(LU), p, J(B)), mx)


def _use_transpose(A) -> bool:
    """CPU's det and slogdet factor A^T when A is contiguous and real (their backward knows; solve,
    in this PyTorch, factors A itself)."""
    return A.is_contiguous() and not A.is_complex()


@jitted
def _det_body(transposed, log):
    def run(a):
        lu, piv, _, _ = _lu(mT(a) if transposed else a)
        diag = jnp.diagonal(lu, axis1=-2, axis2=-1)
        swaps = jnp.sum(piv != jnp.arange(1, piv.shape[-1] + 1, dtype=piv.dtype), axis=-1)
        parity = jnp.where(swaps % 2 == 1, -1, 1).astype(a.dtype)
        if not log:
            return jnp.prod(diag, axis=-1) * parity, lu, piv
        mag = jnp.abs(diag)
        unit = jnp.where(mag == 0, jnp.zeros((), a.dtype), diag / jnp.where(mag == 0, 1, mag).astype(a.dtype))
        sign = jnp.prod(unit, axis=-1) * parity
        return sign, jnp.sum(tm.log(mag), axis=-1), lu, piv

    return run


@kernel(aten._linalg_det.default)
def linalg_det(A):
    md, mlu, mp = meta(aten._linalg_det.default, A)
    if A.numel() == 0:
        return (
            present(jnp.ones(md.shape, J(A).dtype), md),
            present(jnp.zeros(mlu.shape, J(A).dtype), mlu),
            present(jnp.zeros(mp.shape, jnp.int32), mp),
        )
    d, lu, piv = _det_body(_use_transpose(A), False)(J(A))
    return present(d, md), present(lu, mlu), present(piv, mp)


@kernel(aten._linalg_slogdet.default)
def linalg_slogdet(A):
    ms, ml, mlu, mp = meta(aten._linalg_slogdet.default, A)
    if A.numel() == 0:
        return (
            present(jnp.ones(ms.shape, J(A).dtype), ms),
            present(jnp.zeros(ml.shape, J(A).real.dtype), ml),
            present(jnp.zeros(mlu.shape, J(A).dtype), mlu),
            present(jnp.zeros(mp.shape, jnp.int32), mp),
        )
    s, logabs, lu, piv = _det_body(_use_transpose(A), True)(J(A))
    return present(s, ms), present(logabs, ml), present(lu, mlu), present(piv, mp)


@jitted
def _solve_body(transposed, left, vector):
    def run(a, b):
        lu, piv, info, perm = _lu(mT(a) if transposed else a)
        rhs = b[..., None] if vector else b
        if left:
            lu_b, rhs = broadcast_batch(lu, rhs)
            perm_b = jnp.broadcast_to(perm, lu_b.shape[:-1])
            x = _lu_solve(lu_b, perm_b, rhs, transposed)
        else:
            lu_b, rhs_h = broadcast_batch(lu, mH(rhs))
            perm_b = jnp.broadcast_to(perm, lu_b.shape[:-1])
            x = mH(_lu_solve(lu_b, perm_b, rhs_h, not transposed))
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
    return present(x, mx), present(lu, mlu), present(piv, mp), present(info, mi)


@kernel(aten._linalg_solve_ex.default)
def linalg_solve_ex(A, B, *, left=True, check_errors=False):
    metas = meta(aten._linalg_solve_ex.default, A, B, left=left, check_errors=check_errors)
    return _solve(A, B, left, check_errors, "torch.linalg.solve_ex", metas)


@jitted
def _inv_body():
    def run(a):
        lu, _, info, perm = _lu(a)
        eye = jnp.broadcast_to(jnp.eye(a.shape[-1], dtype=a.dtype), a.shape)
        return _lu_solve(lu, perm, eye, False), info

    return run


@kernel(aten.linalg_inv_ex.default)
def linalg_inv_ex(A, *, check_errors=False):
    """CPU solves A X = I with the LU of A (linalg_solve_ex), its info included."""
    mi, minfo = meta(aten.linalg_inv_ex.default, A, check_errors=check_errors)
    if A.numel() == 0:
        return present(jnp.zeros(mi.shape, J(A).dtype), mi), present(jnp.zeros(minfo.shape, jnp.int32), minfo)
    x, info = _inv_body()(J(A))
    if check_errors:
        check_info(info, "linalg.inv_ex", A.dim() == 2)
    return present(x, mi), present(info, minfo)
