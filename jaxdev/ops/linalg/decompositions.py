"""SVD, eigendecompositions (Hermitian and general) and QR with its Householder products.

Eigenvector and singular-vector phases are what the device's LAPACK (or cuSOLVER) gives: on XLA's CPU
the reference-LAPACK routines (OpenBLAS's gauge, which MKL-built PyTorch does not always share),
elsewhere possibly another (PyTorch documents them as not unique). geqrf's reflectors are LAPACK's,
stored as CPU stores them (batched column-major).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import torch

from jaxdev import dtypes, tracing
from jaxdev.ops.kit import J, capabilities, cpu_numerics, jitted
from jaxdev.ops.linalg.lapack import (
    LAPACK_DTYPES,
    check_info,
    cpu_error,
    empty,
    fortran_strides,
    jax_dtype,
    kernel,
    meta,
    mT,
    present,
)
from jaxdev.ops.registry import aten

# --- SVD and Hermitian eigendecomposition ---------------------------------------------------------


# float32 and complex64 matrices are decomposed in float64/complex128 and the factors rounded once.
# In their own precision XLA's LAPACK and CPU's are equally exact on average but each lands far
# from the exact factors in its own places: on random 5x5 complex64 matrices the gradient of
# cond (U diag(gS) Vh) was farther from the complex128 result than CPU's in 45% of the cases (CPU
# 0.28x tolerance on average, jax 0.30x; the Hermitian pinv through eigh likewise, 44%; a float32
# pinv through the SVD 38%). Rounded from the wide factors it is 0.019x on average and farther than
# CPU in none; the OpInfo cells linalg.lstsq float32, linalg.cond and linalg.pinv.hermitian
# complex64 backward were such cases. Phases are LAPACK's for the wide matrix, which are those of
# the narrow one wherever the factors are well determined.
_WIDE = {jnp.dtype(jnp.float32): jnp.dtype(jnp.float64), jnp.dtype(jnp.complex64): jnp.dtype(jnp.complex128)}


def _widened(a, family: str):
    """a in float64/complex128 where this platform has `family` there and float64 in hardware (a TPU
    has neither: emulated float64 is no closer than float32 there, and costs; then a as it is)."""
    wide = _WIDE.get(a.dtype)
    if wide is None or not cpu_numerics.float64_native() or not capabilities.has(family, dtypes.to_torch_dtype(wide)):
        return a
    return a.astype(wide)


def _narrowed(x, like):
    """x rounded to `like`'s precision (the real dtype for singular values and eigenvalues)."""
    target = like.dtype if jnp.iscomplexobj(x) or not jnp.iscomplexobj(like) else like.real.dtype
    return x.astype(target)


def _phase(d):
    """The unit-modulus phase of d (1 where d is 0): sign for real d."""
    magnitude = jnp.abs(d)
    return jnp.where(magnitude == 0, jnp.ones((), d.dtype), d / jnp.where(magnitude == 0, 1, magnitude).astype(d.dtype))


def _svd_in_gauge(u, vh, u_gauge, vh_gauge):
    """The wide factors with each singular pair's phase turned to the narrow decomposition's, the one
    CPU's shares (rounded from the wide factors alone, 8.5% of random 5x5 float32 SVDs had a sign
    other than CPU's, 1% before and after this); the columns or rows past min(m, n) follow theirs on
    their own. The price: the narrow SVD runs too."""
    k = min(u.shape[-1], vh.shape[-2])
    p_u = _phase(jnp.sum(jnp.conj(u_gauge) * u, axis=-2))  # one per column of U
    p_v = _phase(jnp.sum(jnp.conj(vh_gauge) * vh, axis=-1))  # one per row of Vh
    p_v = jnp.concatenate([p_u[..., :k], jnp.conj(p_v[..., k:])], axis=-1)  # a pair turns together
    return u * jnp.conj(p_u)[..., None, :], vh * p_v[..., :, None]


