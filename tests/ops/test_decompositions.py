"""Decompositions and solvers on the device against CPU PyTorch, with JAXDEV_FALLBACK=error so a
kernel that quietly fell back to CPU fails: values, dtypes, shapes and CPU's (column-major) strides,
LAPACK's pivots and info, CPU's errors for singular / non-positive-definite / non-finite input
(eagerly and inside compiled programs), empty matrices, batches, and gradients through PyTorch's own
derivative formulas. Singular and eigenvectors are compared through gauge-invariant quantities."""

from __future__ import annotations

import warnings

import pytest
import torch
from jaxdev_testing import JAX, assert_same, check, fn_synced, on_both

from jaxdev import fallback

torch.manual_seed(0)

DTYPES = [torch.float32, torch.float64, torch.complex64, torch.complex128]
TOL = {torch.float32: 2e-5, torch.float64: 1e-11, torch.complex64: 2e-5, torch.complex128: 1e-11}


pytestmark = pytest.mark.usefixtures("no_fallback")  # tests/conftest.py


def _pd(*batch, n=4, dtype=torch.float64):
    a = torch.randn(*batch, n, n, dtype=dtype)
    return a @ a.mH + n * torch.eye(n, dtype=dtype)


def _same(fn, *inputs, dtype, stride=True):
    """fn on jax equals fn on CPU, output by output, strides included."""
    cpu = fn(*inputs)
    dev = fn(*[t.to(JAX) if isinstance(t, torch.Tensor) else t for t in inputs])
    cpu = cpu if isinstance(cpu, tuple) else (cpu,)
    dev = dev if isinstance(dev, tuple) else (dev,)
    assert len(cpu) == len(dev)
    for i, (d, c) in enumerate(zip(dev, cpu)):
        assert_same(d, c, rtol=TOL[dtype], atol=TOL[dtype], check_stride=stride, msg=f"output {i}")


