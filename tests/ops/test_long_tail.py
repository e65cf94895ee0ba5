"""The long tail written on the device: special functions, the remaining binary and reduction ops,
the small matrix products and GradScaler's two kernels, each against CPU PyTorch with
JAXDEV_FALLBACK=error so a kernel that quietly fell back to CPU fails."""

from __future__ import annotations

import pytest
import torch
from jaxdev_testing import JAX, assert_same, check, on_both

torch.manual_seed(0)


pytestmark = pytest.mark.usefixtures("no_fallback")  # tests/conftest.py


def _edges(dtype=torch.float32):
    """Ordinary values plus the ones special functions get wrong: poles, signed zeros, infinities, NaN."""
    return torch.cat(
        [
            torch.randn(12, dtype=dtype, generator=torch.Generator().manual_seed(0)) * 3,
            torch.tensor([0.0, -0.0, -1.0, -2.0, 1.0, 2.0, float("inf"), -float("inf"), float("nan")], dtype=dtype),
        ]
    )


SPECIAL = {
    "i0": torch.special.i0,
    "i0e": torch.special.i0e,
    "i1": torch.special.i1,
    "i1e": torch.special.i1e,
    "entr": torch.special.entr,
    "erfcx": torch.special.erfcx,
    "log_ndtr": torch.special.log_ndtr,
    "ndtri": lambda t: torch.special.ndtri(torch.sigmoid(t)),
    "digamma": torch.digamma,
    "lgamma": torch.lgamma,
    "sinc": torch.sinc,
    "mvlgamma": lambda t: torch.mvlgamma(t.abs() + 2, 3),
    "xlogy": lambda t: torch.xlogy(t, t.abs() + 0.5),
    "xlogy_scalar_self": lambda t: torch.xlogy(2.0, t.abs()),
    "xlog1py": lambda t: torch.special.xlog1py(t, t.abs()),
}


@pytest.mark.parametrize("name", list(SPECIAL))
def test_special_function_like_cpu(name):
    x = _edges()
    finite = x[x.isfinite()]
    # Forward on every edge value; gradients on finite ones only (CPU's own gradient at a pole is
    # whatever its formula yields, which is not what this test is about).
    check(SPECIAL[name], x, grad=False, rtol=1e-5, atol=1e-6)
    check(SPECIAL[name], finite[finite.abs() > 0.1], rtol=1e-4, atol=1e-5)


def test_special_function_float64_like_cpu():
    x = _edges(torch.float64)
    for name in ("i0", "i1e", "erfcx", "log_ndtr", "digamma", "lgamma", "entr"):
        check(SPECIAL[name], x, grad=False, rtol=1e-10, atol=1e-12)


