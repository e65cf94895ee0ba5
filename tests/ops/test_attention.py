"""F.scaled_dot_product_attention on the jax device: PyTorch's overrideable fused backend (one program
each way, jaxdev/ops/attention.py) where the device chooses it, PyTorch's math composite elsewhere;
values and gradients as CPU's math path, eager and compiled."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import pytest
import torch
import torch.nn.functional as F
from jaxdev_testing import JAX, assert_same
from torch.nn.attention import SDPBackend, sdpa_kernel

from jaxdev import dtypes, native
from jaxdev.ops import attention
from jaxdev.ops.kit import transcendentals, widened_product_precision

pytestmark = pytest.mark.skipif(native.module is None, reason="the backend choice needs the native module")

FUSED = "aten::_scaled_dot_product_fused_attention_overrideable"


def _ops_run(fn):
    with torch.profiler.profile() as prof:
        fn()
    return {e.name for e in prof.events()}


def _inputs(shape, kshape, dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(*shape, generator=g).to(dtype)
    k = torch.randn(*kshape, generator=g).to(dtype)
    v = torch.randn(*kshape, generator=g).to(dtype)
    return q, k, v


CASES = {
    "plain": {},
    "causal": {"is_causal": True},
    "boolean mask": {"mask": lambda: torch.rand(8, 8, generator=torch.Generator().manual_seed(1)) > 0.5},
    "float mask": {"mask": lambda: torch.randn(2, 1, 8, 8, generator=torch.Generator().manual_seed(2))},
    "a row that sees nothing": {"mask": lambda: torch.zeros(8, 8, dtype=torch.bool)},
    "3-dim": {"shape": (4, 8, 16)},
    "negative scale": {"scale": -0.3},
    "more keys than queries": {"shape": (2, 4, 5, 16), "kshape": (2, 4, 9, 16)},
    "causal, more keys than queries": {"shape": (2, 4, 5, 16), "kshape": (2, 4, 9, 16), "is_causal": True},
    "float64": {"dtype": torch.float64},
}


@pytest.mark.parametrize("name", list(CASES))
def test_fused_attention_as_cpu_math(name):
    case = CASES[name]
    shape = case.get("shape", (2, 4, 8, 16))
    q, k, v = _inputs(shape, case.get("kshape", shape), case.get("dtype", torch.float32))
    mask = case["mask"]() if "mask" in case else None
    results = {}
    for device in ("cpu", JAX):
        leaves = [t.detach().to(device).requires_grad_() for t in (q, k, v)]
        m = None if mask is None else mask.to(device)
        kwargs = {"attn_mask": m, "is_causal": case.get("is_causal", False), "scale": case.get("scale")}
        out = F.scaled_dot_product_attention(*leaves, **kwargs)
        out.pow(2).sum().backward()
        results[device] = [out, *(t.grad for t in leaves)]
        if device == JAX:
            assert FUSED in _ops_run(lambda a=leaves, kw=kwargs: F.scaled_dot_product_attention(*a, **kw))
    for actual, expected in zip(results[JAX], results["cpu"]):
        assert_same(actual, expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype, tol", [(torch.float16, 1e-3), (torch.bfloat16, 8e-3)])
def test_half_inputs_computed_in_float32_as_cpus_math_path(dtype, tol):
    q, k, v = _inputs((2, 4, 8, 16), (2, 4, 8, 16), dtype)
    outs = [F.scaled_dot_product_attention(q.to(d), k.to(d), v.to(d), is_causal=True) for d in ("cpu", JAX)]
    assert outs[1].dtype == dtype
    assert_same(outs[1], outs[0], rtol=tol, atol=tol)


def test_a_mask_that_needs_a_gradient_gets_cpus():
    q, k, v = _inputs((2, 4, 8, 16), (2, 4, 8, 16), torch.float32)
    mask = torch.randn(1, 4, 8, 8)
    grads = []
    for device in ("cpu", JAX):
        m = mask.detach().to(device).requires_grad_()
        backends = [SDPBackend.MATH] if device == "cpu" else [SDPBackend.OVERRIDEABLE, SDPBackend.MATH]
        with sdpa_kernel(backends):  # CPU's flash path gives the mask no gradient
            out = F.scaled_dot_product_attention(q.to(device), k.to(device), v.to(device), attn_mask=m)
        out.pow(2).sum().backward()
        grads.append(m.grad)
    assert_same(grads[1], grads[0], rtol=1e-5, atol=1e-5)


def test_dropout_and_grouped_heads_take_the_math_path():
    q, k, v = (t.to(JAX) for t in _inputs((2, 4, 8, 16), (2, 2, 8, 16), torch.float32))
    assert FUSED not in _ops_run(lambda: F.scaled_dot_product_attention(q, k, v, enable_gqa=True))
    assert FUSED not in _ops_run(lambda: F.scaled_dot_product_attention(q, q, q, dropout_p=0.5))
    out = F.scaled_dot_product_attention(q, k, v, enable_gqa=True)
    expected = F.scaled_dot_product_attention(*(t.cpu() for t in (q, k, v)), enable_gqa=True)
    assert_same(out, expected, rtol=1e-5, atol=1e-5)


def test_results_and_gradients_laid_out_as_cpus():
    """Eagerly as CPU's math path: the output and the gradients contiguous, the key's gradient
    transposed, whatever the inputs' layouts (compiled graphs get the meta function's, below)."""
    layouts = []
    for device in ("cpu", JAX):
        x = torch.randn(2, 8, 48, generator=torch.Generator().manual_seed(0)).to(device).requires_grad_()
        q, k, v = x.view(2, 8, 3, 4, 4).permute(2, 0, 3, 1, 4)
        backends = [SDPBackend.MATH] if device == "cpu" else [SDPBackend.OVERRIDEABLE, SDPBackend.MATH]
        with sdpa_kernel(backends):
            out = F.scaled_dot_product_attention(q, k, v)
        grads = torch.autograd.grad(out.sum(), (q, k, v))
        layouts.append([out.stride(), *(g.stride() for g in grads)])
    assert layouts[1] == layouts[0]


def test_results_laid_out_as_cpus_flash_kernel_where_cpu_takes_it():
    """With PyTorch's default backends CPU takes its flash kernel for 4-dim inputs: the output in the
    query's order of dims, so `out.transpose(1, 2).view(...)` after a heads split works (it raised on
    jax while jax laid out as the math path), and the gradients over (batch, L, heads, d) memory."""
    got = {}
    for device in ("cpu", JAX):
        x = torch.randn(2, 8, 32, generator=torch.Generator().manual_seed(0)).to(device).requires_grad_()
        q = x.view(2, 8, 4, 8).transpose(1, 2)
        k = x.detach().view(2, 8, 4, 8).permute(2, 0, 1, 3).contiguous().permute(1, 0, 2, 3).requires_grad_()
        v = torch.randn(2, 4, 8, 8, generator=torch.Generator().manual_seed(1)).to(device).requires_grad_()
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        merged = out.transpose(1, 2).view(2, 8, 32)
        grads = torch.autograd.grad(merged.sum(), (x, k, v))
        got[device] = (merged, [out.stride(), *(g.stride() for g in grads)])
    assert got[JAX][1] == got["cpu"][1]
    assert_same(got[JAX][0], got["cpu"][0], rtol=1e-5, atol=1e-5)


def test_compiled_attention_matches_eager():
    torch.manual_seed(0)
    layer = torch.nn.Linear(16, 48)
    x = torch.randn(2, 8, 16)

    def attend(layer, x):
        q, k, v = layer(x).view(2, 8, 3, 4, 4).permute(2, 0, 3, 1, 4)
        return F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(2, 8, 16)

    expected = attend(layer, x)
    expected.sum().backward()
    on_device = torch.nn.Linear(16, 48).to(JAX)
    on_device.load_state_dict(layer.state_dict())
    out = torch.compile(attend, backend="jax")(on_device, x.to(JAX))
    out.sum().backward()
    assert_same(out, expected, rtol=1e-5, atol=1e-5)
    assert_same(on_device.weight.grad, layer.weight.grad, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("shape", [(2, 4, 5, 8), (4, 5, 8)], ids=["4-dim", "3-dim"])
def test_a_mask_with_is_causal_as_on_cpu(shape):
    """CPU's flash path (4-dim) applies both the mask and causality; its math path (3-dim) refuses."""
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(*shape, generator=g) for _ in range(3))
    mask = torch.rand(5, 5, generator=g) > 0.5
    try:
        expected = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=True)
    except RuntimeError as cpu_error:
        with pytest.raises(RuntimeError) as raised:
            F.scaled_dot_product_attention(q.to(JAX), k.to(JAX), v.to(JAX), attn_mask=mask.to(JAX), is_causal=True)
        assert str(raised.value) == str(cpu_error)
        return
    out = F.scaled_dot_product_attention(q.to(JAX), k.to(JAX), v.to(JAX), attn_mask=mask.to(JAX), is_causal=True)
    assert_same(out, expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_half_attention_states_its_float32_arithmetic(dtype):
    """Both directions' products of half attention are float32 x float32 at float32's setting
    (HIGHEST by default), so no backend's one-pass default rounds the widened operands to bfloat16:
    on a TPU that put the bfloat16 gradient at 118x the OpInfo tolerance (CPU 0.24x)."""
    jdt = dtypes.to_jax_dtype(dtype)
    settings = widened_product_precision(jdt)
    q = jnp.ones((2, 4, 8, 16), jdt)
    programs = {
        "forward": attention._forward(*settings, False, None).lower(q, q, q, None),
        "backward": attention._backward(*settings, False, None).lower(q, q, q, q, None),
    }
    for direction, lowered in programs.items():
        dots = [line for line in lowered.as_text().splitlines() if "dot_general" in line]
        assert len(dots) >= (2 if direction == "forward" else 4), direction
        for line in dots:
            assert "precision = [HIGHEST, HIGHEST]" in line, (direction, line)
            assert "bf16" not in line and "f16>" not in line.split("->")[0], (direction, line)


def _probability_barriers():
    q = jnp.linspace(-1, 1, 2 * 3 * 8 * 4, dtype=jnp.float32).reshape(2, 3, 8, 4)
    attend = lambda q, k, v: attention._attend(q, k, v, None, True, None, jax.lax.Precision.HIGHEST, None)
    jaxpr = jax.make_jaxpr(attend)(q, q, q).jaxpr
    kept = [e for e in jaxpr.eqns if e.primitive.name == "optimization_barrier"]
    return [v.aval.shape for e in kept for v in e.invars]


def test_probabilities_computed_once_where_exp_is_jaxdevs():
    """jaxdev's exp (transcendentals.py, the default off XLA's CPU backend) is tens of operations an
    element: XLA fused it into every product reading the probabilities and computed it in each (five a
    layer in the LM's training step on a TPU, issue 37), so there attention computes them once. The
    values stay CPU's, a row that sees nothing included."""
    with transcendentals.forced("fast"):
        assert (2, 3, 8, 8) not in _probability_barriers()
    with transcendentals.forced("own"):
        assert (2, 3, 8, 8) in _probability_barriers()
        jax.clear_caches()
        q, k, v = _inputs((2, 4, 8, 16), (2, 4, 8, 16), torch.float32)
        for mask in (None, torch.zeros(8, 8, dtype=torch.bool).tril(-1)):
            grads = []
            for device in ("cpu", JAX):
                leaves = [t.detach().to(device).requires_grad_() for t in (q, k, v)]
                m = None if mask is None else mask.to(device)
                out = F.scaled_dot_product_attention(*leaves, attn_mask=m, is_causal=mask is None)
                out.sum().backward()
                grads.append([out.detach().cpu()] + [t.grad.cpu() for t in leaves])
            torch.testing.assert_close(grads[1], grads[0], equal_nan=True)
    jax.clear_caches()


def test_probability_totals_cross_the_barrier_with_the_weights():
    """Where attention computes its weights once (jaxdev's exp), the rows' totals are summed before the
    barrier, in the exp's own pass: summed behind it they were a pass of their own over the weights
    (a TPU: 253k estimated cycles a layer against 98k for the exp, issue 37), and the backward wrote
    the weights' gradient out in full to add the total's to it."""
    q = jnp.linspace(-1, 1, 2 * 3 * 8 * 4, dtype=jnp.float32).reshape(2, 3, 8, 4)
    attend = lambda q, k, v: attention._attend(q, k, v, None, True, None, jax.lax.Precision.HIGHEST, None)
    with transcendentals.forced("own"):
        jaxpr = jax.make_jaxpr(attend)(q, q, q).jaxpr
    kept = {v for e in jaxpr.eqns if e.primitive.name == "optimization_barrier" for v in e.outvars}
    sums = [e for e in jaxpr.eqns if e.primitive.name == "reduce_sum"]
    assert (2, 3, 8, 1) in [v.aval.shape for v in kept]
    assert not [e for e in sums if any(v in kept for v in e.invars)]
