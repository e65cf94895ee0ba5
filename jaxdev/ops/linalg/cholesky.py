"""Cholesky: the factorization, its inverse and solve; and the triangular solves.

`info` is potrf's (the order of the first leading minor that is not positive-definite), raised with
CPU's messages by the non-_ex forms; the results CPU's LAPACK writes are batched column-major.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from jaxdev import tensor
from jaxdev.ops.kit import J, jitted
from jaxdev.ops.linalg.lapack import HIGHEST, broadcast_batch, check_info, kernel, meta, mH, present
from jaxdev.ops.registry import aten

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
        below = L[..., :, j] - jnp.einsum(
            "...ik,...k->...i", jnp.where(idx < j, L, 0), jnp.conj(row), precision=HIGHEST
        )
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
    return mH(jnp.triu(a))  # the Hermitian matrix the upper triangle stands for, as a lower one


@jitted
def _cholesky_body(upper):
    def run(a):
        L, info = _cholesky_lower(_upper_as_lower(a) if upper else a)
        return (mH(L) if upper else L), info

    return run


@kernel(aten.linalg_cholesky_ex.default)
def linalg_cholesky_ex(A, *, upper=False, check_errors=False):
    ml, mi = meta(aten.linalg_cholesky_ex.default, A, upper=upper, check_errors=check_errors)
    if A.numel() == 0:
        return present(jnp.zeros(ml.shape, J(A).dtype), ml), present(jnp.zeros(mi.shape, jnp.int32), mi)
    L, info = _cholesky_body(bool(upper))(J(A))
    if check_errors:
        check_info(info, "linalg.cholesky_ex", A.dim() == 2)
    return present(L, ml), present(info, mi)


@kernel(aten.cholesky.default)
def cholesky(self, upper=False):
    ml = meta(aten.cholesky.default, self, upper)
    if self.numel() == 0:
        return tensor.wrap(jnp.zeros(tuple(self.shape), J(self).dtype))
    L, info = _cholesky_body(bool(upper))(J(self))
    check_info(info, "cholesky", self.dim() == 2)
    return present(L, ml, fortran=True)


@jitted
def _cholesky_inverse_body(upper):
    def run(f):
        # A = L L^H (or U^H U): A^{-1} from the factor's own triangle, as potri reads it
        L = mH(jnp.triu(f)) if upper else jnp.tril(f)
        n = f.shape[-1]
        eye = jnp.broadcast_to(jnp.eye(n, dtype=f.dtype), f.shape)
        y = jax.lax.linalg.triangular_solve(L, eye, left_side=True, lower=True)
        inv = jax.lax.linalg.triangular_solve(L, y, left_side=True, lower=True, transpose_a=True, conjugate_a=True)
        diag = jnp.diagonal(f, axis1=-2, axis2=-1) == 0
        info = jnp.where(diag.any(axis=-1), jnp.argmax(diag, axis=-1) + 1, 0).astype(jnp.int32)
        return inv, info

    return run


@kernel(aten.cholesky_inverse.default)
def cholesky_inverse(self, upper=False):
    mr = meta(aten.cholesky_inverse.default, self, upper)
    if self.numel() == 0:
        return present(jnp.zeros(mr.shape, J(self).dtype), mr)
    inv, info = _cholesky_inverse_body(bool(upper))(J(self))
    check_info(info, "cholesky_inverse", self.dim() == 2)
    return present(inv, mr, fortran=True)


@jitted
def _cholesky_solve_body(upper):
    def run(b, f):
        L = mH(jnp.triu(f)) if upper else jnp.tril(f)
        y = jax.lax.linalg.triangular_solve(L, b, left_side=True, lower=True)
        return jax.lax.linalg.triangular_solve(L, y, left_side=True, lower=True, transpose_a=True, conjugate_a=True)

    return run


@kernel(aten._cholesky_solve_helper.default)
def cholesky_solve_helper(self, A, upper):
    mx = meta(aten._cholesky_solve_helper.default, self, A, upper)
    if mx.numel() == 0:
        return present(jnp.zeros(mx.shape, J(self).dtype), mx, fortran=True)
    return present(_cholesky_solve_body(bool(upper))(J(self), J(A)), mx, fortran=True)


# --- triangular solves --------------------------------------------------------------------------------


@jitted
def _triangular_body(upper, left, unit, transpose):
    def run(a, b):
        a, b = broadcast_batch(a, b)
        a = jnp.triu(a) if upper else jnp.tril(a)
        x = jax.lax.linalg.triangular_solve(
            a, b, left_side=left, lower=not upper, transpose_a=transpose, unit_diagonal=unit
        )
        return x, a

    return run


@kernel(aten.linalg_solve_triangular.default)
def linalg_solve_triangular(self, B, *, upper, left=True, unitriangular=False):
    mx = meta(aten.linalg_solve_triangular.default, self, B, upper=upper, left=left, unitriangular=unitriangular)
    if mx.numel() == 0:
        return present(jnp.zeros(mx.shape, J(B).dtype), mx, fortran=True)
    x, _ = _triangular_body(bool(upper), bool(left), bool(unitriangular), False)(J(self), J(B))
    return present(x, mx, fortran=True)


@jitted
def _clone_coefficient_body():
    def run(a, b):
        return broadcast_batch(a, b)[0]

    return run


@kernel(aten.triangular_solve.default)
def triangular_solve(self, A, upper=True, transpose=False, unitriangular=False):
    mx, ma = meta(aten.triangular_solve.default, self, A, upper, transpose, unitriangular)
    if mx.numel() == 0 or ma.numel() == 0:
        coefficient = _clone_coefficient_body()(J(A), J(self)) if ma.numel() else jnp.zeros(ma.shape, J(A).dtype)
        return present(jnp.zeros(mx.shape, J(self).dtype), mx, True), present(coefficient, ma, True)
    x, _ = _triangular_body(bool(upper), True, bool(unitriangular), bool(transpose))(J(A), J(self))
    coefficient = _clone_coefficient_body()(J(A), J(self))
    return present(x, mx, fortran=True), present(coefficient, ma, fortran=True)
