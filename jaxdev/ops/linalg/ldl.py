"""LDL^T / LDL^H (Bunch-Kaufman): linalg.ldl_factor_ex and linalg.ldl_solve.

JAX has no sytrf: this is LAPACK's unblocked ?sytf2 / ?hetf2 (lower), the routine ?sytrf runs for
the matrices it does not block (n <= 64), step for step: the same pivot decisions, the same
interchanges and updates, so LD and pivots are LAPACK's (to rounding) and ldl_solve follows ?sytrs.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from jaxdev.ops.kit import J, jitted
from jaxdev.ops.linalg.lapack import check_info, kernel, meta, present
from jaxdev.ops.registry import aten

_ALPHA = (1.0 + 17.0**0.5) / 8.0


def _cabs1(x):
    return jnp.abs(x.real) + jnp.abs(x.imag) if jnp.iscomplexobj(x) else jnp.abs(x)


class _Sytf2(NamedTuple):
    """What every step of one factorization reads: the order, a row index, the lower triangle, and
    how the symmetric (or Hermitian) case conjugates and measures a diagonal."""

    n: int
    idx: jax.Array
    lower: jax.Array
    herm: bool
    dtype: object
    real: object

    def conj(self, x):
        return jnp.conj(x) if self.herm else x

    def diag_abs(self, x):
        return jnp.abs(x.real) if self.herm else _cabs1(x)


def _sytf2(a, hermitian):
    """One matrix: (LD, 1-based pivots, info) of tril(a). ?sytf2's loop: at column k choose a 1x1 or
    2x2 pivot block and its interchange (_pivot), swap (_swap), then update the trailing matrix
    (_update_1x1, _update_2x2)."""
    n = a.shape[-1]
    idx = jnp.arange(n)
    herm = hermitian and jnp.iscomplexobj(a)
    ctx = _Sytf2(n, idx, idx[:, None] >= idx[None, :], herm, a.dtype, a.real.dtype)
    state = (jnp.tril(a), jnp.zeros(n, jnp.int32), jnp.zeros((), jnp.int32), jnp.zeros((), jnp.int32))
    A, piv, info, _ = jax.lax.while_loop(lambda s: s[3] < n, lambda s: _step(ctx, s), state)
    return A, piv, info


def _pivot(ctx, A, k):
    """Bunch-Kaufman's choice at column k: (kp, kstep, singular), as ?sytf2 makes it."""
    idx = ctx.idx
    col = A[:, k]
    absakk = ctx.diag_abs(A[k, k])
    colabs = jnp.where(idx > k, _cabs1(col), -1)
    imax = jnp.argmax(colabs)
    colmax = jnp.where(k < ctx.n - 1, colabs[imax], 0).astype(ctx.real)
    singular = (jnp.maximum(absakk, colmax) == 0) | jnp.isnan(absakk)
    rowabs = jnp.where((idx >= k) & (idx < imax), _cabs1(A[imax, :]), -1)
    colabs2 = jnp.where(idx > imax, _cabs1(A[:, imax]), -1)
    rowmax = jnp.maximum(jnp.max(rowabs), jnp.max(colabs2)).astype(ctx.real)
    c1 = absakk >= _ALPHA * colmax
    c2 = absakk >= _ALPHA * colmax * (colmax / rowmax)
    c3 = ctx.diag_abs(A[imax, imax]) >= _ALPHA * rowmax
    keep = singular | c1 | c2
    kp = jnp.where(keep, k, imax).astype(jnp.int32)
    kstep = jnp.where(keep | c3, 1, 2)
    return kp, kstep, singular


def _step(ctx, state):
    A, piv, info, k = state
    kp, kstep, singular = _pivot(ctx, A, k)
    kk = k + kstep - 1
    swapped = jax.lax.cond(~singular & (kp != kk), lambda X: _swap(ctx, X, kk, kp, k, kstep), lambda X: X, A)
    if ctx.herm:  # the pivot block's diagonal is real
        swapped = swapped.at[k, k].set(swapped[k, k].real.astype(ctx.dtype))
        swapped = swapped.at[kk, kk].set(swapped[kk, kk].real.astype(ctx.dtype))
    updated = jax.lax.cond(kstep == 1, lambda X: _update_1x1(ctx, X, k), lambda X: _update_2x2(ctx, X, k), swapped)
    A = jnp.where(singular, A, updated)
    info = jnp.where(singular & (info == 0), k + 1, info)
    piv = jnp.where(kstep == 1, piv.at[k].set(kp + 1), piv.at[k].set(-(kp + 1)).at[k + 1].set(-(kp + 1)))
    return A, piv, info, k + kstep


