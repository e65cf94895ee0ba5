"""Overloads the aten-level audit (coverage/aten.yaml) found differing from CPU, each against CPU PyTorch
with JAXDEV_FALLBACK=error: values, dtypes, shapes, strides of results and of out= tensors, error types
and messages."""

from __future__ import annotations

import warnings

import pytest
import torch
from jaxdev_testing import CPU, JAX, assert_same, on_both

aten = torch.ops.aten

pytestmark = pytest.mark.usefixtures("no_fallback")  # tests/conftest.py


def like_cpu(fn, *, rtol=0.0, atol=0.0, check_stride=True):
    """fn(device) on CPU and on jax: equal results (strides too), or the same error type and message."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # resize and complex-cast warnings: both sides give them
        try:
            expected = fn(CPU)
        except Exception as cpu_err:
            with pytest.raises(type(cpu_err)) as jax_err:
                fn(JAX)
            # a message that names the device names the other one
            assert str(jax_err.value).replace("device=jax:0", "device=cpu") == str(cpu_err)
            return None
        return on_both(fn, rtol=rtol, atol=atol, check_stride=check_stride) if expected is not None else None


def _t(x, device):
    return x.to(device)


# --- _stack.out: CPU's kernel stacks (the default backend kernel concatenates) -------------------------


@pytest.mark.parametrize("dim", [0, 1, 2, -1, -3, 3])
def test_stack_out_stacks(dim):
    x, y = torch.randn(3, 4), torch.randn(3, 4)

    def run(d):
        out = torch.empty(0, device=d)
        r = aten._stack.out([x.to(d), y.to(d)], dim, out=out)
        assert r is out
        return out

    like_cpu(run)


@pytest.mark.parametrize(
    "out",
    [
        torch.empty(0, dtype=torch.float64),
        torch.empty(2, 3, 4, dtype=torch.float64),  # already the right shape: written in place
        torch.empty(4, 3, 2, dtype=torch.float64).transpose(0, 2),  # right shape, transposed strides
        torch.empty(5, dtype=torch.float64),  # resized (with the deprecation warning)
        torch.empty(0, dtype=torch.int64),  # float results can't be cast to int: TypeError
        torch.empty(0, dtype=torch.float16),
    ],
)
def test_stack_out_dtype_and_layout_like_cpu(out):
    x, y = torch.randn(3, 4), torch.randn(3, 4, dtype=torch.float64)
    like_cpu(lambda d: aten._stack.out([x.to(d), y.to(d)], 0, out=out.clone().to(d)))


def test_stack_out_errors_like_cpu():
    x, y = torch.randn(3, 3), torch.randn(3, 4)
    like_cpu(lambda d: aten._stack.out([x.to(d), y.to(d)], out=torch.empty(0, device=d)))
    like_cpu(lambda d: aten._stack.out([x.to(d), x.to(d)], 3, out=torch.empty(0, device=d)))


def test_cat_out_casts_each_input_to_out_dtype():
    # CPU copies each input straight into out: an int64 beside a float32 stays exact in a float64 out
    # (promoting to float32 first would round 2**40 + 1).
    a, b = torch.tensor([2**40 + 1]), torch.tensor([1.5])
    r = like_cpu(lambda d: torch.cat([a.to(d), b.to(d)], out=torch.empty(0, dtype=torch.float64, device=d)))
    assert r[0].item() == 2**40 + 1
    like_cpu(lambda d: torch.stack([a.to(d), b.to(d)], out=torch.empty(0, dtype=torch.float64, device=d)))
    x, z = torch.randn(2, 3), torch.randn(2, 3, dtype=torch.float64)
    like_cpu(lambda d: torch.cat([x.to(d), z.to(d)], out=torch.empty(0, dtype=torch.int64, device=d)))
    like_cpu(lambda d: torch.cat([x.int().to(d), x.bool().to(d)], out=torch.empty(0, dtype=torch.bool, device=d)))
    like_cpu(lambda d: torch.cat([x.to(d), z.to(d)], 1, out=torch.empty(3, 4, dtype=torch.float64, device=d).t()))


# --- unique_dim / unique_dim_consecutive / unique_consecutive(dim=) ------------------------------------


def _rows():
    g = torch.Generator().manual_seed(0)
    return torch.randint(0, 2, (2, 3, 5, 2), generator=g)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.int64, torch.uint8, torch.bool, torch.float16])
@pytest.mark.parametrize("dim", [0, 1, 2, 3, -1, -2])
def test_unique_dim_like_cpu(dtype, dim):
    x = _rows().to(dtype)
    # CPU always computes the inverse and the counts; the unique slices are laid out moved from dim 0.
    like_cpu(lambda d: aten.unique_dim(x.to(d), dim))
    like_cpu(lambda d: aten.unique_dim(x.to(d), dim, True, True, True))
    like_cpu(lambda d: aten.unique_dim_consecutive(x.to(d), dim))
    like_cpu(lambda d: torch.unique(x.to(d), dim=dim, return_inverse=True, return_counts=True))
    like_cpu(lambda d: torch.unique_consecutive(x.to(d), dim=dim, return_counts=True))


def test_unique_dim_sorted_rows_inverse_counts():
    x = torch.tensor([[1.0, 2, 3], [0, 1, 2], [1, 2, 3], [0, 1, 2], [-0.0, 1, 2.5]])
    r = like_cpu(lambda d: aten.unique_dim(x.to(d), 0))
    assert r[0].cpu().tolist() == [[0, 1, 2], [0, 1, 2.5], [1, 2, 3]]
    assert r[1].cpu().tolist() == [2, 0, 2, 0, 1]
    assert r[2].cpu().tolist() == [2, 1, 2]
    like_cpu(lambda d: aten.unique_dim(x.to(d), 1))
    like_cpu(lambda d: aten.unique_dim_consecutive(x.to(d), 0, True, True))
    like_cpu(lambda d: aten.unique_consecutive(x.to(d), True, True, 1))
    like_cpu(lambda d: aten.unique_consecutive(x.to(d), True, True))  # dim=None: flat, as before


def test_unique_dim_edges_like_cpu():
    x = _rows().float()
    like_cpu(lambda d: aten.unique_dim(x[0, 0, 0, 0].to(d), 0))  # 0-dim: IndexError
    like_cpu(lambda d: aten.unique_dim(x[0, 0, 0].to(d), -1))
    like_cpu(lambda d: aten.unique_dim(x.to(d), 4))
    like_cpu(lambda d: aten.unique_dim(x.to(torch.complex64).to(d), 0))  # NotImplementedError
    like_cpu(lambda d: aten.unique_dim_consecutive(x.to(torch.complex64).to(d), 0))
    like_cpu(lambda d: aten.unique_dim(x[:0].to(d), 0))  # the selected dim is empty
    like_cpu(lambda d: aten.unique_dim(x[:, :0].to(d), 0))  # another dim is
    like_cpu(lambda d: aten.unique_dim(torch.zeros(0, 0).to(d), 0))  # more than one is
    like_cpu(lambda d: aten.unique_dim(torch.zeros(4, 0, 2).to(d), 1))


@pytest.mark.parametrize("op", [aten.unique_dim.out, aten.unique_dim_consecutive.out])
def test_unique_dim_out_like_cpu(op):
    x = _rows().float()

    def run(d, dtypes=(torch.float32, torch.int64, torch.int64)):
        outs = [torch.empty(0, dtype=t, device=d) for t in dtypes]
        r = op(x.to(d), 1, out0=outs[0], out1=outs[1], out2=outs[2])
        assert all(a is b for a, b in zip(r, outs))
        return outs

    like_cpu(run)
    like_cpu(lambda d: run(d, (torch.float32, torch.int64, torch.int32)))  # exact dtypes: RuntimeError
    like_cpu(lambda d: run(d, (torch.float16, torch.int64, torch.int64)))


# --- _lazy_clone: a copy-on-write clone on CPU ------------------------------------------------------------


def test_lazy_clone_keeps_layout_and_copies():
    for d in (CPU, JAX):
        x = torch.arange(12.0, device=d).reshape(3, 4).requires_grad_()
        v = x.t()[1:]
        c = aten._lazy_clone(v)
        # CPU's lazy clone shares v's storage until a write: same sizes, strides and offset
        assert (c.shape, c.stride(), c.storage_offset()) == (v.shape, (1, 4), 1)
        assert c.untyped_storage().nbytes() == v.untyped_storage().nbytes()
        assert c.device == v.device
        assert_same(c.detach().to(JAX), v.detach().cpu())
        c.sum().backward()  # gradient flows through (LazyCloneBackward0)
        assert_same(x.grad.to(JAX), torch.ones(3, 4).index_fill_(1, torch.tensor([0]), 0))
        # writes to either side stay apart
        with torch.no_grad():
            x.add_(100)
        assert c.detach().cpu().tolist() == [[1.0, 5, 9], [2, 6, 10], [3, 7, 11]]
        c2 = aten._lazy_clone(x.detach())
        c2.mul_(2)
        assert x[0, :2].tolist() == [100.0, 101.0] and c2[0, :2].tolist() == [200.0, 202.0]


# --- kaiser_window: PyTorch's factory calls a CPU kernel stub with no jax entry ----------------------------


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("args", [(5,), (8, False), (6, True, 3.5), (7, False, -2.0), (2, False, 0.0), (300,)])
def test_kaiser_window_like_cpu(dtype, args):
    tol = {torch.float32: 2e-6, torch.float64: 1e-13, torch.float16: 1e-3, torch.bfloat16: 8e-3}[dtype]
    like_cpu(lambda d: torch.kaiser_window(*args, dtype=dtype, device=d), rtol=tol, atol=tol)


def test_kaiser_window_overloads_and_edges():
    like_cpu(lambda d: aten.kaiser_window.default(9, device=d), rtol=2e-6, atol=2e-6)
    like_cpu(lambda d: aten.kaiser_window.periodic(9, False, device=d), rtol=2e-6, atol=2e-6)
    like_cpu(lambda d: aten.kaiser_window.beta(9, True, 4.0, device=d), rtol=2e-6, atol=2e-6)
    for n in (0, 1):
        like_cpu(lambda d, n=n: torch.kaiser_window(n, dtype=torch.float64, device=d))
    like_cpu(lambda d: torch.kaiser_window(3, True, float("inf"), device=d))  # NaN, as CPU
    like_cpu(lambda d: torch.kaiser_window(-1, device=d))  # RuntimeError (the composite's own check)
    like_cpu(lambda d: torch.kaiser_window(3, dtype=torch.complex64, device=d))  # arange's NotImplementedError
    w = torch.kaiser_window(4, dtype=torch.float64, device=JAX, requires_grad=True)
    assert w.requires_grad and w.is_leaf


def test_kaiser_window_out_like_cpu():
    for dtype in (torch.float32, torch.float64):
        like_cpu(
            lambda d, t=dtype: aten.kaiser_window.beta_out(6, False, 2.5, out=torch.empty(0, dtype=t, device=d)),
            rtol=2e-6,
            atol=2e-6,
        )
        like_cpu(lambda d, t=dtype: aten.kaiser_window.out(5, out=torch.empty(3, dtype=t, device=d)), atol=2e-6)
        like_cpu(
            lambda d, t=dtype: aten.kaiser_window.periodic_out(5, False, out=torch.empty(0, dtype=t, device=d)),
            atol=2e-6,
        )
    like_cpu(lambda d: aten.kaiser_window.out(5, out=torch.empty(0, dtype=torch.int64, device=d)))


# --- polygamma_: in place the arguments come the other way round ---------------------------------------------


@pytest.mark.parametrize("n", [0, 1, 2, 3])
def test_polygamma_inplace_like_cpu(n):
    x = torch.rand(20, generator=torch.Generator().manual_seed(n)) * 4 + 0.25

    def run(d):
        t = x.clone().to(d)
        r = t.polygamma_(n)
        assert r is t
        return t

    like_cpu(run, rtol=1e-5, atol=1e-6)
    like_cpu(lambda d: aten.polygamma_(x.to(torch.float64).to(d), n), rtol=1e-10, atol=1e-12)


def test_polygamma_inplace_errors_like_cpu():
    like_cpu(lambda d: torch.arange(3, device=d).polygamma_(1))  # float result into int64: RuntimeError
    x = torch.tensor([0.5, 1.5, 3.0])
    like_cpu(lambda d: x.clone().to(d).polygamma_(-1))
    like_cpu(lambda d: x.half().to(d).polygamma_(0), rtol=1e-3, atol=1e-3)


# --- unfold_backward ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "grad_shape, sizes, dim, size, step",
    [
        ((3, 2, 2), [3, 3], 1, 2, 1),  # overlapping windows add up
        ((2, 2, 2), [5, 2], 0, 2, 2),
        ((2, 1), [3, 2], 0, 1, 2),  # a position no window covers stays zero
        ((3, 2), [4], 0, 2, 1),
        ((1,), [], 0, 1, 1),  # a 0-dim input: one window of one element
        ((), [1], 0, 1, 1),  # the audit's trial: step >= size copies a grad that broadcasts, as CPU
        ((), [], 0, 1, 1),
        ((1, 1, 1), [1], 0, 1, 1),  # does not broadcast: copy_'s error
        ((2, 1), [3], 0, 1, 2),
        ((2, 2), [3], 0, 1, 2),
        ((2, 1), [3], 0, 1, 0),  # step 0: ValueError
        ((2, 1), [3], 2, 1, 1),  # dim out of range: IndexError
        ((2, 1), [3], 0, -1, 1),
    ],
)
def test_unfold_backward_like_cpu(grad_shape, sizes, dim, size, step):
    g = torch.arange(1.0, 1.0 + torch.Size(grad_shape).numel()).reshape(grad_shape)
    like_cpu(lambda d: aten.unfold_backward(g.to(d), sizes, dim, size, step))
    like_cpu(lambda d: aten.unfold_backward(g.bool().to(d), sizes, dim, size, step))
    like_cpu(lambda d: aten.unfold_backward.out(g.to(d), sizes, dim, size, step, out=torch.empty(0, device=d)))


def test_unfold_backward_refuses_what_cpu_reads_out_of_bounds():
    # Overlapping windows with a grad of another shape: CPU's kernel reads past it (garbage); refused here.
    with pytest.raises(RuntimeError, match="unfolding a tensor of shape"):
        aten.unfold_backward(torch.tensor(2.5, device=JAX), [3], 0, 2, 1)
    with pytest.raises(RuntimeError, match="maximum size for tensor at dimension 0 is 3 but size is 5"):
        aten.unfold_backward(torch.ones(2, 1, device=JAX), [3], 0, 5, 2)


def test_unfold_backward_is_tensor_unfold_gradient():
    x = torch.randn(7, 3)

    def run(d):
        t = x.to(d).requires_grad_()
        (t.unfold(0, 3, 1) * torch.arange(15.0).reshape(5, 3, 3).to(d)).sum().backward()
        return t.grad

    like_cpu(run, rtol=1e-6, atol=1e-6)


# --- FFT out=: CPU computes, resizes out and copy_'s the result in (a cast, whatever out's dtype) ----------------


_OUT_DTYPES = [torch.complex64, torch.complex128, torch.float32, torch.float64, torch.float16, torch.int32]


@pytest.mark.parametrize("out_dtype", _OUT_DTYPES)
def test_fft_c2c_out_like_cpu(out_dtype):
    x = torch.randn(5, 6, 4, dtype=torch.complex64, generator=torch.Generator().manual_seed(1))
    for out in (
        torch.empty(0, dtype=out_dtype),
        torch.empty(5, 6, 4, dtype=out_dtype),
        torch.empty(3, dtype=out_dtype),
    ):
        like_cpu(lambda d, o=out: aten._fft_c2c.out(x.to(d), [1], 1, False, out=o.clone().to(d)), rtol=1e-5, atol=1e-5)
    transposed = torch.empty(4, 6, 5, dtype=out_dtype).transpose(0, 2)
    like_cpu(lambda d: aten._fft_c2c.out(x.to(d), [0, 2], 2, True, out=transposed.clone().to(d)), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("out_dtype", _OUT_DTYPES)
@pytest.mark.parametrize("onesided", [True, False])
@pytest.mark.parametrize("shape", [(2, 3, 6), (2, 3, 2), (4, 3, 5)])
def test_fft_r2c_out_like_cpu(out_dtype, onesided, shape):
    # Two-sided into a real out: CPU mirrors the half it computed, which real dtypes cannot (NotImplementedError)
    # unless the last dim has at most 2 elements.
    y = torch.randn(shape, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
    like_cpu(
        lambda d: aten._fft_r2c.out(y.to(d), [0, 2], 2, onesided, out=torch.empty(0, dtype=out_dtype, device=d)),
        rtol=1e-5,
        atol=1e-5,
    )


@pytest.mark.parametrize("out_dtype", _OUT_DTYPES)
def test_fft_c2r_out_like_cpu(out_dtype):
    x = torch.randn(3, 5, dtype=torch.complex128, generator=torch.Generator().manual_seed(3))
    like_cpu(lambda d: aten._fft_c2r.out(x.to(d), [1], 2, 8, out=torch.empty(0, dtype=out_dtype, device=d)), atol=1e-5)


# --- normal.Tensor_float_out: out's own shape broadcasts with mean's ------------------------------------------------


@pytest.mark.parametrize(
    "mean_shape, out_shape",
    [((), (0,)), ((), (3,)), ((2, 3), (0,)), ((2, 3), (3, 2)), ((2, 3), (1, 3)), ((1, 3), (2, 1)), ((2, 3), (2, 3))],
)
def test_normal_tensor_float_out_shape_like_cpu(mean_shape, out_shape):
    mean = torch.zeros(mean_shape)

    def run(d):
        out = torch.empty(out_shape, device=d)
        r = aten.normal.Tensor_float_out(mean.to(d), 1.0, out=out)
        assert r is out
        return out.shape, out.dtype, out.stride()

    like_cpu(run)


def test_normal_tensor_float_out_values_and_errors():
    out = torch.empty(20000, dtype=torch.float64, device=JAX)
    aten.normal.Tensor_float_out(torch.tensor(3.0, device=JAX), 2.0, out=out)
    assert out.dtype == torch.float64
    assert abs(out.mean().item() - 3.0) < 0.1 and abs(out.std().item() - 2.0) < 0.1
    like_cpu(lambda d: aten.normal.Tensor_float_out(torch.zeros(2, device=d), -1.0, out=torch.empty(0, device=d)))
    like_cpu(lambda d: aten.normal.Tensor_float_out(torch.zeros(2, device=d), 1.0, out=torch.empty(0, device=d).long()))
    # the other overloads broadcast mean with std only (out resized to that), as before
    for d_ in ((2, 1), (3,)):
        like_cpu(
            lambda d, s=d_: (
                aten.normal.Tensor_Tensor_out(
                    torch.zeros(2, 1, device=d), torch.ones(s, device=d), out=torch.empty(0, device=d)
                ).shape
            )
        )
    like_cpu(lambda d: torch.normal(torch.zeros(2, 3, device=d), torch.ones(3, 2, device=d)))


# --- binary_cross_entropy: one dtype for every operand, as CPU's TensorIterator wants ------------------------------


def test_bce_dtypes_like_cpu():
    g = torch.Generator().manual_seed(4)
    s, t, w = torch.rand(2, 3, generator=g), torch.rand(2, 3, generator=g), torch.rand(3, generator=g)
    ones = torch.ones(2, 3)
    for out_dtype in (torch.float32, torch.float64, torch.float16, torch.int64):
        like_cpu(
            lambda d, o=out_dtype: aten.binary_cross_entropy.out(
                s.to(d), t.to(d), reduction=0, out=torch.empty(2, 3, dtype=o, device=d)
            ),
            rtol=1e-6,
            atol=1e-6,
        )
        like_cpu(
            lambda d, o=out_dtype: aten.binary_cross_entropy_backward.grad_input(
                ones.to(d), s.to(d), t.to(d), grad_input=torch.empty(2, 3, dtype=o, device=d)
            ),
            rtol=1e-6,
            atol=1e-6,
        )
    like_cpu(lambda d: aten.binary_cross_entropy(s.to(d), t.double().to(d)))
    like_cpu(lambda d: aten.binary_cross_entropy_backward(ones.to(d), s.to(d), t.double().to(d)))
    like_cpu(lambda d: aten.binary_cross_entropy_backward(ones.double().to(d), s.to(d), t.to(d)))
    # weight is applied afterwards (mul_), outside that check
    like_cpu(lambda d: aten.binary_cross_entropy(s.to(d), t.to(d), w.double().to(d)), rtol=1e-6, atol=1e-6)
    like_cpu(lambda d: aten.binary_cross_entropy(s.half().to(d), t.half().to(d), w.to(d)), rtol=1e-3, atol=1e-3)
    like_cpu(lambda d: torch.nn.functional.binary_cross_entropy(s.to(d), t.to(d), w.to(d)), rtol=1e-6, atol=1e-6)


def test_bce_out_of_the_result_shape_like_cpu():
    s, t = torch.tensor(0.3), torch.tensor(0.6)
    for red in (0, 1, 2):
        like_cpu(
            lambda d, r=red: aten.binary_cross_entropy.out(s.to(d), t.to(d), reduction=r, out=torch.empty((), device=d))
        )
    like_cpu(
        lambda d: aten.binary_cross_entropy_backward.grad_input(
            torch.tensor(1.0, device=d), s.to(d), t.to(d), grad_input=torch.empty((), device=d)
        )
    )


# --- linalg out=: a resized out takes the result's (column-major) strides; structured kernels want its dtype --------

_g = torch.Generator().manual_seed(5)
_A = torch.randn(4, 4, generator=_g) + 4 * torch.eye(4)
_S = _A @ _A.mT
_B = torch.randn(4, 2, generator=_g)
_TAU = torch.randn(4, generator=_g)
_LU, _PIV = torch.linalg.lu_factor(_A)
_LD, _PV = torch.linalg.ldl_factor(_S)
_L = torch.linalg.cholesky(_S)

# name -> (fn(device, outs), the out tensors' dtypes)
_LINALG_OUT = {
    "linalg_inv": (lambda d, o: torch.linalg.inv(_A.to(d), out=o[0]), "f"),
    "inverse": (lambda d, o: torch.inverse(_A.to(d), out=o[0]), "f"),
    "linalg_inv_ex": (lambda d, o: torch.linalg.inv_ex(_A.to(d), out=tuple(o)), "fi"),
    "linalg_qr": (lambda d, o: torch.linalg.qr(_A.to(d), out=tuple(o)), "ff"),
    "qr": (lambda d, o: torch.qr(_A.to(d), out=tuple(o)), "ff"),
    "linalg_svd": (lambda d, o: torch.linalg.svd(_A.to(d), out=tuple(o)), "fff"),
    "svd": (lambda d, o: torch.svd(_A.to(d), out=tuple(o)), "fff"),
    "linalg_eigh": (lambda d, o: torch.linalg.eigh(_S.to(d), out=tuple(o)), "ff"),
    "linalg_eig": (lambda d, o: torch.linalg.eig(_S.to(d), out=tuple(o)), "cc"),
    "geqrf": (lambda d, o: torch.geqrf(_A.to(d), out=tuple(o)), "ff"),
    "householder_product": (lambda d, o: torch.linalg.householder_product(_A.to(d), _TAU.to(d), out=o[0]), "f"),
    "ormqr": (lambda d, o: torch.ormqr(_A.to(d), _TAU.to(d), _B.to(d), out=o[0]), "f"),
    "ldl_solve": (lambda d, o: torch.linalg.ldl_solve(_LD.to(d), _PV.to(d), _B.to(d), out=o[0]), "f"),
    "lu_solve": (lambda d, o: torch.linalg.lu_solve(_LU.to(d), _PIV.to(d), _B.to(d), out=o[0]), "f"),
    "solve": (lambda d, o: torch.linalg.solve(_A.to(d), _B.to(d), out=o[0]), "f"),
    "solve_ex": (lambda d, o: torch.linalg.solve_ex(_A.to(d), _B.to(d), out=tuple(o)), "fi"),
    "solve_triangular": (
        lambda d, o: torch.linalg.solve_triangular(_A.triu().to(d), _B.to(d), upper=True, out=o[0]),
        "f",
    ),
    "triangular_solve": (lambda d, o: torch.triangular_solve(_B.to(d), _A.triu().to(d), out=tuple(o)), "ff"),
    "cholesky": (lambda d, o: torch.linalg.cholesky(_S.to(d), out=o[0]), "f"),
    "cholesky_ex": (lambda d, o: torch.linalg.cholesky_ex(_S.to(d), out=tuple(o)), "fi"),
    "cholesky_inverse": (lambda d, o: torch.cholesky_inverse(_L.to(d), out=o[0]), "f"),
    "cholesky_solve": (lambda d, o: torch.cholesky_solve(_B.to(d), _L.to(d), out=o[0]), "f"),
    "lu_factor": (lambda d, o: torch.linalg.lu_factor(_A.to(d), out=tuple(o)), "fi"),
    "lu": (lambda d, o: torch.linalg.lu(_A.to(d), out=tuple(o)), "fff"),
    "lu_unpack": (lambda d, o: torch.lu_unpack(_LU.to(d), _PIV.to(d), out=tuple(o)), "fff"),
    "ldl_factor": (lambda d, o: torch.linalg.ldl_factor(_S.to(d), out=tuple(o)), "fi"),
}
_KINDS = {"f": torch.float32, "i": torch.int32, "c": torch.complex64}


@pytest.mark.parametrize("name", list(_LINALG_OUT))
@pytest.mark.parametrize("given", ["empty", "other shape", "right shape", "float64"])
def test_linalg_out_layout_and_dtype_like_cpu(name, given):
    fn, kinds = _LINALG_OUT[name]

    def run(d):
        if given == "right shape":
            reference = fn(CPU, [torch.empty(0, dtype=_KINDS[k]) for k in kinds])
            reference = reference if isinstance(reference, tuple) else (reference,)
            outs = [torch.empty(r.shape, dtype=r.dtype, device=d) for r in reference]
        else:
            size = {"empty": 0, "other shape": 7, "float64": 0}[given]
            outs = [
                torch.empty(size, dtype=torch.float64 if given == "float64" and k == "f" else _KINDS[k], device=d)
                for k in kinds
            ]
        r = fn(d, outs)
        return tuple(outs) if isinstance(r, tuple) else outs[0]

    like_cpu(run, rtol=1e-4, atol=1e-4)


# --- log_sigmoid_forward: CPU's buffer (exp(-|x|)), and CPU's formula's +0 at +inf ---------------------------------


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.float16])
def test_log_sigmoid_forward_buffer_like_cpu(dtype):
    x = torch.tensor([-3.0, -0.5, 0.0, -0.0, 0.5, 3.0, float("inf"), -float("inf"), float("nan"), 30.0, -30.0])
    x = torch.cat([x, torch.randn(50, generator=torch.Generator().manual_seed(6)) * 8]).to(dtype)
    tol = 1e-6 if dtype in (torch.float32, torch.float64) else 0.0
    like_cpu(lambda d: aten.log_sigmoid_forward(x.to(d)), rtol=tol, atol=tol)
    like_cpu(
        lambda d: aten.log_sigmoid_forward.output(
            x.to(d), output=torch.empty(0, dtype=dtype, device=d), buffer=torch.empty(3, dtype=dtype, device=d)
        ),
        rtol=tol,
        atol=tol,
    )


# --- embedding_bag backward with an empty offset2bag (what CPU's sum-mode forward returns) --------------------------


@pytest.mark.parametrize("offsets", [[0, 2], [0, 0, 2, 5]])
@pytest.mark.parametrize("empty", [True, False])
def test_embedding_bag_backward_with_empty_offset2bag_like_cpu(offsets, empty):
    g = torch.Generator().manual_seed(7)
    w, idx, off = torch.randn(10, 5, generator=g), torch.tensor([1, 2, 4, 5, 4]), torch.tensor(offsets)
    grad = torch.randn(len(offsets), 5, generator=g)
    o2b = torch.empty(0, dtype=torch.long) if empty else torch.searchsorted(off, torch.arange(5), right=True) - 1
    bag_size, max_idx = torch.full((len(offsets),), 2), torch.zeros(len(offsets), dtype=torch.long)
    for mode in (0, 1):
        like_cpu(
            lambda d, m=mode: aten._embedding_bag_backward(
                grad.to(d), idx.to(d), off.to(d), o2b.to(d), bag_size.to(d), max_idx.to(d), 10, False, m, False, None
            ),
            rtol=1e-6,
            atol=1e-6,
        )
    like_cpu(
        lambda d: aten._embedding_bag_per_sample_weights_backward(
            grad.to(d), w.to(d), idx.to(d), off.to(d), o2b.to(d), 0
        ),
        rtol=1e-6,
        atol=1e-6,
    )


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.bfloat16, torch.int8])
def test_floor_divide_in_place_runs_on_jax(dtype):
    """`x //= y` (floor_divide_.Tensor) had no kernel: its overload name does not pair it with
    floor_divide.default, so it ran on the CPU fallback."""

    def divide(d):
        x = (torch.arange(-12, 12).reshape(4, 6) * 3).to(dtype).to(d)
        y = torch.tensor([5, -4, 7, 2, -3, 9]).to(dtype).to(d)
        x //= y
        return x

    like_cpu(divide)
    like_cpu(lambda d: torch.arange(6.0, device=d).floor_divide_(torch.ones(2, 6, device=d)))
    like_cpu(lambda d: torch.arange(6, device=d).floor_divide_(torch.zeros(6, dtype=torch.long, device=d)))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("norm_type", [1.0, 2.0, 3.0, float("inf")])
def test_embedding_renorm_runs_on_jax(dtype, norm_type):
    """nn.Embedding(max_norm=...) renormalises the looked-up rows in place (embedding_renorm_ ran on
    the CPU fallback): rows named twice are scaled once, rows within max_norm are left alone."""
    weight = (torch.randn(10, 4, generator=torch.Generator().manual_seed(3)) * 2).to(dtype)
    index = torch.tensor([1, 3, 3, 7, 0, 9])

    def renorm(d):
        w = weight.to(d)
        torch.embedding_renorm_(w, index.to(d), 1.5, norm_type)
        return w

    like_cpu(renorm, rtol=2e-7, atol=1e-6)  # float32: the norm's summation order, 1 ulp at most
    like_cpu(lambda d: torch.embedding_renorm_(weight.to(d), torch.tensor([-2, 4], device=d), 1.0, norm_type))
    for bad in ([3, 10, 12], [-11, 2]):
        like_cpu(lambda d, bad=bad: torch.embedding_renorm_(weight.to(d), torch.tensor(bad, device=d), 1.0, 2.0))


def test_embedding_with_max_norm_trains_on_jax():
    def step(d):
        torch.manual_seed(0)
        emb = torch.nn.Embedding(12, 5, max_norm=1.0).to(d)
        out = emb(torch.tensor([[1, 2, 2], [11, 0, 5]], device=d))
        out.pow(2).sum().backward()
        return out.detach(), emb.weight.detach(), emb.weight.grad

    like_cpu(step, rtol=1e-6, atol=1e-6)