@jitted
def _svd_body(full_matrices, compute_uv, is_matrix):
    def run(a):
        finite = jnp.isfinite(a).all(axis=(-2, -1))
        info = jnp.where(finite, 0, -4).astype(jnp.int32)
        wide = _widened(a, "svd")
        if not compute_uv:
            return _narrowed(jnp.linalg.svd(wide, compute_uv=False), a), info
        u, s, vh = jnp.linalg.svd(wide, full_matrices=full_matrices)
        if wide.dtype != a.dtype:
            u_gauge, _, vh_gauge = jnp.linalg.svd(a, full_matrices=full_matrices)
            u, vh = _svd_in_gauge(u, vh, u_gauge.astype(u.dtype), vh_gauge.astype(vh.dtype))
        return _narrowed(u, a), _narrowed(s, a), _narrowed(vh, a), info

    return run


@kernel(aten._linalg_svd.default)
def linalg_svd(A, full_matrices=False, compute_uv=True, *, driver=None):
    mu, ms, mv = meta(aten._linalg_svd.default, A, full_matrices, compute_uv, driver=driver)
    if driver is not None:
        raise RuntimeError(
            "torch.linalg.svd: keyword argument `driver=` is only supported on CUDA inputs with cuSOLVER backend."
        )
    m, n = A.shape[-2], A.shape[-1]
    if A.numel() == 0:
        eye = lambda k, like: present(jnp.broadcast_to(jnp.eye(k, dtype=J(A).dtype), like.shape), like)
        s = present(jnp.zeros(ms.shape, J(A).real.dtype), ms)
        if not compute_uv:
            return empty(A.dtype), s, empty(A.dtype)
        u = eye(m, mu) if (full_matrices and mu.numel()) else present(jnp.zeros(mu.shape, J(A).dtype), mu)
        v = eye(n, mv) if (full_matrices and mv.numel()) else present(jnp.zeros(mv.shape, J(A).dtype), mv)
        return u, s, v
    body = _svd_body(bool(full_matrices), bool(compute_uv), A.dim() == 2)
    if compute_uv:
        u, s, vh, info = body(J(A))
        check_info(info, "linalg.svd", A.dim() == 2)
        return present(u, mu), present(s, ms), present(vh, mv, fortran=True)
    s, info = body(J(A))
    check_info(info, "linalg.svd", A.dim() == 2)
    return empty(A.dtype), present(s, ms), empty(A.dtype)


@jitted
def _eigh_body(lower):
    def run(a):
        v, w = jax.lax.linalg.eigh(_widened(a, "eigh"), lower=lower, symmetrize_input=False)  # wide: as the SVD
        return _narrowed(w, a), _narrowed(v, a)

    return run


@kernel(aten._linalg_eigh.default)
def linalg_eigh(A, UPLO="L", compute_v=True):
    mw, mv = meta(aten._linalg_eigh.default, A, UPLO, compute_v)
    if A.numel() == 0:
        w = present(jnp.zeros(mw.shape, J(A).real.dtype), mw)
        return w, (present(jnp.zeros(mv.shape, J(A).dtype), mv) if compute_v else empty(A.dtype))
    w, v = _eigh_body(UPLO.upper() == "L")(J(A))
    return present(w, mw), (present(v, mv) if compute_v else empty(A.dtype))


@jitted
def _eig_body(vectors):
    def run(a):
        finite = jnp.isfinite(a).all()
        if vectors:
            w, v = jnp.linalg.eig(a)
            return w, v, finite
        return jnp.linalg.eigvals(a), finite

    return run


@kernel(aten.linalg_eig.default)
def linalg_eig(A):
    mw, mv = meta(aten.linalg_eig.default, A)
    if A.numel() == 0:
        return present(jnp.zeros(mw.shape, jax_dtype(mw.dtype)), mw), present(
            jnp.zeros(mv.shape, jax_dtype(mv.dtype)), mv
        )
    w, v, finite = _eig_body(True)(J(A))
    tracing.check_values(
        ~finite, lambda: RuntimeError("torch.linalg.eig: input tensor should not contain infs or NaNs.")
    )
    return present(w.astype(jax_dtype(mw.dtype)), mw), present(v.astype(jax_dtype(mv.dtype)), mv, fortran=True)