aten = torch.ops.aten


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(3, 3), (2, 4, 3), (2, 1, 3, 5)])
def test_lu_family_like_cpu(dtype, shape):
    a = torch.randn(*shape, dtype=dtype)
    _same(torch.linalg.lu_factor_ex, a, dtype=dtype)
    _same(torch.linalg.lu, a, dtype=dtype)
    _same(lambda x: torch.linalg.lu(x.mT), a, dtype=dtype)
    lu, piv = torch.linalg.lu_factor(a)
    _same(torch.lu_unpack, lu, piv, dtype=dtype)
    _same(lambda x, p: torch.lu_unpack(x, p, unpack_data=False), lu, piv, dtype=dtype)
    _same(lambda x, p: torch.lu_unpack(x, p, unpack_pivots=False), lu, piv, dtype=dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_solvers_like_cpu(dtype):
    a = torch.randn(2, 3, 3, dtype=dtype)
    b = torch.randn(2, 3, 2, dtype=dtype)
    for x in (a, a.mT, a[0]):  # contiguous real A is factored transposed on CPU: LU and pivots follow
        _same(aten._linalg_det, x, dtype=dtype)
        _same(aten._linalg_slogdet, x, dtype=dtype)
        _same(aten._linalg_solve_ex, x, b, dtype=dtype)
        _same(lambda p, q: aten._linalg_solve_ex(p, q, left=False), x, b.mT, dtype=dtype)
        _same(lambda p, q: aten._linalg_solve_ex(p, q[..., 0] if p.dim() == 3 else q[0, :, 0]), x, b, dtype=dtype)
        _same(torch.linalg.inv_ex, x, dtype=dtype)
    lu, piv = torch.linalg.lu_factor(a)
    for left in (True, False):
        for adjoint in (True, False):
            rhs = b if left else b.mT
            _same(
                lambda p, q, r, adjoint=adjoint, left=left: torch.linalg.lu_solve(p, q, r, left=left, adjoint=adjoint),
                lu,
                piv,
                rhs,
                dtype=dtype,
            )
    _same(lambda p, q, r: torch.lu_solve(r, p, q), lu, piv, b, dtype=dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_triangular_solves_like_cpu(dtype):
    a = torch.randn(2, 3, 3, dtype=dtype) + 3 * torch.eye(3, dtype=dtype)
    b = torch.randn(2, 3, 2, dtype=dtype)
    for upper in (True, False):
        for unit in (True, False):
            for left in (True, False):
                rhs = b if left else b.mT
                _same(
                    lambda p, q, left=left, unit=unit, upper=upper: torch.linalg.solve_triangular(
                        p, q, upper=upper, left=left, unitriangular=unit
                    ),
                    a,
                    rhs,
                    dtype=dtype,
                )
            for transpose in (True, False):
                _same(
                    lambda q, p, transpose=transpose, unit=unit, upper=upper: torch.triangular_solve(
                        q, p, upper, transpose, unit
                    ),
                    b,
                    a,
                    dtype=dtype,
                )
                _same(
                    lambda q, p, transpose=transpose, unit=unit, upper=upper: torch.triangular_solve(
                        q, p, upper, transpose, unit
                    ),
                    b,
                    a[0],
                    dtype=dtype,
                )


@pytest.mark.parametrize("dtype", DTYPES)
def test_cholesky_family_like_cpu(dtype):
    p = _pd(2, dtype=dtype)
    b = torch.randn(2, 4, 2, dtype=dtype)
    for upper in (True, False):
        _same(lambda x, upper=upper: torch.linalg.cholesky_ex(x, upper=upper), p, dtype=dtype)
        _same(lambda x, upper=upper: torch.linalg.cholesky(x, upper=upper), p, dtype=dtype)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # deprecated, warned once per process
            _same(lambda x, upper=upper: torch.cholesky(x, upper=upper), p, dtype=dtype)
        f = torch.linalg.cholesky(p, upper=upper)
        _same(lambda x, upper=upper: torch.cholesky_inverse(x, upper=upper), f, dtype=dtype)
        _same(lambda q, x, upper=upper: torch.cholesky_solve(q, x, upper=upper), b, f, dtype=dtype)


@pytest.mark.parametrize(
    "matrix",
    [
        [[1.0, 2.0], [2.0, 1.0]],
        [[4.0, 2.0, 1.0], [2.0, 1.0, 3.0], [1.0, 3.0, 1.0]],
        [[1.0, float("nan")], [2.0, 3.0]],
        [[-1.0, 0.0], [0.0, 1.0]],
        [[float("inf"), 0.0], [0.0, 1.0]],
    ],
)
def test_cholesky_failure_like_lapack(matrix):
    """info is the order of the first leading minor that is not positive-definite, and L is what
    LAPACK leaves: the columns before it factored, the failing pivot, the rest untouched."""
    a = torch.tensor(matrix, dtype=torch.float64)
    on_both(lambda d: torch.linalg.cholesky_ex(a.to(d)))
    on_both(lambda d: torch.linalg.cholesky_ex(torch.stack([torch.eye(len(matrix), dtype=a.dtype), a]).to(d)))
    on_both(lambda d: torch.linalg.cholesky(a.to(d)), match="positive-definite")


def test_errors_like_cpu():
    singular = torch.tensor([[1.0, 2.0], [2.0, 4.0]])
    batch = torch.stack([torch.eye(2), singular])
    for a in (singular, batch):
        on_both(lambda d, a=a: torch.linalg.inv(a.to(d)), match="The diagonal element 2 is zero")
        on_both(lambda d, a=a: torch.linalg.solve(a.to(d), torch.ones(2, device=d)), match="input matrix is singular")
        on_both(lambda d, a=a: torch.linalg.lu_factor(a.to(d)), match="is zero and using it on lu_solve")
        on_both(lambda d, a=a: torch.linalg.inv_ex(a.to(d)))
        on_both(lambda d, a=a: torch.linalg.det(a.to(d)))
        on_both(lambda d, a=a: torch.linalg.slogdet(a.to(d)))
    nan = torch.tensor([[1.0, float("nan")], [2.0, 3.0]])
    on_both(lambda d: torch.linalg.svd(nan.to(d)), match="input matrix contained non-finite values")
    on_both(lambda d: torch.linalg.svdvals(torch.stack([torch.eye(2), nan]).to(d)), match="(Batch element 1)")
    on_both(lambda d: torch.linalg.eig(nan.to(d)), match="should not contain infs or NaNs")
    on_both(lambda d: torch.linalg.lu_factor(torch.eye(2, device=d), pivot=False), match="LU without pivoting")
    on_both(lambda d: torch.linalg.svd(torch.ones(2, 2, dtype=torch.long, device=d)), match="floating point or complex")
    on_both(
        lambda d: torch.linalg.svd(torch.ones(2, 2, dtype=torch.half, device=d)), match="not implemented for 'Half'"
    )
    on_both(lambda d: torch.linalg.inv(torch.ones(2, 3, device=d)), match="must be batches of square matrices")
    on_both(lambda d: torch.linalg.lstsq(torch.ones(3, 2, device=d), torch.ones(3, 1, device=d), driver="x"))


def test_errors_inside_compiled_programs():
    """The non-_ex forms raise CPU's message when the program's check is read."""

    @torch.compile(backend="jax", fullgraph=True)
    def inverse(a):
        return torch.linalg.inv(a) * 2

    good = torch.randn(3, 3, dtype=torch.float64)
    assert_same(inverse(good.to(JAX)), torch.linalg.inv(good) * 2, rtol=1e-12, atol=1e-12)
    with pytest.raises(torch.linalg.LinAlgError, match="The diagonal element 2 is zero"):
        inverse(torch.tensor([[1.0, 2.0], [2.0, 4.0]], dtype=torch.float64, device=JAX)).cpu()

    @torch.compile(backend="jax", fullgraph=True)
    def factor(a):
        return torch.linalg.cholesky(a) + 1

    p = _pd(3)
    assert_same(factor(p.to(JAX)), torch.linalg.cholesky(p) + 1, rtol=1e-12, atol=1e-12)
    with pytest.raises(torch.linalg.LinAlgError, match="leading minor of order 2"):
        factor(torch.tensor([[1.0, 2.0], [2.0, 1.0]], dtype=torch.float64, device=JAX)).cpu()


def _reconstruct_svd(u, s, vh):
    k = s.shape[-1]
    return (u[..., :, :k] * s[..., None, :].to(u.dtype)) @ vh[..., :k, :]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(4, 3), (3, 4), (2, 5, 5), (2, 1, 6, 2)])
