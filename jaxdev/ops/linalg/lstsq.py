"""Least squares (linalg.lstsq), solved through the SVD for every driver.

What each driver returns (rank, singular values, residuals) is what CPU returns for it; the solution
is laid out as CPU's, the first n rows of a column-major (max(m, n), k) buffer.
"""

from __future__ import annotations

import jax.numpy as jnp
import torch

from jaxdev import tensor, tracing
from jaxdev.ops.kit import J, jitted
from jaxdev.ops.linalg.lapack import HIGHEST, LAPACK_DTYPES, broadcast_batch, cpu_error, empty, kernel, mH, mT
from jaxdev.ops.registry import aten

_DRIVERS = ("gels", "gelsy", "gelsd", "gelss")


# float32/complex64 systems are solved in float64/complex128 (rank cut-off still from the narrow
# dtype's eps) and the results rounded once. Solved in float32 the solution was no more exact than
# CPU's gels/gelsy (0.07-0.10x tolerance from the float64 solution each), and the residuals'
# gradient 2 (A X - B) gL X^H amplifies that error: on the OpInfo sample linalg.lstsq float32
# backward (4x3, gels) jax's gradient was 0.99-1.4x tolerance from the float64 one, CPU's 0.82x;
# from the rounded wide solution it is 0.27x.
_WIDE = {jnp.dtype(jnp.float32): jnp.dtype(jnp.float64), jnp.dtype(jnp.complex64): jnp.dtype(jnp.complex128)}


@jitted
def _lstsq_body(rcond, driver, vector, residuals):
    def run(a, b):
        narrow = a.dtype
        wide = _WIDE.get(narrow, narrow)
        x, rank, s, *r = solve(a.astype(wide), b.astype(wide))
        real = jnp.finfo(narrow).dtype
        return (x.astype(narrow), rank, s.astype(real), *(v.astype(real) for v in r))

    def solve(a, b):
        rhs = b[..., None] if vector else b
        a, rhs = broadcast_batch(a, rhs)
        u, s, vh = jnp.linalg.svd(a, full_matrices=False)
        cutoff = rcond * s[..., :1]
        keep = s > cutoff
        rank = jnp.sum(keep, axis=-1).astype(jnp.int64)
        inv = jnp.where(keep, 1 / jnp.where(keep, s, 1), 0).astype(a.dtype)
        x = jnp.matmul(mH(vh), inv[..., :, None] * jnp.matmul(mH(u), rhs, precision=HIGHEST), precision=HIGHEST)
        out = [x[..., 0] if vector else x, rank, s]
        if residuals:
            r = jnp.sum(jnp.abs(jnp.matmul(a, x, precision=HIGHEST) - rhs) ** 2, axis=-2)
            out.append(r)
        return tuple(out)

    return run


@kernel(aten.linalg_lstsq.default)
def linalg_lstsq(self, b, rcond=None, *, driver=None):
    vector = b.dim() == self.dim() - 1
    if (
        (driver is not None and driver not in _DRIVERS)
        or self.dim() < 2
        or self.dtype != b.dtype
        or self.dtype not in LAPACK_DTYPES
        or b.dim() not in (self.dim(), self.dim() - 1)
        or b.shape[-2 + vector] != self.shape[-2]
    ):
        args = (self, b, rcond)
        raise cpu_error(aten.linalg_lstsq.default, args, {"driver": driver}) or RuntimeError("lstsq: bad input")
    driver = driver or "gelsy"
    m, n = self.shape[-2], self.shape[-1]
    real = J(self).real.dtype
    eps = float(jnp.finfo(real).eps)
    rc = float(rcond) if rcond is not None and rcond > 0 else eps * max(m, n)
    want_residuals = m > n and driver != "gelsy"
    x, rank, s, *res = _lstsq_body(rc, driver, vector, want_residuals)(J(self), J(b))
    solution = _lstsq_solution(x, m, n, vector)
    residuals = empty(torch.float64 if real == jnp.float64 else torch.float32)
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
    sv = tensor.wrap(s) if driver in ("gelsd", "gelss") else empty(residuals.dtype)
    return solution, residuals, rank_t, sv


def _lstsq_solution(x, m, n, vector):
    """CPU's solution is the first n rows of a column-major (max(m, n), k) buffer."""
    if vector:
        return tensor.wrap(x)
    rows = max(m, n)
    padded = jnp.zeros(x.shape[:-2] + (x.shape[-1], rows), x.dtype).at[..., :n].set(mT(x))
    t = tensor.wrap(padded)
    shape = x.shape
    strides = list(t.stride())
    strides[-1], strides[-2] = strides[-2], strides[-1]
    return tensor.tensor_on_storage(t.untyped_storage(), t.dtype, tuple(shape), tuple(strides))
