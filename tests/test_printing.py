"""repr/str of jax tensors are PyTorch's own format with `device='jax:0'` added."""

from __future__ import annotations

import pytest
import torch
from jaxdev_testing import JAX


def expected_repr(cpu_value: torch.Tensor, jax_value: torch.Tensor) -> str:
    """What PyTorch prints for `jax_value`, given that its values are those of `cpu_value`.

    The values are formatted by PyTorch from the CPU tensor; the suffixes (device, dtype, size,
    grad_fn, requires_grad) and their line wrapping by PyTorch from the jax tensor's metadata. So the
    jax repr must equal it exactly, with `device='jax:0'` in the suffixes.
    """
    assert cpu_value.device.type == "cpu" and jax_value.device.type == "jax"
    assert cpu_value.shape == jax_value.shape and cpu_value.dtype == jax_value.dtype
    with torch.no_grad():
        body = "[]" if cpu_value.numel() == 0 else torch._tensor_str._tensor_str(cpu_value.detach(), len("tensor("))
    text = torch._tensor_str._str(jax_value, tensor_contents=body)
    if isinstance(jax_value, torch.nn.Parameter):
        text = "Parameter containing:\n" + text
    assert "device='jax:0'" in text
    return text


def test_expected_repr_helper_puts_device_among_cpu_suffixes():
    cpu = torch.tensor([1, 2], dtype=torch.int32)
    assert expected_repr(cpu, torch.empty(2, dtype=torch.int32, device="jax")) == (
        "tensor([1, 2], device='jax:0', dtype=torch.int32)"
    )


CASES = {
    "float": lambda: torch.tensor([1.0, -2.5, 3.25]),
    "int64": lambda: torch.tensor([1, -20, 300]),
    "int32": lambda: torch.tensor([1, 2], dtype=torch.int32),
    "uint8": lambda: torch.tensor([0, 255], dtype=torch.uint8),
    "bool": lambda: torch.tensor([True, False, True]),
    "float64": lambda: torch.tensor([0.1, 0.2], dtype=torch.float64),
    "float16": lambda: torch.tensor([0.5, 1.5], dtype=torch.float16),
    "bfloat16": lambda: torch.tensor([0.5, 1.5], dtype=torch.bfloat16),
    "complex64": lambda: torch.tensor([1 + 2j, -3.5j]),
    "complex128": lambda: torch.tensor([1 + 2j], dtype=torch.complex128),
    "scalar_float": lambda: torch.tensor(3.5),
    "scalar_int": lambda: torch.tensor(7),
    "scalar_bool": lambda: torch.tensor(True),
    "nan_inf": lambda: torch.tensor([float("nan"), float("inf"), -float("inf"), 1.0]),
    "sci_mode": lambda: torch.tensor([1e-8, 1.0, 1e8]),
    "int_valued_floats": lambda: torch.tensor([1.0, 2.0, 3.0]),
    "negative_zero": lambda: torch.tensor([-0.0, 0.0]),
    "matrix": lambda: torch.arange(12.0).reshape(3, 4) / 7,
    "rank3": lambda: torch.arange(24).reshape(2, 3, 4),
    "empty_1d": lambda: torch.zeros(0),
    "empty_2d": lambda: torch.zeros(0, 3),
    "empty_int": lambda: torch.zeros(0, dtype=torch.int32),
    "transposed_view": lambda: torch.arange(6.0).reshape(2, 3).t(),
    "strided_view": lambda: torch.arange(10.0)[::3],
    "large_1d": lambda: torch.arange(2000.0),
    "large_2d": lambda: torch.arange(10000).reshape(100, 100),
    "large_3d_float": lambda: (torch.arange(1250.0).reshape(2, 25, 25) - 600) / 3,
    "large_bool": lambda: torch.arange(1500) % 3 == 0,
}


@pytest.mark.parametrize("name", list(CASES))
def test_repr_matches_cpu_with_device_suffix(name):
    cpu = CASES[name]()
    on_jax = cpu.to("jax")
    assert repr(on_jax) == expected_repr(cpu, on_jax)
    assert on_jax.device == JAX  # printing did not move it