def test_svd_gauge_invariant(dtype, shape):
    a = torch.randn(*shape, dtype=dtype)
    for full in (True, False):
        u, s, vh = torch.linalg.svd(a.to(JAX), full_matrices=full)
        cu, cs, cvh = torch.linalg.svd(a, full_matrices=full)
        assert_same(s, cs, rtol=TOL[dtype], atol=TOL[dtype])
        for got, want in ((u, cu), (vh, cvh)):
            assert got.shape == want.shape and got.stride() == want.stride(), (got.stride(), want.stride())
        tol = 10 * TOL[dtype]
        assert_same(_reconstruct_svd(u, s, vh), a, rtol=tol, atol=tol)
        eye = torch.eye(u.shape[-1], dtype=dtype)
        assert_same(u.mH @ u, eye.expand(u.mH.shape[:-1] + (u.shape[-1],)), rtol=tol, atol=tol)
        # the gauge: |U| and |Vh| agree with CPU's for distinct singular values
        k = cs.shape[-1]
        assert_same(u[..., :k].abs(), cu[..., :k].abs(), rtol=1e3 * TOL[dtype], atol=1e3 * TOL[dtype])
    assert_same(torch.linalg.svdvals(a.to(JAX)), torch.linalg.svdvals(a), rtol=TOL[dtype], atol=TOL[dtype])
    _, s, _ = torch.svd(a.to(JAX), compute_uv=False)
    assert_same(s, torch.svd(a, compute_uv=False)[1], rtol=TOL[dtype], atol=TOL[dtype])


@pytest.mark.parametrize("dtype", DTYPES)
def test_eigh_and_eig_gauge_invariant(dtype):
    h = _pd(2, n=5, dtype=dtype) - 5 * torch.eye(5, dtype=dtype)
    tol = 10 * TOL[dtype]
    for uplo in ("L", "U"):
        # only the named triangle is read: garbage in the other one must not matter
        garbage = h + (torch.triu(torch.ones(5, 5), 1) if uplo == "L" else torch.tril(torch.ones(5, 5), -1)).to(dtype)
        w, v = torch.linalg.eigh(garbage.to(JAX), UPLO=uplo)
        cw, cv = torch.linalg.eigh(garbage, UPLO=uplo)
        assert_same(w, cw, rtol=tol, atol=tol)
        assert v.stride() == cv.stride()
        assert_same((v * w[..., None, :].to(dtype)) @ v.mH, h, rtol=tol, atol=tol)
        assert_same(v.abs(), cv.abs(), rtol=1e3 * TOL[dtype], atol=1e3 * TOL[dtype])
        assert_same(torch.linalg.eigvalsh(garbage.to(JAX), UPLO=uplo), cw, rtol=tol, atol=tol)
    a = torch.randn(2, 4, 4, dtype=dtype)
    w, v = torch.linalg.eig(a.to(JAX))
    cw, cv = torch.linalg.eig(a)
    assert w.dtype == cw.dtype and v.stride() == cv.stride()
    assert_same(a.to(JAX).to(w.dtype) @ v, v * w[..., None, :], rtol=tol, atol=tol)
    key = lambda t: torch.sort(t.real * 1e3 + t.imag, dim=-1).values
    assert_same(key(w), key(cw), rtol=tol, atol=tol)
    assert_same(key(torch.linalg.eigvals(a.to(JAX))), key(cw), rtol=tol, atol=tol)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(4, 3), (3, 4), (2, 3, 3)])
