"""torch.complex32 (ComplexHalf) on jax as CPU serves it (jaxdev/ops/carriers/complex_half.py and
complex_half_values.py): the ops CPU has ComplexHalf kernels for give CPU's dtypes and CPU's bits
(arithmetic: up to the payload and sign of a NaN, which CPU's vector code picks by operand order),
the rest refuse in one sentence naming the op and ComplexHalf, and new complex32 tensors warn once
that ComplexHalf support is experimental. Before: every complex32 tensor on jax raised
"JAX has no equivalent type" (PyTorch's test_torch test_copy_, test_complex_half_experimental_warning,
test_deterministic_empty and test_view_ops' view_as_real of complex32 failed)."""

from __future__ import annotations

import warnings

import pytest
import torch

import jaxdev  # noqa: F401

C32 = torch.complex32


def halves(device, n, seed):
    """n complex32 values over seeded random bits: normals, subnormals, zeros, infinities, NaNs."""
    g = torch.Generator().manual_seed(seed)
    return torch.randint(-32768, 32768, (2 * n,), generator=g, dtype=torch.int32).to(torch.int16).view(C32).to(device)


def normals(device, n, seed):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, dtype=torch.complex64, generator=g).to(C32).to(device)


def _parts(t):
    """t's values as integers of its bits, NaN-marked: (bits, is_nan) of each half or float part."""
    t = t.detach().cpu().contiguous()
    if t.dtype in (C32, torch.float16, torch.bfloat16):
        b = t.view(torch.int16).to(torch.int32)
        return b, ((b & 0x7C00) == 0x7C00) & ((b & 0x3FF) != 0) if t.dtype != torch.bfloat16 else t.isnan()
    if t.dtype.is_complex:
        t = torch.view_as_real(t)
    if t.dtype.is_floating_point:
        width = {4: torch.int32, 8: torch.int64}[t.element_size()]
        return t.view(width), t.isnan()
    return t, torch.zeros_like(t, dtype=torch.bool)


def assert_same_bits(jax_result, cpu_result, nan_payloads=False):
    """Same dtype, shape, strides and bits; `nan_payloads`: a NaN matches any NaN (arithmetic)."""
    if not isinstance(cpu_result, torch.Tensor):
        assert jax_result == cpu_result or (jax_result != jax_result and cpu_result != cpu_result)
        return
    assert jax_result.device.type == "jax"
    assert (jax_result.dtype, jax_result.shape) == (cpu_result.dtype, cpu_result.shape)
    assert jax_result.stride() == cpu_result.stride()
    (jb, jn), (cb, cn) = _parts(jax_result), _parts(cpu_result)
    same = jb == cb
    if nan_payloads:
        same |= jn & cn
    assert bool(same.all()), f"{int((~same).sum())} parts differ: jax {jb[~same][:4]} cpu {cb[~same][:4]}"


def on_both(fn, nan_payloads=False):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cpu = fn("cpu")
        jax = fn("jax")
    assert_same_bits(jax, cpu, nan_payloads)


def _r(d):
    return halves(d, 300, 1)


def _s(d):
    return halves(d, 300, 2)


def _idx(d, *v):
    return torch.tensor(v, device=d)


def _setitem(t, key, value):
    t[key] = value
    return t