@pytest.mark.parametrize("name", ["float", "matrix", "large_1d", "scalar_int"])
def test_str_is_repr(name):
    on_jax = CASES[name]().to("jax")
    assert str(on_jax) == repr(on_jax)


def test_summarisation_uses_ellipsis():
    text = repr(torch.arange(5000.0, device="jax"))
    assert "..." in text and text.endswith("device='jax:0')")


def test_print_options_are_honoured():
    cpu = torch.tensor([1.23456789, 2.5])
    try:
        torch.set_printoptions(precision=2)
        assert repr(cpu.to("jax")) == expected_repr(cpu, cpu.to("jax"))
        torch.set_printoptions(threshold=5, edgeitems=1)
        big = torch.arange(20.0)
        assert repr(big.to("jax")) == expected_repr(big, big.to("jax"))
    finally:
        torch.set_printoptions(profile="default")


def _without_device(text: str) -> str:
    return text.replace("device='jax:0', ", "").replace(", device='jax:0'", "")


@pytest.mark.parametrize(
    "make,expected",
    [
        (lambda x: x, "tensor([1., 2.], device='jax:0', requires_grad=True)"),
        (lambda x: x * 2, "tensor([2., 4.], device='jax:0', grad_fn=<MulBackward0>)"),
        (lambda x: x.sum(), "tensor(3., device='jax:0', grad_fn=<SumBackward0>)"),
        (lambda x: x[1:], "tensor([2.], device='jax:0', grad_fn=<SliceBackward0>)"),
        (lambda x: x.view(2, 1).t(), "tensor([[1., 2.]], device='jax:0', grad_fn=<TBackward0>)"),
        (lambda x: x.reshape(1, 2), "tensor([[1., 2.]], device='jax:0', grad_fn=<ViewBackward0>)"),
        (
            lambda x: x.to(torch.float64),
            "tensor([1., 2.], device='jax:0', dtype=torch.float64,\n       grad_fn=<ToCopyBackward0>)",
        ),
    ],
    ids=["leaf", "mul", "sum", "slice", "t", "reshape", "to_float64"],
)
def test_autograd_suffixes(make, expected):
    cpu = torch.tensor([1.0, 2.0], requires_grad=True)
    on_jax = torch.tensor([1.0, 2.0], device="jax", requires_grad=True)
    assert repr(make(on_jax)) == expected
    # The same text as CPU's, but for the device (line wrapping aside).
    assert " ".join(repr(make(cpu)).split()) == " ".join(_without_device(expected).split())


def test_moved_requires_grad_tensor_shows_to_copy_backward():
    cpu = torch.tensor([1.0, 2.0], requires_grad=True)
    assert repr(cpu.to("jax")) == "tensor([1., 2.], device='jax:0', grad_fn=<ToCopyBackward0>)"


def test_parameter_repr():
    cpu = torch.nn.Parameter(torch.tensor([1.0, 2.0]))
    on_jax = torch.nn.Parameter(torch.tensor([1.0, 2.0], device="jax"))
    assert repr(on_jax) == "Parameter containing:\ntensor([1., 2.], device='jax:0', requires_grad=True)"
    assert repr(cpu) == _without_device(repr(on_jax))


def test_origin_bug_cpu_of_a_fresh_jax_tensor():
    """The project's origin: this failed on aten::reshape under Autogradjax."""
    t = torch.tensor([0], device="jax:0")
    assert torch.equal(t.cpu(), torch.tensor([0]))
    assert repr(t) == "tensor([0], device='jax:0')"


@pytest.mark.parametrize("name", ["float", "int64", "bool", "complex64", "nan_inf", "large_1d", "scalar_float"])
def test_printing_needs_no_cpu_fallback(name, fallback_mode):
    """Item 13: the printing path has jax kernels; it runs with JAXDEV_FALLBACK=error."""
    cpu = CASES[name]()
    on_jax = cpu.to("jax")
    expected = expected_repr(cpu, on_jax)
    fallback_mode("error")
    assert repr(on_jax) == expected