def test_qr_family_like_cpu(dtype, shape):
    a = torch.randn(*shape, dtype=dtype)
    for mode in ("reduced", "complete", "r"):
        _same(lambda x, mode=mode: torch.linalg.qr(x, mode), a, dtype=dtype)
    _same(torch.geqrf, a, dtype=dtype)
    h, tau = torch.geqrf(a)
    if shape[-2] >= shape[-1]:
        _same(torch.linalg.householder_product, h, tau, dtype=dtype)
        _same(torch.linalg.householder_product, h, tau[..., :1], dtype=dtype)
    m = shape[-2]
    for left in (True, False):
        for transpose in (True, False):
            c = torch.randn(*shape[:-2], m, 2, dtype=dtype) if left else torch.randn(*shape[:-2], 2, m, dtype=dtype)
            _same(
                lambda p, q, r, left=left, transpose=transpose: torch.ormqr(p, q, r, left, transpose),
                h,
                tau,
                c,
                dtype=dtype,
            )


@pytest.mark.parametrize("dtype", DTYPES)
def test_matrix_exp_lstsq_pinv_like_cpu(dtype):
    m = torch.randn(2, 4, 4, dtype=dtype)
    if dtype in (torch.float32, torch.complex64):
        # evaluated in float64/complex128 and rounded once: CPU's own error is beyond TOL here, and
        # jax must be no farther than CPU from the wide result (tests/ops/test_linalg.py)
        exact = torch.linalg.matrix_exp(m.to(torch.complex128 if dtype.is_complex else torch.float64))
        got = torch.linalg.matrix_exp(m.to(JAX))
        assert (
            got.dtype == dtype and (got.cpu() - exact).abs().max() <= (torch.linalg.matrix_exp(m) - exact).abs().max()
        )
    else:
        _same(torch.linalg.matrix_exp, m, dtype=dtype)
    _same(torch.linalg.matrix_exp, m[0] * 0, dtype=dtype)
    a, b = torch.randn(2, 5, 3, dtype=dtype), torch.randn(2, 5, 2, dtype=dtype)
    for driver in (None, "gels", "gelsy", "gelsd", "gelss"):
        _same(lambda p, q, driver=driver: tuple(torch.linalg.lstsq(p, q, driver=driver)), a, b, dtype=dtype)
        _same(lambda p, q, driver=driver: tuple(torch.linalg.lstsq(p.mT, q[:, :3], driver=driver)), a, b, dtype=dtype)
    _same(torch.linalg.pinv, a, dtype=dtype, stride=False)
    # x.mH @ x: full rank. (x @ x.mH, 5x5 of rank 3, has two eigenvalues of rounding noise at the
    # cut-off, kept on one side and dropped on the other by chance: 3.9e-4 apart in float32.)
    _same(lambda x: torch.linalg.pinv(x.mH @ x, hermitian=True), a, dtype=dtype, stride=False)
    _same(torch.linalg.matrix_rank, a, dtype=dtype)
    _same(lambda x: torch.linalg.matrix_norm(x, "nuc"), a, dtype=dtype)
    _same(lambda x: torch.linalg.cond(x[:, :3]), a, dtype=dtype)
    _same(lambda x: torch.linalg.tensorinv(x[0].reshape(4, 2, 2), ind=1), m, dtype=dtype, stride=False)
    _same(lambda x, y: torch.linalg.tensorsolve(x[0].reshape(4, 2, 2), y[0, 0]), m, m, dtype=dtype, stride=False)