# Ops that move bits or store a number (rounded to half as CPU casts it): every part exactly CPU's,
# NaN payloads included.
MOVES = {
    "clone": lambda d: _r(d).clone(),
    "clone of a transpose": lambda d: _r(d).view(20, 15).t().clone(),
    "contiguous of a step": lambda d: _r(d)[::3].contiguous(),
    "cat": lambda d: torch.cat([_r(d), _s(d)]),
    "stack": lambda d: torch.stack([_r(d), _s(d)], 1),
    "index": lambda d: _r(d)[_idx(d, 5, 0, 299, 5)],
    "masked select": lambda d: _r(d)[_r(d).real > 0],
    "index_put_": lambda d: _r(d).index_put_((_idx(d, 1, 7),), _s(d)[:2]),
    "setitem of a column": lambda d: _setitem(_r(d).view(20, 15), (slice(None), 2), _s(d)[:20]),
    "index_select": lambda d: _r(d).index_select(0, _idx(d, 3, 1, 3)),
    "index_copy_": lambda d: _r(d).index_copy_(0, _idx(d, 4), _s(d)[:1]),
    "where": lambda d: torch.where(_r(d).real > _s(d).real, _r(d), _s(d)),
    "repeat": lambda d: _r(d)[:10].repeat(3),
    "roll": lambda d: _r(d).roll(7),
    "flip of rows": lambda d: _r(d).view(20, 15).flip(0),
    "tril": lambda d: _r(d).view(20, 15).tril(2),
    "zero_": lambda d: _r(d).view(20, 15)[:, 1::2].zero_(),
    "copy_ from a transpose": lambda d: torch.empty(15, 20, dtype=C32, device=d).copy_(_r(d).view(20, 15).t()),
    "copy_ from CPU": lambda d: torch.empty(300, dtype=C32, device=d).copy_(_r("cpu")),
    "to CPU and back": lambda d: _r(d).view(20, 15).t().cpu().to(d),
    "conj_physical": lambda d: torch.conj_physical(_r(d)),
    "conj_physical_": lambda d: _r(d).conj_physical_(),
    "clone of conj()": lambda d: _r(d).conj().clone(),
    "neg": lambda d: -_r(d),
    "view_as_real": lambda d: torch.view_as_real(_r(d)).clone(),
    "real": lambda d: _r(d).real.clone(),
    "view_as_complex of half": lambda d: torch.view_as_complex(_r(d).view(torch.float16).view(300, 2)).clone(),
    "view as int16": lambda d: _r(d).view(torch.int16).clone(),
    "float32 viewed as complex32": lambda d: torch.arange(8.0, device=d).view(C32).clone(),
    "nonzero": lambda d: _r(d).nonzero(),
    "isnan": lambda d: _r(d).isnan(),
    "isinf": lambda d: _r(d).isinf(),
    "isfinite": lambda d: _r(d).isfinite(),
    "eq": lambda d: _r(d) == _s(d),
    "eq self": lambda d: _r(d) == _r(d),
    "ne": lambda d: _r(d) != _s(d),
    "any over a dim": lambda d: _r(d).view(20, 15).any(1),
    "all": lambda d: _r(d).all(),
    "count_nonzero": lambda d: _r(d).view(20, 15).count_nonzero(0),
    "to bool": lambda d: _r(d).bool(),
    "isclose": lambda d: torch.isclose(_r(d), _s(d)),
    "item": lambda d: _r(d)[4].item(),
    "tolist": lambda d: normals(d, 5, 3).tolist(),
    "where with float16 (cast to complex32 first)": lambda d: torch.where(_r(d).real > 0, _r(d).imag, _r(d)),
    "cat with float16": lambda d: torch.cat([_r(d), _s(d).real]),
    "stack with int64": lambda d: torch.stack([_r(d), torch.arange(300, device=d) * 7]),
    "to float16 (the real half's bits)": lambda d: _r(d).view(20, 15).t().half(),
    "copy_ into float16": lambda d: torch.zeros(3, 300, dtype=torch.float16, device=d).copy_(_r(d)),
    "fill_": lambda d: _r(d).fill_(70000.0),
    "fill_ complex": lambda d: _r(d).fill_(1e-7 + 3.3j),
    "masked_fill": lambda d: _r(d).masked_fill(_r(d).real > 0, 1e-7 + 3.3j),
    "index_fill_": lambda d: _r(d).index_fill_(0, _idx(d, 3, 9), -2.5),
    "constant_pad_nd": lambda d: torch.nn.functional.pad(_r(d), (2, 3), value=1.1),
    "complex of halves": lambda d: torch.complex(_r(d).real, _s(d).imag),
    "masked_fill of a 0-dim tensor": lambda d: _r(d).masked_fill(_r(d).real < 0, torch.tensor(-0.1 + 7j, device=d)),
    "constant_pad_nd of zeros": lambda d: torch.nn.functional.pad(_r(d).view(20, 15), (1, 2, 0, 1)),
}


@pytest.mark.parametrize("name", MOVES)
def test_bits_as_cpu(name):
    on_both(MOVES[name])