def test_incomplete_gamma_like_cpu():
    a = torch.tensor([0.5, 1.0, 3.0, 10.0, float("inf"), 2.0, 0.0])
    x = torch.tensor([0.3, 2.0, 3.0, 4.0, 1.0, float("inf"), 1.0])
    check(torch.special.gammainc, a, x, grad=False, rtol=1e-5, atol=1e-6)
    check(torch.special.gammaincc, a, x, grad=False, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_hurwitz_zeta_and_polygamma_like_cpu(dtype):
    """Cephes' summation, negative q included (where JAX's own zeta is off or NaN)."""
    q = torch.tensor([-7.5, -5.0, -2.3, -0.0, 0.2, 1.0, 3.7, 50.0, -1000.5, float("inf"), float("nan")], dtype=dtype)
    x = torch.tensor([0.5, 1.0, 1.5, 2.0, 3.0, 4.5, 7.0, -1.0, 2.0, float("inf"), 3.0], dtype=dtype)
    tight = dict(rtol=1e-12, atol=1e-20) if dtype == torch.float64 else dict(rtol=2e-6, atol=0)
    check(torch.special.zeta, x[:, None], q[None, :], grad=False, **tight)
    check(lambda t: torch.special.zeta(3.0, t), q, grad=False, **tight)
    for n in range(5):
        check(lambda t, n=n: torch.polygamma(n, t), q, grad=False, **tight)
    # Gradients: digamma's is polygamma(1), polygamma(n)'s is polygamma(n + 1), zeta's is zeta(x + 1).
    smooth = torch.tensor([0.3, 1.7, 4.0, -2.5], dtype=dtype)
    check(lambda t: torch.polygamma(2, t), smooth, **tight)
    check(lambda t: torch.special.zeta(torch.full_like(t, 2.5), t), smooth.abs(), **tight)


def test_polygamma_negative_order_raises_like_cpu():
    with pytest.raises(RuntimeError, match="does not support negative n"):
        torch.polygamma(-1, torch.ones(2, device=JAX))


def test_digamma_signed_zero_poles():
    out = torch.digamma(torch.tensor([0.0, -0.0], device=JAX)).cpu()
    assert out.tolist() == [-float("inf"), float("inf")]


BINARY = {
    "logaddexp": (torch.logaddexp, torch.randn(6) * 20, torch.randn(6) * 20),
    "logaddexp_inf": (
        torch.logaddexp,
        torch.tensor([float("inf"), -float("inf"), 1.0]),
        torch.tensor([float("inf"), -float("inf"), -float("inf")]),
    ),
    "logaddexp_complex": (
        torch.logaddexp,
        torch.randn(5, dtype=torch.complex64),
        torch.randn(5, dtype=torch.complex64),
    ),
    "logaddexp2": (torch.logaddexp2, torch.randn(6) * 20, torch.randn(6) * 20),
    "nextafter": (torch.nextafter, torch.tensor([0.0, 1.0, -1.0, 3.0]), torch.tensor([1.0, 0.0, -2.0, 3.0])),
    "heaviside": (torch.heaviside, torch.tensor([-1.0, 0.0, 2.0, 0.0]), torch.tensor([0.5, 0.25, 0.5, 1.0])),
    "floor_divide": (torch.floor_divide, torch.tensor([7.0, -7.0, 7.5, -0.0]), torch.tensor([2.0, 2.0, -2.0, 3.0])),
    "floor_divide_int": (torch.floor_divide, torch.tensor([7, -7, 9, -9]), torch.tensor([2, 2, -4, 4])),
    "floor_divide_scalar": (lambda a: torch.floor_divide(a, 3), torch.tensor([7, -7, 9, -9])),
    "rsub_alpha": (lambda a, b: torch.rsub(a, b, alpha=2), torch.randn(5), torch.randn(5)),
    "nan_to_num": (
        lambda a: torch.nan_to_num(a, nan=1.5, posinf=9.0),
        torch.tensor([float("nan"), float("inf"), -float("inf"), 2.0]),
    ),
    "nan_to_num_default": (
        torch.nan_to_num,
        torch.tensor([float("nan"), float("inf"), -float("inf"), 2.0], dtype=torch.float16),
    ),
}


@pytest.mark.parametrize("name", list(BINARY))
def test_binary_like_cpu(name):
    fn, *inputs = BINARY[name]
    check(fn, *inputs, grad=False)


@pytest.mark.parametrize(
    "divide",
    [
        torch.floor_divide,
        lambda a, b: torch.div(a, b, rounding_mode="floor"),
        lambda a, b: torch.div(a, b, rounding_mode="trunc"),
        lambda a, b: a.div_(b, rounding_mode="floor"),
        torch.remainder,
    ],
    ids=["floor_divide", "div floor", "div trunc", "div_ floor", "remainder"],
)
def test_integer_division_by_zero_raises_like_cpu(divide):
    with pytest.raises(Exception) as on_cpu:
        divide(torch.tensor([1]), torch.tensor([0]))
    with pytest.raises(on_cpu.type, match=str(on_cpu.value)):
        divide(torch.tensor([1], device=JAX), torch.tensor([0], device=JAX)).cpu()


REDUCTIONS = {
    "nansum": (lambda t: torch.nansum(t, dim=1), torch.tensor([[1.0, float("nan"), 2.0], [float("nan")] * 3])),
    "count_nonzero": (torch.count_nonzero, torch.tensor([[0, 1, 2], [0, 0, 3]])),
    "count_nonzero_dims": (lambda t: torch.count_nonzero(t, dim=(0, 2)), (torch.randn(3, 4, 5) > 0).float()),
    "aminmax": (lambda t: torch.aminmax(t, dim=0, keepdim=True), torch.randn(4, 5)),
    "aminmax_all": (torch.aminmax, torch.randint(-9, 9, (4, 5))),
    "trace": (torch.trace, torch.randn(4, 6)),
    "trace_int": (torch.trace, torch.randint(-9, 9, (5, 3), dtype=torch.int32)),
    "vdot_complex": (torch.vdot, torch.randn(7, dtype=torch.complex64), torch.randn(7, dtype=torch.complex64)),
    "addmv": (
        lambda s, m, v: torch.addmv(s, m, v, beta=0.5, alpha=2.0),
        torch.randn(4),
        torch.randn(4, 3),
        torch.randn(3),
    ),
    "addmv_beta0_nan": (
        lambda s, m, v: torch.addmv(s, m, v, beta=0),
        torch.full((4,), float("nan")),
        torch.randn(4, 3),
        torch.randn(3),
    ),
}


@pytest.mark.parametrize("name", list(REDUCTIONS))
def test_reduction_and_product_like_cpu(name):
    fn, *inputs = REDUCTIONS[name]
    check(fn, *inputs, rtol=1e-5, atol=1e-5)


def _train_with_grad_scaler(device, poison_step):
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 3).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler(
        device if isinstance(device, str) else device.type, init_scale=2.0**10, growth_interval=2
    )
    scales = []
    for step in range(5):
        x = torch.randn(8, 4).to(device)
        loss = model(x).pow(2).mean()
        if step == poison_step:
            loss = loss * float("inf")
        opt.zero_grad()
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        scales.append(scaler.get_scale())
    return scales, [p.detach() for p in model.parameters()]