@pytest.mark.parametrize("shape", [(0, 0), (3, 0), (0, 3), (2, 0, 0)])
def test_empty_matrices_like_cpu(shape):
    a = torch.randn(*shape, dtype=torch.float64)
    for fn in (
        lambda x: tuple(torch.linalg.svd(x)),
        lambda x: tuple(torch.linalg.svd(x, full_matrices=False)),
        lambda x: tuple(torch.linalg.qr(x, "complete")),
        lambda x: tuple(torch.linalg.lu(x)),
        lambda x: tuple(torch.linalg.lu_factor_ex(x)),
    ):
        _same(fn, a, dtype=torch.float64, stride=False)
    if shape[-1] == shape[-2]:
        for fn in (
            torch.linalg.det,
            torch.linalg.slogdet,
            torch.linalg.inv,
            torch.linalg.eigh,
            torch.linalg.cholesky_ex,
        ):
            _same(
                lambda x, fn=fn: fn(x) if not isinstance(fn(x), tuple) else tuple(fn(x)),
                a,
                dtype=torch.float64,
                stride=False,
            )


SMOOTH = {
    "det": torch.linalg.det,
    "slogdet": lambda x: torch.linalg.slogdet(x).logabsdet,
    "inv": torch.linalg.inv,
    "solve": lambda x: torch.linalg.solve(x, x[..., :2] + 1),
    "cholesky": lambda x: torch.linalg.cholesky(x @ x.mT + 4 * torch.eye(4, dtype=x.dtype, device=x.device)),
    "eigvalsh": lambda x: torch.linalg.eigvalsh(x + x.mT),
    "svdvals": torch.linalg.svdvals,
    "qr_r_abs": lambda x: torch.linalg.qr(x).R.diagonal(dim1=-2, dim2=-1).abs(),
    "lu_solve": lambda x: torch.linalg.lu_solve(*torch.linalg.lu_factor(x), x[..., :2]),
    "solve_triangular": lambda x: torch.linalg.solve_triangular(
        x + 4 * torch.eye(4, device=x.device, dtype=x.dtype), x, upper=True
    ),
    "pinv": torch.linalg.pinv,
    "matrix_exp": torch.linalg.matrix_exp,
    "lstsq": lambda x: torch.linalg.lstsq(x, x[..., :2] + 1).solution,
}


@pytest.mark.parametrize("name", list(SMOOTH))
def test_gradients_like_cpu(name):
    x = torch.randn(2, 4, 4, dtype=torch.float64)
    check(SMOOTH[name], x, rtol=1e-8, atol=1e-8)


def _ones(*shape, dtype=torch.float32):
    return lambda d: torch.ones(*shape, dtype=dtype, device=d)


