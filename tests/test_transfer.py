"""factories with device="jax", moving data both ways, scalars out, .numpy() refused."""

from __future__ import annotations

import pytest
import torch
from jaxdev_testing import JAX, assert_same

# --- factories -------------------------------------------------------------------------------------

DETERMINISTIC_FACTORIES = {
    "tensor": lambda d: torch.tensor([[1.5, -2.0], [3.0, 4.25]], device=d),
    "tensor_int": lambda d: torch.tensor([1, 2, 3], device=d),
    "tensor_bool": lambda d: torch.tensor([True, False], device=d),
    "tensor_scalar": lambda d: torch.tensor(3.5, device=d),
    "as_tensor": lambda d: torch.as_tensor([1.0, 2.0], device=d),
    "scalar_tensor": lambda d: torch.scalar_tensor(2.5, device=d),
    "zeros": lambda d: torch.zeros(2, 3, device=d),
    "zeros_int": lambda d: torch.zeros(2, 3, dtype=torch.int32, device=d),
    "ones": lambda d: torch.ones(2, 3, device=d),
    "ones_f64": lambda d: torch.ones(3, dtype=torch.float64, device=d),
    "full": lambda d: torch.full((2, 3), 7.0, device=d),
    "full_int": lambda d: torch.full((2, 3), 7, device=d),
    "full_bool": lambda d: torch.full((3,), True, device=d),
    "arange": lambda d: torch.arange(6, device=d),
    "arange_float": lambda d: torch.arange(0.0, 1.0, 0.25, device=d),
    "arange_neg_step": lambda d: torch.arange(5, -3, -2, device=d),
    "arange_f64_step": lambda d: torch.arange(1, 2.5, 0.1, dtype=torch.float64, device=d),
    "linspace": lambda d: torch.linspace(-1, 1, 7, device=d),
    "linspace_one": lambda d: torch.linspace(3, 3, 1, device=d),
    "linspace_int": lambda d: torch.linspace(0, 10, 5, dtype=torch.int64, device=d),
    "logspace": lambda d: torch.logspace(0, 2, 3, device=d),
    "eye": lambda d: torch.eye(3, device=d),
    "eye_rect": lambda d: torch.eye(2, 4, dtype=torch.int64, device=d),
    "empty_shape": lambda d: torch.empty(2, 3, device=d).shape,
    "empty_dtype": lambda d: torch.empty(2, dtype=torch.int16, device=d).dtype,
    "empty_strided": lambda d: torch.empty_strided((2, 3), (1, 2), device=d).stride(),
    "empty_channels_last": lambda d: torch.empty(1, 2, 2, 2, device=d, memory_format=torch.channels_last).stride(),
    "zero_size": lambda d: torch.zeros(0, 3, device=d),
    "tril_indices": lambda d: torch.tril_indices(3, 3, device=d),
    "triu_indices": lambda d: torch.triu_indices(3, 4, 1, device=d),
    "complex": lambda d: torch.tensor([1 + 2j, -3j], device=d),
}


@pytest.mark.parametrize("name", list(DETERMINISTIC_FACTORIES))
def test_factory_matches_cpu(name):
    factory = DETERMINISTIC_FACTORIES[name]
    expected = factory("cpu")
    actual = factory("jax")
    if isinstance(expected, torch.Tensor):
        # Float factories within rounding of CPU's (exact for integers and bool).
        tol = 1e-6 if expected.dtype.is_floating_point else 0.0
        assert_same(actual, expected, check_stride=True, rtol=tol, atol=tol)
    else:
        assert actual == expected


LIKE_FACTORIES = {
    "zeros_like": lambda t: torch.zeros_like(t),
    "ones_like": lambda t: torch.ones_like(t),
    "full_like": lambda t: torch.full_like(t, 4),
    "ones_like_dtype": lambda t: torch.ones_like(t, dtype=torch.int32),
    "empty_like_shape": lambda t: torch.empty_like(t).shape,
    "zeros_like_transposed": lambda t: torch.zeros_like(t.t()),
    "new_zeros": lambda t: t.new_zeros(4),
    "new_ones": lambda t: t.new_ones((1, 2)),
    "new_full": lambda t: t.new_full((2,), 3.0),
    "new_tensor": lambda t: t.new_tensor([1, 2]),
    "new_empty_shape": lambda t: t.new_empty(5).shape,
}