@kernel(aten._linalg_eigvals.default, out=False)
def linalg_eigvals(A):
    mw = meta(aten._linalg_eigvals.default, A)
    if A.numel() == 0:
        return present(jnp.zeros(mw.shape, jax_dtype(mw.dtype)), mw)
    w, _ = _eig_body(False)(J(A))
    return present(w.astype(jax_dtype(mw.dtype)), mw)


# --- QR and Householder products ----------------------------------------------------------------


@jitted
def _qr_body(mode):
    def run(a):
        if mode == "r":
            return jnp.linalg.qr(a, mode="r")
        return jnp.linalg.qr(a, mode=mode)

    return run


@kernel(aten.linalg_qr.default)
def linalg_qr(A, mode="reduced"):
    mq, mr = meta(aten.linalg_qr.default, A, mode)
    if A.numel() == 0:
        m = A.shape[-2]
        q = jnp.broadcast_to(jnp.eye(m, mq.shape[-1], dtype=J(A).dtype), mq.shape) if mq.numel() else None
        q = present(q, mq) if q is not None else present(jnp.zeros(mq.shape, J(A).dtype), mq)
        return q, present(jnp.zeros(mr.shape, J(A).dtype), mr)
    if mode == "r":
        return empty(A.dtype), present(_qr_body("r")(J(A)), mr)
    q, r = _qr_body(mode)(J(A))
    return present(q, mq), present(r, mr)


@jitted
def _geqrf_body():
    def run(a):
        h, tau = jnp.linalg.qr(a, mode="raw")  # LAPACK's geqrf, its reflectors transposed
        return mT(h), tau

    return run


@kernel(aten.geqrf.default)
def geqrf(self):
    if self.dim() < 2 or self.dtype not in LAPACK_DTYPES:
        raise cpu_error(aten.geqrf.default, (self,), {}) or RuntimeError("geqrf: unsupported input")
    shape = tuple(self.shape)
    k = min(shape[-2], shape[-1])
    ma = torch.empty_strided(shape, fortran_strides(shape), dtype=self.dtype, device="meta")
    mt = torch.empty(shape[:-2] + (k,), dtype=self.dtype, device="meta")
    if self.numel() == 0:
        return present(jnp.zeros(shape, J(self).dtype), ma), present(jnp.zeros(mt.shape, J(self).dtype), mt)
    a, tau = _geqrf_body()(J(self))
    return present(a, ma), present(tau, mt)


@jitted
def _householder_body():
    return lambda a, tau: jax.lax.linalg.householder_product(a, tau)


@kernel(aten.linalg_householder_product.default)
def linalg_householder_product(input, tau):
    mq = meta(aten.linalg_householder_product.default, input, tau)
    if input.numel() == 0:
        return present(jnp.zeros(mq.shape, J(input).dtype), mq, fortran=True)
    if tau.shape[-1] == 0:  # no reflectors: the first n columns of the identity
        eye = jnp.broadcast_to(jnp.eye(input.shape[-2], input.shape[-1], dtype=J(input).dtype), mq.shape)
        return present(eye, mq, fortran=True)
    return present(_householder_body()(J(input), J(tau)), mq, fortran=True)


@jitted
def _ormqr_body(left, transpose):
    def run(a, tau, c):
        batch = jnp.broadcast_shapes(a.shape[:-2], tau.shape[:-1], c.shape[:-2])
        a = jnp.broadcast_to(a, batch + a.shape[-2:])
        return jax.lax.linalg.ormqr(a, jnp.broadcast_to(tau, batch + tau.shape[-1:]), c, left=left, transpose=transpose)

    return run


@kernel(aten.ormqr.default)
def ormqr(self, input2, input3, left=True, transpose=False):
    mc = meta(aten.ormqr.default, self, input2, input3, left, transpose)
    if mc.numel() == 0 or self.shape[-2] == 0:
        return present(jnp.zeros(mc.shape, J(input3).dtype) + J(input3), mc, fortran=True)
    return present(_ormqr_body(bool(left), bool(transpose))(J(self), J(input2), J(input3)), mc, fortran=True)