_LONG, _HALF = torch.long, torch.half
INVALID = {
    "inv int": lambda d: torch.linalg.inv(_ones(3, 3, dtype=_LONG)(d)),
    "inv half": lambda d: torch.linalg.inv(_ones(3, 3, dtype=_HALF)(d)),
    "det half": lambda d: torch.linalg.det(_ones(3, 3, dtype=_HALF)(d)),
    "slogdet half": lambda d: torch.linalg.slogdet(_ones(3, 3, dtype=_HALF)(d)),
    "solve mixed": lambda d: torch.linalg.solve(_ones(3, 3)(d), _ones(3, dtype=torch.float64)(d)),
    "solve shape": lambda d: torch.linalg.solve(_ones(3, 3)(d), _ones(4)(d)),
    "cholesky int": lambda d: torch.linalg.cholesky(_ones(3, 3, dtype=_LONG)(d)),
    "cholesky nonsquare": lambda d: torch.linalg.cholesky(_ones(2, 3)(d)),
    "qr mode": lambda d: torch.linalg.qr(_ones(3, 3)(d), mode="foo"),
    "eigh int": lambda d: torch.linalg.eigh(_ones(3, 3, dtype=_LONG)(d)),
    "eig int": lambda d: torch.linalg.eig(_ones(3, 3, dtype=_LONG)(d)),
    "eigvals half": lambda d: torch.linalg.eigvals(_ones(3, 3, dtype=_HALF)(d)),
    "svd 1d": lambda d: torch.linalg.svd(_ones(3)(d)),
    "svd driver": lambda d: torch.linalg.svd(_ones(3, 3)(d), driver="gesvd"),
    "lu int": lambda d: torch.linalg.lu_factor(_ones(3, 3, dtype=_LONG)(d)),
    "lu_solve half": lambda d: torch.linalg.lu_solve(
        _ones(3, 3, dtype=_HALF)(d), _ones(3, dtype=torch.int32)(d), _ones(3, 1, dtype=_HALF)(d)
    ),
    "lu_solve pivots": lambda d: torch.linalg.lu_solve(
        torch.eye(3, device=d), torch.tensor([4, 1, 1], dtype=torch.int32, device=d), _ones(3, 1)(d)
    ),
    "lu_unpack pivots": lambda d: torch.lu_unpack(
        torch.eye(3, device=d), torch.tensor([0, 1, 1], dtype=torch.int32, device=d)
    ),
    "solve_triangular shape": lambda d: torch.linalg.solve_triangular(_ones(3, 3)(d), _ones(4, 3)(d), upper=True),
    "cholesky_inverse int": lambda d: torch.cholesky_inverse(_ones(3, 3, dtype=_LONG)(d)),
    "householder_product shape": lambda d: torch.linalg.householder_product(_ones(2, 3)(d), _ones(2)(d)),
    "geqrf 1d": lambda d: torch.geqrf(_ones(3)(d)),
    "matrix_exp int": lambda d: torch.linalg.matrix_exp(_ones(3, 3, dtype=_LONG)(d)),
    "lstsq driver": lambda d: torch.linalg.lstsq(_ones(3, 2)(d), _ones(3, 1)(d), driver="x"),
    "lstsq dtypes": lambda d: torch.linalg.lstsq(_ones(3, 3)(d), _ones(3, 1, dtype=torch.float64)(d)),
    "lstsq int": lambda d: torch.linalg.lstsq(_ones(3, 3, dtype=_LONG)(d), _ones(3, 3, dtype=_LONG)(d)),
    "lstsq rows": lambda d: torch.linalg.lstsq(_ones(3, 3)(d), _ones(4, 2)(d)),
}


@pytest.mark.parametrize("name", list(INVALID))
def test_invalid_arguments_raise_cpus_error(name):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(Exception) as cpu:
            INVALID[name]("cpu")
        with pytest.raises(type(cpu.value)) as dev:
            fn_synced(INVALID[name])  # a pivot out of range is a value check: fused eager raises it at the sync
    if isinstance(dev.value, fallback.PlatformGapError):  # the platform lacks it, the fallback forbidden: a skip
        raise dev.value
    assert str(dev.value) == str(cpu.value)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("hermitian", [False, True])
def test_ldl_like_lapack(dtype, hermitian):
    """Bunch-Kaufman as ?sytf2 / ?hetf2 does it: the same 1x1 / 2x2 pivots, interchanges and factor."""
    for n in (1, 3, 70):
        a = torch.randn(3, n, n, dtype=dtype)
        if n > 1:
            a[1, 0, 0] = 0  # forces a 2x2 pivot or an interchange
        a = a + (a.mH if hermitian else a.mT)
        # n = 70 is blocked on CPU: the same pivots, the rounding of another summation order
        tol = TOL[dtype] if n < 70 else 100 * TOL[dtype]
        for got, want in zip(
            torch.linalg.ldl_factor_ex(a.to(JAX), hermitian=hermitian),
            torch.linalg.ldl_factor_ex(a, hermitian=hermitian),
        ):
            assert_same(got, want, rtol=tol, atol=tol, check_stride=True)
        ld, piv, _ = torch.linalg.ldl_factor_ex(a, hermitian=hermitian)
        b = torch.randn(3, n, 2, dtype=dtype)
        tol = 100 * TOL[dtype] if n < 70 else 1e3 * TOL[dtype]
        x = torch.linalg.ldl_solve(ld.to(JAX), piv.to(JAX), b.to(JAX), hermitian=hermitian)
        assert_same(x, torch.linalg.ldl_solve(ld, piv, b, hermitian=hermitian), rtol=tol, atol=tol, check_stride=True)
    singular = torch.zeros(2, 3, 3, dtype=dtype)
    _same(lambda x: tuple(torch.linalg.ldl_factor_ex(x, hermitian=hermitian)), singular, dtype=dtype)
    on_both(lambda d: torch.linalg.ldl_factor(singular.to(d)), match="Unknown error code: 1.")
