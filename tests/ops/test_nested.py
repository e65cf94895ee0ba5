"""Strided nested tensors on jax (jaxdev/ops/nested.py): built from a padding mask as the encoder's fast
path builds them, their metadata, unbind, printing, to_padded_tensor and device copies against CPU's; other
ops run on CPU under the fallback's policy, or are refused in one sentence."""

from __future__ import annotations

import pytest
import torch
from jaxdev_testing import JAX

import jaxdev
from jaxdev.fallback import FallbackError

MASK = torch.tensor([[True] * 4, [True] * 2 + [False] * 2, [True] + [False] * 3])


def _x(seed=0):
    return torch.randn(3, 4, 5, generator=torch.Generator().manual_seed(seed))


def test_from_mask_metadata_and_padding(no_fallback):
    x = _x()
    expected = torch._nested_tensor_from_mask(x, MASK)
    actual = torch._nested_tensor_from_mask(x.to(JAX), MASK.to(JAX))
    assert actual.is_nested and actual.device == JAX
    for name in ("_nested_tensor_size", "_nested_tensor_strides", "_nested_tensor_storage_offsets"):
        assert torch.equal(getattr(actual, name)(), getattr(expected, name)())
    for a, e in zip(actual.unbind(), expected.unbind()):
        assert a.device == JAX and torch.equal(a.cpu(), e)
    for pad, size in ((0.0, None), (-2.5, None), (0.0, (3, 6, 5)), (1.0, (4, 4, 7))):
        assert torch.equal(actual.to_padded_tensor(pad, size).cpu(), expected.to_padded_tensor(pad, size))
    transposed = actual.transpose(1, 2)
    # CPU pads contiguous nested tensors only; jax pads any
    assert torch.equal(
        transposed.to_padded_tensor(0.0).cpu(), expected.transpose(1, 2).contiguous().to_padded_tensor(0.0)
    )
    narrowed = actual.narrow(0, 1, 2)
    assert torch.equal(
        narrowed.contiguous().to_padded_tensor(0.0).cpu(), expected.narrow(0, 1, 2).contiguous().to_padded_tensor(0.0)
    )
    assert torch.equal(actual.to("cpu").to_padded_tensor(0.0), expected.to_padded_tensor(0.0))
    back = expected.to(JAX)
    assert back.device == JAX and torch.equal(back.to_padded_tensor(0.0).cpu(), expected.to_padded_tensor(0.0))
    assert str(actual).replace(", device='jax:0'", "") == str(expected)


def test_left_aligned_check_and_errors(no_fallback):
    x = _x()
    gaps = MASK.clone()
    gaps[0, 1] = False
    for mask in (MASK, gaps, torch.zeros(3, 4, dtype=torch.bool), torch.ones(3, 4, dtype=torch.bool)):
        expected = torch._nested_tensor_from_mask_left_aligned(x, mask)
        assert torch._nested_tensor_from_mask_left_aligned(x.to(JAX), mask.to(JAX)) is expected
    with pytest.raises(RuntimeError, match="Mask must be left-aligned without gaps"):
        torch._nested_tensor_from_mask(x.to(JAX), gaps.to(JAX))
    unchecked = torch._nested_tensor_from_mask(x.to(JAX), gaps.to(JAX), mask_check=False)  # lengths, as CPU
    assert torch.equal(
        unchecked._nested_tensor_size(), torch._nested_tensor_from_mask(x, gaps, False)._nested_tensor_size()
    )
    with pytest.raises(RuntimeError, match="Expected mask to be of type bool"):
        torch._nested_tensor_from_mask(x.to(JAX), MASK.float().to(JAX))
    with pytest.raises(RuntimeError, match="Mask size should match input size"):
        torch._nested_tensor_from_mask(x.to(JAX), MASK[:2].to(JAX))
    nt = torch._nested_tensor_from_mask(x.to(JAX), MASK.to(JAX))
    with pytest.raises(RuntimeError, match="Truncation is not supported"):
        nt.to_padded_tensor(0.0, (3, 2, 5))


def test_encoder_layer_on_a_nested_batch(no_fallback):
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(5 * 2, 2, 16, batch_first=True).eval()
    x = torch.randn(3, 4, 10, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        expected = layer(torch._nested_tensor_from_mask(x, MASK)).to_padded_tensor(0.0)
        layer.to(JAX)
        actual = layer(torch._nested_tensor_from_mask(x.to(JAX), MASK.to(JAX)))
    assert actual.is_nested and actual.device == JAX
    torch.testing.assert_close(actual.to_padded_tensor(0.0).cpu(), expected, rtol=1e-5, atol=1e-5)


def test_other_ops_run_on_cpu_or_are_refused(fallback_mode):
    x = _x()
    expected = torch.sin(torch._nested_tensor_from_mask(x, MASK)) + 1
    fallback_mode("silent")
    nt = torch._nested_tensor_from_mask(x.to(JAX), MASK.to(JAX))
    actual = torch.sin(nt) + 1
    assert actual.is_nested and actual.device == JAX
    assert torch.equal(actual.to_padded_tensor(0.0).cpu(), expected.to_padded_tensor(0.0))
    assert jaxdev.fallback_counts() == {"aten::sin": 1, "aten::add.Tensor": 1}
    fallback_mode("error")
    with pytest.raises(FallbackError, match=r"^aten::sin has no jax kernel for nested tensors .*forbids"):
        torch.sin(nt)


def test_attention_math_on_strided_nested_tensors(no_fallback):
    g = torch.Generator().manual_seed(4)
    parts = [torch.randn(2, n, 4, generator=g) for n in (3, 5, 1)]
    cpu = torch.nested.as_nested_tensor(parts)
    on_jax = torch.nested.as_nested_tensor([p.to(JAX) for p in parts])
    cases = [
        lambda t: t * 0.5,
        lambda t: t * torch.tensor(2.0, device=t.device),
        lambda t: t * t,
        lambda t: torch.matmul(t, t.transpose(-2, -1)),
        lambda t: torch.softmax(torch.matmul(t, t.transpose(-2, -1)), -1),
        lambda t: torch._safe_softmax(t, -1),
    ]
    for case in cases:
        for a, e in zip(case(on_jax).unbind(), case(cpu).unbind()):
            assert a.device == JAX
            torch.testing.assert_close(a.cpu(), e, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("kwargs", [{}, {"scale": 0.3}])
def test_jagged_scaled_dot_product_attention(no_fallback, kwargs):
    """Jagged tensors hold jax values under PyTorch's subclass; their attention converts to strided nested
    tensors on jax, whose scaling, products and softmax run here: CPU's values, no fallback."""
    g = torch.Generator().manual_seed(3)
    parts = [torch.randn(n, 2, 4, generator=g) for n in (3, 5)]

    def attend(device):
        nt = torch.nested.nested_tensor([p.to(device) for p in parts], layout=torch.jagged).transpose(1, 2)
        out = torch.nn.functional.scaled_dot_product_attention(nt, nt, nt, **kwargs)
        return [t.cpu() for t in out.transpose(1, 2).unbind()]

    for a, e in zip(attend(JAX), attend("cpu")):
        torch.testing.assert_close(a, e, rtol=1e-5, atol=1e-6)