@pytest.mark.parametrize("name", list(LIKE_FACTORIES))
def test_like_factory_stays_on_jax_and_matches_cpu(name):
    base = torch.arange(6.0).reshape(2, 3)
    expected = LIKE_FACTORIES[name](base)
    actual = LIKE_FACTORIES[name](base.to("jax"))
    if isinstance(expected, torch.Tensor):
        assert_same(actual, expected, check_stride=True)
    else:
        assert actual == expected


def test_like_factory_with_explicit_cpu_device_leaves_jax():
    t = torch.ones(2, device="jax")
    z = torch.zeros_like(t, device="cpu")
    assert z.device.type == "cpu" and torch.equal(z, torch.zeros(2))


RANDOM_FACTORIES = {
    "rand": (lambda: torch.rand(4, 5, device="jax"), torch.float32, (4, 5), (0.0, 1.0)),
    "randn": (lambda: torch.randn(4, 5, device="jax"), torch.float32, (4, 5), None),
    "randn_f64": (lambda: torch.randn(3, dtype=torch.float64, device="jax"), torch.float64, (3,), None),
    "randint": (lambda: torch.randint(3, 9, (20,), device="jax"), torch.int64, (20,), (3, 8)),
    "randint_high": (lambda: torch.randint(5, (20,), device="jax"), torch.int64, (20,), (0, 4)),
    "randperm": (lambda: torch.randperm(10, device="jax"), torch.int64, (10,), (0, 9)),
    "rand_like": (lambda: torch.rand_like(torch.ones(2, 3, device="jax")), torch.float32, (2, 3), (0.0, 1.0)),
    "randn_like": (lambda: torch.randn_like(torch.ones(2, 3, device="jax")), torch.float32, (2, 3), None),
    "randint_like": (lambda: torch.randint_like(torch.ones(2, 3, device="jax"), 4), torch.float32, (2, 3), (0, 3)),
}


@pytest.mark.parametrize("name", list(RANDOM_FACTORIES))
def test_random_factory_on_jax(name):
    factory, dtype, shape, bounds = RANDOM_FACTORIES[name]
    t = factory()
    assert t.device == JAX and t.dtype == dtype and tuple(t.shape) == shape
    values = t.cpu()
    assert torch.isfinite(values.double()).all()
    if bounds is not None:
        low, high = bounds
        assert values.min() >= low and values.max() <= high, values
    if name == "randperm":
        assert torch.equal(values.sort().values, torch.arange(10))


# --- moving data ---------------------------------------------------------------------------------


def test_to_jax_and_back():
    cpu = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    moved = cpu.to("jax")
    assert_same(moved, cpu)
    assert moved.device == JAX
    assert torch.equal(moved.to("cpu"), cpu)
    assert torch.equal(moved.cpu(), cpu)
    assert moved.cpu().device.type == "cpu"


def test_to_variants():
    cpu = torch.arange(4, dtype=torch.int32)
    assert_same(cpu.to("jax", torch.float64), cpu.to(torch.float64))
    assert_same(cpu.to(device="jax", dtype=torch.float16), cpu.to(torch.float16))
    assert_same(cpu.to(torch.device("jax", 0)), cpu)
    other = torch.zeros(1, dtype=torch.bfloat16, device="jax")
    assert_same(cpu.to(other), cpu.to(torch.bfloat16))
    on_jax = cpu.to("jax")
    assert_same(on_jax.to(torch.float32), cpu.to(torch.float32))
    assert_same(on_jax.to("jax"), cpu)