def _swap(ctx, A, kk, kp, k, kstep):
    """The symmetric interchange of kk and kp in the trailing lower triangle."""
    idx, conj = ctx.idx, ctx.conj
    ckk, ckp = A[:, kk], A[:, kp]
    below = idx > kp
    A = A.at[:, kk].set(jnp.where(below, ckp, ckk)).at[:, kp].set(jnp.where(below, ckk, ckp))
    # A(j, kk) <-> A(kp, j) for kk < j < kp (conjugated when Hermitian)
    mid = (idx > kk) & (idx < kp)
    col, row = A[:, kk], A[kp, :]
    A = A.at[:, kk].set(jnp.where(mid, conj(row), col)).at[kp, :].set(jnp.where(mid, conj(col), row))
    if ctx.herm:
        A = A.at[kp, kk].set(jnp.conj(A[kp, kk]))
    dkk, dkp = A[kk, kk], A[kp, kp]
    A = A.at[kk, kk].set(dkp).at[kp, kp].set(dkk)
    t1, t2 = A[k + 1, k], A[kp, k]
    two = kstep == 2
    A = A.at[k + 1, k].set(jnp.where(two, t2, t1)).at[kp, k].set(jnp.where(two, t1, t2))
    return A


def _real_diagonal(ctx, A, trailing):
    if ctx.herm:
        A = jnp.where((ctx.idx[:, None] == ctx.idx[None, :]) & trailing, A.real.astype(ctx.dtype), A)
    return A


def _update_1x1(ctx, A, k):
    idx = ctx.idx
    x = jnp.where(idx > k, A[:, k], 0)
    d = A[k, k].real if ctx.herm else A[k, k]
    r1 = (1 / d).astype(ctx.dtype)
    trailing = (idx[:, None] > k) & (idx[None, :] > k) & ctx.lower
    A = _real_diagonal(ctx, jnp.where(trailing, A - r1 * x[:, None] * ctx.conj(x)[None, :], A), trailing)
    return A.at[:, k].set(jnp.where(idx > k, x * r1, A[:, k]))


def _update_2x2(ctx, A, k):
    idx, conj = ctx.idx, ctx.conj
    ck, ck1 = A[:, k], A[:, k + 1]
    if ctx.herm:
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
    trailing = (idx[:, None] > k + 1) & (idx[None, :] > k + 1) & ctx.lower
    update = ck[:, None] * conj(wk)[None, :] + ck1[:, None] * conj(wkp1)[None, :]
    A = _real_diagonal(ctx, jnp.where(trailing, A - update, A), trailing)
    return A.at[:, k].set(jnp.where(rows, wk, ck)).at[:, k + 1].set(jnp.where(rows, wkp1, ck1))


@jitted
def _ldl_body(hermitian):
    def run(a):
        flat = a.reshape((-1,) + a.shape[-2:])
        A, piv, info = jax.vmap(lambda m: _sytf2(m, hermitian))(flat)
        return A.reshape(a.shape), piv.reshape(a.shape[:-1]), info.reshape(a.shape[:-2])

    return run


@kernel(aten.linalg_ldl_factor_ex.default)
def linalg_ldl_factor_ex(self, *, hermitian=False, check_errors=False):
    mld, mp, mi = meta(aten.linalg_ldl_factor_ex.default, self, hermitian=hermitian, check_errors=check_errors)
    if self.numel() == 0:
        return (
            present(jnp.zeros(mld.shape, J(self).dtype), mld),
            present(jnp.zeros(mp.shape, jnp.int32), mp),
            present(jnp.zeros(mi.shape, jnp.int32), mi),
        )
    ld, piv, info = _ldl_body(bool(hermitian))(J(self))
    if check_errors:
        check_info(info, "torch.linalg.ldl_factor_ex", self.dim() == 2)
    return present(ld, mld), present(piv, mp), present(info, mi)


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


@kernel(aten.linalg_ldl_solve.default)
def linalg_ldl_solve(LD, pivots, B, *, hermitian=False):
    mx = meta(aten.linalg_ldl_solve.default, LD, pivots, B, hermitian=hermitian)
    if mx.numel() == 0:
        return present(jnp.zeros(mx.shape, J(B).dtype), mx)
    return present(_ldl_solve_body(bool(hermitian))(J(LD), J(pivots).astype(jnp.int32), J(B)), mx)