def test_grad_scaler_skips_overflow_and_grows_like_cpu():
    cpu_scales, cpu_params = _train_with_grad_scaler("cpu", poison_step=2)
    jax_scales, jax_params = _train_with_grad_scaler("jax", poison_step=2)
    assert jax_scales == cpu_scales
    for j, c in zip(jax_params, cpu_params):
        assert_same(j, c, rtol=1e-5, atol=1e-6)


# --- found by PyTorch's own TestCommon on jax ---------------------------------------------------------


def test_softshrink_keeps_nan():
    x = torch.tensor([float("nan"), -0.3, 0.2, 2.0])
    check(torch.nn.functional.softshrink, x, grad=False)
    assert torch.nn.functional.softshrink(x.to(JAX)).cpu()[1].signbit()  # -0.3 shrinks to -0.0, as on CPU


def test_empty_index_of_any_dtype_is_accepted_like_cpu():
    src = torch.randn(3, 4)
    empty = torch.empty(3, 0, dtype=torch.uint8)
    check(lambda s, i: torch.gather(s, 1, i), src, empty, grad=False)
    check(lambda s, i: torch.scatter_reduce(s, 1, i, torch.zeros(3, 0, device=s.device), "sum"), src, empty, grad=False)


def test_in_place_out_that_is_an_input_is_not_resized():
    """x.ldexp_(y) is mul(x, 2**y, out=x): CPU raises rather than grow x to the broadcast shape."""
    x = torch.ones(5, 1, device=JAX)
    with pytest.raises(RuntimeError, match=r"output with shape \[5, 1\] doesn't match the broadcast shape \[5, 5\]"):
        x.ldexp_(torch.ones(5, 5, device=JAX))
    assert x.shape == (5, 1)
    # An out= that is not an input still resizes (with PyTorch's deprecation warning).
    out = torch.empty(5, 1, device=JAX)
    with pytest.warns(UserWarning, match="was resized"):
        torch.mul(x, torch.ones(5, 5, device=JAX), out=out)
    assert out.shape == (5, 5)


@pytest.mark.parametrize("method", ["uniform_", "normal_"])
def test_random_fill_of_complex_like_cpu(method):
    """Both parts drawn alike, as CPU does through view_as_real: uniform in [2, 3), normal around 1."""
    args = (2.0, 3.0) if method == "uniform_" else (1.0, 2.0)
    z = getattr(torch.empty(20000, dtype=torch.complex64, device=JAX), method)(*args).cpu()
    cpu = getattr(torch.empty(20000, dtype=torch.complex64), method)(*args)
    for part in (torch.real, torch.imag):
        assert abs(part(z).mean() - part(cpu).mean()) < 0.05
        assert abs(part(z).std() - part(cpu).std()) < 0.05
    if method == "uniform_":
        assert z.real.min() >= 2 and z.imag.max() < 3


# --- complex numbers, integer ops, norms, factories, samplers ------------------------------------------


def _same_error(fn):
    """CPU raises; jax raises the same type with the same message."""
    err = on_both(fn)
    with pytest.raises(type(err)) as cpu:
        fn(torch.device("cpu"))
    assert str(err) == str(cpu.value)