def test_to_same_device_and_dtype_returns_self_unless_copy():
    t = torch.ones(3, device="jax")
    assert t.to("jax") is t
    assert t.to("jax:0", torch.float32) is t
    c = t.to("jax", copy=True)
    assert c is not t
    c.fill_(5)
    assert torch.equal(t.cpu(), torch.ones(3)), "copy=True must not alias"


def test_non_contiguous_tensors_move_both_ways():
    cpu = torch.arange(24.0).reshape(2, 3, 4)
    for view in (cpu.transpose(0, 2), cpu[:, 1], cpu[..., ::2], cpu.permute(1, 2, 0)):
        assert_same(view.to("jax"), view.contiguous())
    on_jax = cpu.to("jax")
    for jv, cv in (
        (on_jax.transpose(0, 2), cpu.transpose(0, 2)),
        (on_jax[:, 1], cpu[:, 1]),
        (on_jax[..., ::2], cpu[..., ::2]),
        (on_jax[1:, 1:, 3], cpu[1:, 1:, 3]),
    ):
        assert torch.equal(jv.cpu(), cv)


def test_zero_dim_moves_both_ways():
    cpu = torch.tensor(2.5)
    on_jax = cpu.to("jax")
    assert on_jax.shape == () and on_jax.device == JAX
    back = on_jax.cpu()
    assert back.shape == () and back.item() == 2.5


def test_empty_tensor_moves_both_ways():
    cpu = torch.zeros(0, 3)
    assert_same(cpu.to("jax"), cpu)
    assert torch.equal(cpu.to("jax").cpu(), cpu)


def test_copy_cpu_into_jax():
    dst = torch.zeros(2, 3, device="jax")
    src = torch.arange(6.0).reshape(2, 3)
    assert dst.copy_(src) is dst
    assert_same(dst, src)


def test_copy_jax_into_cpu():
    dst = torch.zeros(2, 3)
    src = torch.arange(6.0).reshape(2, 3).to("jax")
    assert dst.copy_(src) is dst
    assert torch.equal(dst, torch.arange(6.0).reshape(2, 3))


def test_copy_converts_dtype_and_broadcasts_both_ways():
    src = torch.tensor([1.7, -2.2, 3.9])
    dst_j = torch.zeros(2, 3, dtype=torch.int32, device="jax")
    dst_j.copy_(src)
    assert_same(dst_j, torch.zeros(2, 3, dtype=torch.int32).copy_(src))
    dst_c = torch.zeros(2, 3, dtype=torch.float64)
    dst_c.copy_(src.to("jax"))
    assert torch.equal(dst_c, torch.zeros(2, 3, dtype=torch.float64).copy_(src))


def test_copy_into_non_contiguous_cpu_destination():
    base = torch.zeros(3, 4)
    base.t()[1:3].copy_(torch.arange(6.0).reshape(2, 3).to("jax"))
    expected = torch.zeros(3, 4)
    expected.t()[1:3].copy_(torch.arange(6.0).reshape(2, 3))
    assert torch.equal(base, expected)


def test_copy_shape_mismatch_raises_like_cpu():
    with pytest.raises(RuntimeError):
        torch.zeros(2, 3).copy_(torch.ones(4))
    with pytest.raises(RuntimeError):
        torch.zeros(2, 3, device="jax").copy_(torch.ones(4))
    with pytest.raises(RuntimeError):
        torch.zeros(2, 3).copy_(torch.ones(4, device="jax"))


def test_jax_to_jax_copy_between_dtypes():
    src = torch.tensor([1.5, 2.5, -3.5], device="jax")
    dst = torch.empty(3, dtype=torch.float64, device="jax")
    dst.copy_(src)
    assert_same(dst, torch.tensor([1.5, 2.5, -3.5], dtype=torch.float64))