# Ops that compute: CPU's values, rounding and dtype; a NaN part may carry another payload.
COMPUTES = {
    "add": lambda d: _r(d) + _s(d),
    "sub": lambda d: _r(d) - _s(d),
    "mul": lambda d: _r(d) * _s(d),
    "add alpha": lambda d: torch.add(_r(d), _s(d), alpha=0.3),
    "sub_ alpha": lambda d: _r(d).sub_(_s(d), alpha=-7.1),
    "add a number rounded to half first": lambda d: normals(d, 50, 4) * 0 + (2049.0 + 1e-3j),
    "mul a number": lambda d: _r(d) * 0.1,
    "add a 0-dim float64 (cast to complex32 first)": lambda d: (
        _r(d) + torch.tensor(0.1234567, dtype=torch.float64, device=d)
    ),
    "add float32 (complex64 result)": lambda d: _r(d) + _s(d).real.float(),
    "mul float16": lambda d: _r(d) * _s(d).imag,
    "add int64": lambda d: _r(d) + torch.arange(300, device=d) * 99,
    "addcmul": lambda d: torch.addcmul(_r(d), _r(d), _s(d), value=0.7),
    "abs": lambda d: _r(d).abs(),
    "sgn": lambda d: _r(d).sgn(),
    "conj() + y": lambda d: _r(d).conj() + _s(d),
    "to complex64": lambda d: _r(d).to(torch.complex64),
    "float16 to complex32": lambda d: _r(d).imag.to(C32),
    "to bfloat16": lambda d: _r(d).bfloat16(),
    "to float64": lambda d: _r(d).double(),
    "from complex64": lambda d: (normals(d, 50, 5).to(torch.complex64) * 1.37).to(C32),
    "copy_ from float64 (overflow to inf)": lambda d: torch.empty(64, dtype=C32, device=d).copy_(
        torch.linspace(-70000, 70000, 64, dtype=torch.float64, device=d) * 1.000001
    ),
    "copy_ from int64": lambda d: torch.empty(100, dtype=C32, device=d).copy_(
        torch.arange(-50000, 50000, 1000, device=d)
    ),
    "copy_ from complex128": lambda d: torch.empty(64, dtype=C32, device=d).copy_(
        torch.linspace(-1e-4, 1e-4, 64, dtype=torch.float64, device=d) * (1 + 3j)
    ),
    "copy_ into float32": lambda d: torch.empty(300, device=d).copy_(_r(d)),
    "index_put_ accumulate": lambda d: _r(d).index_put_((_idx(d, 1, 7, 1),), _s(d)[:3], accumulate=True),
    "index_add_ alpha": lambda d: _r(d).index_add_(0, _idx(d, 4, 8), _s(d)[:2], alpha=0.3),
    "ones": lambda d: torch.ones(3, 4, dtype=C32, device=d),
    "full": lambda d: torch.full((5,), 1 + 1.0001j, dtype=C32, device=d),
    "zeros_like of a transpose": lambda d: torch.zeros_like(_r(d).view(20, 15).t()),
    "empty_strided": lambda d: torch.empty_strided((2, 3), (1, 2), dtype=C32, device=d).zero_(),
}


@pytest.mark.parametrize("name", COMPUTES)
def test_values_as_cpu(name):
    on_both(COMPUTES[name], nan_payloads=True)


REFUSED = {
    "sum": lambda x: x.sum(),
    "mean": lambda x: x.mean(),
    "cumsum": lambda x: x.cumsum(0),
    "exp": lambda x: x.exp(),
    "div": lambda x: x / x,
    "angle": lambda x: x.angle(),
    "sqrt": lambda x: x.sqrt(),
    "mm": lambda x: x.view(2, 3) @ x.view(3, 2),
    "pow": lambda x: x**2,
    "gather": lambda x: x.gather(0, torch.tensor([1, 0], device=x.device)),
    "flip": lambda x: x.flip(0),
}


@pytest.mark.parametrize("name", REFUSED)
def test_refused_as_cpu_in_one_sentence(name):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        x = normals("jax", 6, 6)
        with pytest.raises(NotImplementedError) as cpu:
            REFUSED[name](x.cpu())
        with pytest.raises(NotImplementedError) as jax:
            REFUSED[name](x)
    message = str(jax.value)
    assert "not implemented for 'ComplexHalf'" in str(cpu.value)
    assert message.endswith("not implemented for 'ComplexHalf'") and "\n" not in message
    assert f'"{name}' in message, message