COMPLEX_AND_INTEGER = {
    "angle_real": (torch.angle, torch.tensor([-2.0, -0.0, 0.0, 3.0, float("nan"), -float("inf")])),
    "angle_int": (torch.angle, torch.tensor([-2, 0, 3])),
    "angle_complex": (torch.angle, torch.randn(6, dtype=torch.complex64)),
    "conj_physical": (torch.conj_physical, torch.randn(4, dtype=torch.complex128)),
    "complex": (torch.complex, torch.randn(3, 1), torch.randn(4)),
    "polar": (torch.polar, torch.rand(5, dtype=torch.float64), torch.randn(5, dtype=torch.float64)),
    "left_shift": (
        torch.bitwise_left_shift,
        torch.tensor([1, 2, 3, -1], dtype=torch.int8),
        torch.tensor([1, 8, -1, 7], dtype=torch.int8),
    ),
    "right_shift": (
        torch.bitwise_right_shift,
        torch.tensor([-100, 2, 3, -5], dtype=torch.int8),
        torch.tensor([1, 8, -1, 100], dtype=torch.int8),
    ),
    "shift_int64_by_64": (lambda a: a << 64, torch.tensor([1, -1])),
    "gcd": (torch.gcd, torch.tensor([0, -4, 6, -(2**63), 0, 17]), torch.tensor([0, 6, -4, 0, -(2**63), 0])),
    "lcm": (
        torch.lcm,
        torch.tensor([0, -4, 6, 3, 100], dtype=torch.int16),
        torch.tensor([0, 6, -4, 0, 3], dtype=torch.int16),
    ),
    "frexp_subnormal": (
        lambda t: torch.frexp(t),
        torch.tensor([1e-45, 5e-324, 0.0, -0.0, float("inf"), float("nan"), -1e-310, 3.0], dtype=torch.float64),
    ),
    "frexp_float32_subnormal": (lambda t: torch.frexp(t), torch.tensor([1e-39, -1.4e-45, 1.1754942e-38, 6.5])),
    "frexp_half": (lambda t: torch.frexp(t), torch.tensor([6e-8, 1e-5, -3.0, 65504.0], dtype=torch.float16)),
    "cross": (lambda a, b: torch.linalg.cross(a, b, dim=0), torch.randn(3, 4), torch.randn(3, 1)),
    "norm_dtype": (lambda t: torch.norm(t, p=3, dim=1, dtype=torch.float64), torch.randn(3, 4)),
    "pairwise_distance": (torch.nn.functional.pairwise_distance, torch.randn(3, 5), torch.randn(3, 5)),
    "renorm": (lambda t: torch.renorm(t, 2, 0, 1.0), torch.randn(4, 3) * 3),
    "renorm_half": (lambda t: torch.renorm(t, 1.5, 1, 0.5), torch.randn(3, 4, 5, dtype=torch.float16)),
    "channel_shuffle": (lambda t: torch.nn.functional.channel_shuffle(t, 3), torch.randn(2, 6, 2, 2)),
    "nonzero_static": (lambda t: torch.nonzero_static(t, size=5, fill_value=7), torch.tensor([[0, 1], [1, 1]])),
    "nonzero_static_cut": (lambda t: torch.nonzero_static(t, size=1), torch.tensor([0.0, 1.0, 2.0])),
    "hash_tensor": (lambda t: torch.hash_tensor(t, dim=1).view(torch.int64), torch.randn(3, 5, dtype=torch.float64)),
    "bincount": (torch.bincount, torch.tensor([1, 1, 3, 0, 7])),
    "bincount_weights": (lambda t, w: torch.bincount(t, w, minlength=10), torch.tensor([1, 1, 3]), torch.rand(3)),
    "bincount_half_weights": (torch.bincount, torch.tensor([2, 0]), torch.tensor([0.5, 1.0], dtype=torch.float16)),
    "cov": (torch.cov, torch.randn(3, 6)),
}


@pytest.mark.parametrize("name", list(COMPLEX_AND_INTEGER))
def test_complex_integer_and_norm_ops_like_cpu(name):
    fn, *inputs = COMPLEX_AND_INTEGER[name]
    exact = {} if inputs[0].is_floating_point() or inputs[0].is_complex() else dict(rtol=0, atol=0)
    check(fn, *inputs, grad=name in ("cross", "norm_dtype", "pairwise_distance", "renorm", "polar"), **exact)