@pytest.mark.parametrize("direction", ["to_jax", "to_cpu"])
def test_non_blocking(direction):
    cpu = torch.arange(8.0)
    if direction == "to_jax":
        t = cpu.to("jax", non_blocking=True)
        torch.jax.synchronize()
        assert_same(t, cpu)
        dst = torch.empty(8, device="jax")
        dst.copy_(cpu, non_blocking=True)
        torch.jax.synchronize()
        assert_same(dst, cpu)
    else:
        src = cpu.to("jax")
        t = src.to("cpu", non_blocking=True)
        torch.jax.synchronize()
        assert torch.equal(t, cpu)
        dst = torch.empty(8)
        dst.copy_(src, non_blocking=True)
        torch.jax.synchronize()
        assert torch.equal(dst, cpu)


def test_pin_memory_cpu_tensor_moves_to_jax():
    # pin_memory needs an accelerator hook; at least moving a CPU tensor must not need it.
    cpu = torch.arange(3.0)
    assert_same(cpu.to("jax", non_blocking=True), cpu)


# --- Python scalars out -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "value,dtype",
    [
        (2.5, torch.float32),
        (-3, torch.int64),
        (True, torch.bool),
        (1 + 2j, torch.complex64),
        (0.1, torch.float64),
        (7, torch.uint8),
        (1.5, torch.bfloat16),
        (2.0, torch.float16),
    ],
    ids=str,
)
def test_item(value, dtype):
    cpu = torch.tensor(value, dtype=dtype)
    got = cpu.to("jax").item()
    assert type(got) is type(cpu.item()) and got == cpu.item()


def test_item_of_one_element_view():
    t = torch.arange(6.0).reshape(2, 3).to("jax")
    assert t[1, 2].item() == 5.0
    assert t.t()[2, 0].item() == 2.0
    with pytest.raises(RuntimeError, match="a Tensor with 6 elements cannot be converted to Scalar"):
        t.item()


def test_tolist():
    for cpu in (
        torch.arange(6).reshape(2, 3),
        torch.tensor([[1.5, 2.0]]),
        torch.tensor([True, False]),
        torch.tensor(4.0),
        torch.tensor([1 + 1j]),
        torch.zeros(0, 2),
    ):
        assert cpu.to("jax").tolist() == cpu.tolist()
    assert torch.arange(6).reshape(2, 3).to("jax").t().tolist() == torch.arange(6).reshape(2, 3).t().tolist()


def test_python_number_conversions():
    t = torch.tensor([3.75], device="jax")
    assert float(t) == 3.75
    assert int(t) == 3
    assert bool(torch.tensor([0.0], device="jax")) is False
    assert bool(torch.tensor(2, device="jax")) is True
    assert complex(torch.tensor(1 + 2j, device="jax")) == 1 + 2j
    assert [1, 2, 3][torch.tensor(1, device="jax")] == 2  # __index__
    with pytest.raises(RuntimeError):
        bool(torch.tensor([1.0, 2.0], device="jax"))


def test_numpy_raises_like_cuda_and_points_at_cpu():
    t = torch.ones(3, device="jax")
    with pytest.raises(TypeError) as info:
        t.numpy()
    message = str(info.value)
    assert "jax:0" in message and "numpy" in message
    assert "cpu()" in message, message
    assert t.cpu().numpy().tolist() == [1.0, 1.0, 1.0]


def test_numpy_force_copies():
    t = torch.arange(4.0, device="jax")
    assert t.numpy(force=True).tolist() == [0.0, 1.0, 2.0, 3.0]


def test_moves_keep_strides_of_size_one_and_empty_dims_as_cpu():
    """Contiguous by the flag, other strides in size-1/size-0 dims: `.to`, clone and back keep them, as
    CPU's empty_like does (found by the hostile-input fuzz test)."""
    import torch

    for t in (torch.empty_strided((5, 3, 0, 1), (0, 0, 1, 0)), torch.randn(6).as_strided((2, 1, 3), (3, 7, 1))):
        j = t.to("jax")
        assert j.stride() == t.stride() == t.to(torch.float64).stride()
        assert j.clone().stride() == t.clone().stride() and j.cpu().stride() == t.stride()
        assert torch.equal(j.cpu(), t)