SAME_DTYPE = {
    "index_add_": lambda x, i, w: x.index_add_(0, i, w),
    "index_copy": lambda x, i, w: x.index_copy(0, i, w),
    "index_put_": lambda x, i, w: x.index_put_((i,), w),
    "index_put_ accumulate": lambda x, i, w: x.index_put_((i,), w, accumulate=True),
    "float32 index_add_ complex32": lambda x, i, w: w.real.float().index_add_(0, i, x[:1]),
    "complex64 index_put_ complex32": lambda x, i, w: w.index_put_((i,), x[:1]),
}


@pytest.mark.parametrize("name", SAME_DTYPE)
def test_a_dtype_mismatch_is_cpus_error_not_a_silent_widening(name):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        x, wide = normals("jax", 6, 7), torch.ones(1, dtype=torch.complex64, device="jax")
        with pytest.raises(RuntimeError) as cpu:
            SAME_DTYPE[name](x.cpu(), torch.tensor([1]), wide.cpu())
        with pytest.raises(RuntimeError) as jax:
            SAME_DTYPE[name](x, torch.tensor([1], device="jax"), wide)
    assert str(jax.value) == str(cpu.value)


def test_storage_is_the_bytes_of_complex_half():
    x = normals("jax", 4, 8)
    storage = x.untyped_storage()
    assert storage.nbytes() == 16
    half = torch.empty(0, dtype=torch.float16, device="jax").set_(storage, 2, (4,), (1,))
    cpu = x.cpu()
    expected = torch.empty(0, dtype=torch.float16).set_(cpu.untyped_storage(), 2, (4,), (1,))
    assert torch.equal(half.cpu().view(torch.int16), expected.view(torch.int16))


@pytest.mark.parametrize(
    "make",
    [
        lambda: torch.randn(3, dtype=C32, device="jax"),
        lambda: torch.rand(3, dtype=C32, device="jax"),
        lambda: torch.empty(3, dtype=C32, device="jax"),
        lambda: torch.ones(3, dtype=C32, device="jax"),
        lambda: torch.zeros(3, dtype=C32, device="jax"),
        lambda: torch.empty_like(torch.zeros(2, dtype=torch.complex64, device="jax"), dtype=C32),
    ],
)
def test_new_tensors_warn_that_complex_half_is_experimental(make):
    torch.set_warn_always(True)
    try:
        with pytest.warns(UserWarning, match="ComplexHalf support is experimental"):
            t = make()
    finally:
        torch.set_warn_always(False)
    assert t.dtype == C32 and t.device.type == "jax"


def test_deterministic_empty_is_nan_as_on_cpu():
    fill = torch.utils.deterministic.fill_uninitialized_memory
    torch.use_deterministic_algorithms(True)
    torch.utils.deterministic.fill_uninitialized_memory = True
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            made = {
                d: [
                    torch.empty(3, 2, dtype=C32, device=d),
                    torch.empty(3, out=torch.zeros(1, dtype=C32, device=d)),
                    torch.empty_strided((2, 3), (1, 2), dtype=C32, device=d),
                    torch.empty_permuted((2, 3, 2), (1, 0, 2), dtype=C32, device=d),
                ]
                for d in ("cpu", "jax")
            }
    finally:
        torch.use_deterministic_algorithms(False)
        torch.utils.deterministic.fill_uninitialized_memory = fill
    for jax, cpu in zip(made["jax"], made["cpu"]):
        assert bool(jax.isnan().all())
        assert_same_bits(jax, cpu)


def test_printing_as_cpu():
    x = normals("jax", 3, 9)
    assert str(x).rsplit("]", 1)[0] == str(x.cpu()).rsplit("]", 1)[0]
    assert str(x).endswith("dtype=torch.complex32)")


def test_backward_through_complex32_as_cpu():
    def grad(d):
        x = normals("cpu", 64, 10).to(d).requires_grad_()
        (x * x + x * 0.3 - x.conj()).abs().backward(torch.ones(64, dtype=torch.float16, device=d))
        return x.grad

    on_both(grad)