@pytest.mark.parametrize(
    "fn",
    [
        lambda d: torch.complex(torch.ones(2, device=d), torch.zeros(2, device=d, dtype=torch.float64)),
        lambda d: torch.complex(torch.ones(2, device=d, dtype=torch.long), torch.zeros(2, device=d, dtype=torch.long)),
        lambda d: torch.ones(2, device=d) << 1,
        lambda d: torch.gcd(torch.ones(2, device=d, dtype=torch.bool), torch.ones(2, device=d, dtype=torch.bool)),
        lambda d: torch.frexp(torch.ones(2, device=d, dtype=torch.long)),
        lambda d: torch.linalg.cross(torch.ones(2, 2, device=d), torch.ones(2, 2, device=d)),
        lambda d: torch.norm(torch.ones(2, device=d, dtype=torch.long)),
        lambda d: torch.norm(torch.ones(2, 2, device=d, dtype=torch.float64), dim=1, dtype=torch.float32),
        lambda d: torch.renorm(torch.ones(2, 2, device=d), 2, 0, -1.0),
        lambda d: torch.nn.functional.channel_shuffle(torch.ones(2, 5, 1, device=d), 2),
        lambda d: torch.tril_indices(3, 3, dtype=torch.float32, device=d),
        lambda d: torch.logspace(-1.5, 2, 4, dtype=torch.uint8, device=d),
        lambda d: torch.bincount(torch.tensor([-1, 1], device=d)),
        lambda d: torch.bincount(torch.tensor([1, 2], device=d), torch.ones(3, device=d)),
        lambda d: torch.hash_tensor(torch.ones(0, 3, device=d), dim=0),
        lambda d: torch.empty(3, device=d, dtype=torch.long).cauchy_(),
        lambda d: torch.empty(3, device=d).geometric_(1.0),
        lambda d: torch.empty(3, device=d, dtype=torch.bool).geometric_(0.5),
        lambda d: torch.normal(torch.zeros(6, device=d), torch.ones(2, 3, device=d)),
        lambda d: torch.normal(torch.zeros(3, device=d), torch.full((3,), -1.0, device=d)).cpu(),
    ],
)
def test_invalid_input_raises_like_cpu(fn):
    _same_error(fn)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.int64, torch.int8, torch.uint8])
def test_logspace_like_cpu(dtype):
    for start, end, steps, base in [
        (0, 2, 5, 2.0),
        (-1, 3.3, 7, 10.0),
        (2, -3, 6, 3.0),
        (0.1, 10.7, 9, 2.5),
        (1, 1, 1, 2),
    ]:
        if dtype == torch.uint8 and start < 0:
            continue
        on_both(lambda d, a=(start, end, steps, base): torch.logspace(*a, dtype=dtype, device=d), rtol=1e-6)


@pytest.mark.parametrize("below", [True, False])
def test_triangle_indices_like_cpu(below):
    fn = torch.tril_indices if below else torch.triu_indices
    for row, col, offset in [(3, 4, 1), (4, 3, -1), (0, 3, 0), (3, 3, -5), (5, 5, 10)]:
        on_both(lambda d, a=(row, col, offset): fn(*a, device=d))


def test_equal_promotes_and_nan_is_unequal():
    x = torch.tensor([1, 2], device=JAX)
    assert torch.equal(x, torch.tensor([1.0, 2.0], device=JAX))
    assert not torch.equal(torch.tensor([float("nan")], device=JAX), torch.tensor([float("nan")], device=JAX))
    assert not torch.equal(torch.ones(2, 3, device=JAX), torch.ones(3, 2, device=JAX))


def test_samplers_follow_their_distributions():
    torch.manual_seed(0)
    x = torch.empty(200_000, device=JAX)
    assert abs(x.exponential_(2.0).mean().item() - 0.5) < 0.01
    assert abs(x.geometric_(0.25).mean().item() - 4.0) < 0.05
    assert (x == x.round()).all() and x.min().item() >= 1
    assert abs(x.log_normal_(0.5, 0.5).log().std().item() - 0.5) < 0.01
    assert abs(x.cauchy_(1.0, 2.0).median().item() - 1.0) < 0.05
    m = torch.normal(torch.full((100_000,), 3.0, device=JAX), torch.full((100_000,), 2.0, device=JAX))
    assert abs(m.mean().item() - 3.0) < 0.03 and abs(m.std().item() - 2.0) < 0.03
    torch.manual_seed(5)
    a = torch.empty(8, device=JAX).cauchy_()
    torch.manual_seed(5)
    assert torch.equal(a.cpu(), torch.empty(8, device=JAX).cauchy_().cpu())
