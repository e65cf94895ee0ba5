"""nn.MultiheadAttention's and nn.TransformerEncoder's inference fast paths on jax (jaxdev/ops/transformer.py,
jaxdev/ops/nested.py): the fused ops against CPU's, and whole eval-mode encoders with a padding mask
(which build a nested tensor on CPU and now on jax) against CPU's output, with no CPU fallback."""

from __future__ import annotations

import pytest
import torch
from jaxdev_testing import JAX

import jaxdev

pytestmark = pytest.mark.usefixtures("no_fallback")

E, HEADS, B, T = 8, 2, 3, 5
PADDING = torch.tensor([[False] * 5, [False] * 3 + [True] * 2, [False] * 2 + [True] * 3])


def _jax(t):
    return None if t is None else t.to(JAX)


def _weights(seed=0, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    shapes = ((3 * E, E), (3 * E,), (E, E), (E,))
    return [torch.randn(*s, generator=g).to(dtype) for s in shapes]


MASKS = {
    "none": (None, None),
    "key padding": (PADDING, 1),
    "float key padding": (PADDING.float() * -1.5, 1),  # any nonzero element hides its key, as on CPU
    "square": (torch.rand(T, T, generator=torch.Generator().manual_seed(3)) > 0.6, 0),
    "per head": (torch.rand(B, HEADS, T, T, generator=torch.Generator().manual_seed(4)) > 0.5, 2),
    "a batch that sees nothing": (torch.ones(B, T, dtype=torch.bool), 1),  # NaN rows, as on CPU
}


@pytest.mark.parametrize("name", list(MASKS))
@pytest.mark.parametrize("need_weights,average", [(False, True), (True, True), (True, False)])
def test_native_multi_head_attention_as_cpu(name, need_weights, average):
    mask, mask_type = MASKS[name]
    g = torch.Generator().manual_seed(1)
    q, k, v = (torch.randn(B, T, E, generator=g) for _ in range(3))
    w = _weights()
    for query, key, value in ((q, q, q), (q, k, v)):
        expected = torch._native_multi_head_attention(
            query, key, value, E, HEADS, *w, mask, need_weights, average, mask_type
        )
        args = [_jax(t) for t in (query, key, value)]
        actual = torch._native_multi_head_attention(
            *args, E, HEADS, *map(_jax, w), _jax(mask), need_weights, average, mask_type
        )
        assert actual[0].device == JAX
        torch.testing.assert_close(actual[0].cpu(), expected[0], rtol=1e-5, atol=1e-5, equal_nan=True)
        if need_weights:
            torch.testing.assert_close(actual[1].cpu(), expected[1], rtol=1e-5, atol=1e-5, equal_nan=True)
        else:
            assert actual[1] is None and expected[1] is None


def test_native_multi_head_attention_float64_and_errors():
    q = torch.randn(B, T, E, dtype=torch.float64)
    w = _weights(dtype=torch.float64)
    expected = torch._native_multi_head_attention(q, q, q, E, HEADS, *w)
    actual = torch._native_multi_head_attention(*[_jax(q)] * 3, E, HEADS, *map(_jax, w))
    torch.testing.assert_close(actual[0].cpu(), expected[0], rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(actual[1].cpu(), expected[1], rtol=1e-12, atol=1e-12)
    with pytest.raises(RuntimeError, match="must divide evenly"):
        torch._native_multi_head_attention(*[_jax(q)] * 3, E, 3, *map(_jax, w))
    with pytest.raises(RuntimeError, match="expected 3-D `query`"):
        torch._native_multi_head_attention(*[_jax(q[0])] * 3, E, HEADS, *map(_jax, w))


def _layer(norm_first, activation, seed=0):
    torch.manual_seed(seed)
    return torch.nn.TransformerEncoderLayer(
        E, HEADS, 16, batch_first=True, norm_first=norm_first, activation=activation
    ).eval()


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("activation", ["relu", "gelu"])
def test_multihead_attention_and_encoder_layer_fast_paths(norm_first, activation):
    layer = _layer(norm_first, activation)
    x = torch.randn(B, T, E, generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        expected_layer = layer(x, src_key_padding_mask=PADDING)
        expected_mha = layer.self_attn(x, x, x, key_padding_mask=PADDING)
        layer.to(JAX)
        with torch.profiler.profile() as prof:
            actual_layer = layer(_jax(x), src_key_padding_mask=_jax(PADDING))
            actual_mha = layer.self_attn(*[_jax(x)] * 3, key_padding_mask=_jax(PADDING))
    ran = {e.name for e in prof.events()}
    assert {"aten::_transformer_encoder_layer_fwd", "aten::_native_multi_head_attention"} <= ran
    torch.testing.assert_close(actual_layer.cpu(), expected_layer, rtol=1e-5, atol=1e-5)
    for a, e in zip(actual_mha, expected_mha):
        torch.testing.assert_close(a.cpu(), e, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("norm", [False, True])
def test_encoder_with_padding_mask_gives_cpus_output(norm):
    """The issue's case: eval-mode TransformerEncoder with a padding mask builds a nested batch (CPU zeroes
    the padded positions of the output; the regular path would not) and runs each layer on it."""
    layer = _layer(False, "relu")
    encoder = torch.nn.TransformerEncoder(layer, 3, norm=torch.nn.LayerNorm(E) if norm else None).eval()
    x = torch.randn(B, T, E, generator=torch.Generator().manual_seed(5))
    with torch.no_grad():
        expected = encoder(x, src_key_padding_mask=PADDING)
        encoder.to(JAX)
        with torch.profiler.profile() as prof:
            actual = encoder(_jax(x), src_key_padding_mask=_jax(PADDING))
    ran = {e.name for e in prof.events()}
    assert {"aten::_nested_tensor_from_mask", "aten::to_padded_tensor"} <= ran
    torch.testing.assert_close(actual.cpu(), expected, rtol=1e-5, atol=1e-5)
    if not norm:
        assert (actual.cpu()[1, 3:] == 0).all() and (actual.cpu()[2, 2:] == 0).all()


def test_encoder_mask_that_is_not_left_aligned_takes_the_regular_path():
    encoder = torch.nn.TransformerEncoder(_layer(False, "relu"), 2).eval()
    x = torch.randn(B, T, E, generator=torch.Generator().manual_seed(6))
    gaps = PADDING.clone()
    gaps[0, 1] = True
    with torch.no_grad():
        expected = encoder(x, src_key_padding_mask=gaps)
        encoder.to(JAX)
        actual = encoder(_jax(x), src_key_padding_mask=_jax(gaps))
    torch.testing.assert_close(actual.cpu(), expected, rtol=1e-5, atol=1e-5)


def test_half_encoder_layer():
    layer = _layer(False, "gelu").to(torch.bfloat16)
    x = torch.randn(B, T, E, generator=torch.Generator().manual_seed(7)).to(torch.bfloat16)
    with torch.no_grad():
        expected = layer(x, src_key_padding_mask=PADDING)
        actual = layer.to(JAX)(_jax(x), src_key_padding_mask=_jax(PADDING))
    torch.testing.assert_close(actual.cpu().float(), expected.float(), rtol=0.05, atol=0.05)


def test_eager_jaxdev_has_the_kernels():
    for name in ("aten::_native_multi_head_attention", "aten::_transformer_encoder_layer_fwd"):
        assert name in jaxdev.ops.registry.KERNELS
