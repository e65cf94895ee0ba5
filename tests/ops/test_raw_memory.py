"""Composite ops whose PyTorch kernel reads raw memory (data_ptr) segfaulted on jax tensors (issue 14,
coverage/aten.yaml's `crash` list). Each test is `crashprone`: it runs first in a child process, so a
regression fails that test instead of killing pytest. Results are compared with CPU's."""

from __future__ import annotations

import contextlib
import os
import warnings

import pytest
import torch
from jaxdev_testing import assert_same, check, on_both

import jaxdev
from jaxdev.ops import registry

aten = torch.ops.aten
pytestmark = pytest.mark.crashprone


@contextlib.contextmanager
def _fallback(mode):
    old = os.environ.get("JAXDEV_FALLBACK")
    os.environ["JAXDEV_FALLBACK"] = mode
    jaxdev.reset_fallback_counts()
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("JAXDEV_FALLBACK", None)
        else:
            os.environ["JAXDEV_FALLBACK"] = old


def _grid_inputs(seed=0):
    g = torch.Generator().manual_seed(seed)
    image = torch.randn(2, 3, 4, 5, generator=g)
    grid = torch.rand(2, 3, 6, 2, generator=g) * 2.6 - 1.3  # some taps outside [-1, 1]
    return image, grid


def test_grid_sampler_2d_cpu_fallback_forward_and_gradients_as_cpu():
    image, grid = _grid_inputs()
    with _fallback("error"):
        # every mode with every padding, align_corners alternating between them (each align value meets
        # every mode and every padding): the 18 full combinations took minutes and added no kernel path
        for mode in (0, 1, 2):
            for padding in (0, 1, 2):
                align = (mode + padding) % 2 == 1
                fn = lambda i, g: aten._grid_sampler_2d_cpu_fallback(i, g, mode, padding, align)  # noqa: B023
                check(fn, image, grid, grad=mode != 1, rtol=1e-5, atol=1e-5)
        out = torch.empty(0, device="jax")
        r = aten._grid_sampler_2d_cpu_fallback.out(image.to("jax"), grid.to("jax"), 0, 0, False, out=out)
        assert r is out
        assert_same(out, aten._grid_sampler_2d_cpu_fallback(image, grid, 0, 0, False), rtol=1e-6, atol=1e-6)
        assert jaxdev.fallback_counts() == {}


def test_grid_sampler_2d_cpu_fallback_backward_as_cpu():
    image, grid = _grid_inputs(1)
    cot = torch.randn(2, 3, 3, 6, generator=torch.Generator().manual_seed(2))  # not the global RNG: test order
    with _fallback("error"):
        for mode in (0, 2):
            on_both(  # grid gradients sum channels and corners in another order than CPU's loop: float32 tolerance
                lambda d, m=mode: aten._grid_sampler_2d_cpu_fallback_backward(
                    cot.to(d), image.to(d), grid.to(d), m, 1, False
                ),
                rtol=1e-4,
                atol=1e-4,
            )
        assert jaxdev.fallback_counts() == {}


def test_grid_sampler_2d_cpu_fallback_errors_as_cpu():
    image, grid = _grid_inputs()
    cases = [
        (lambda d: aten._grid_sampler_2d_cpu_fallback(image.double().to(d), grid.to(d), 0, 0, False), "Double"),
        (lambda d: aten._grid_sampler_2d_cpu_fallback(image.to(d), grid.half().to(d), 0, 0, False), "Half"),
        (lambda d: aten._grid_sampler_2d_cpu_fallback(image.to(d), grid[..., :1].to(d), 0, 0, False), "size 2"),
        (lambda d: aten._grid_sampler_2d_cpu_fallback(image[:1].to(d), grid.to(d), 0, 0, False), "batch size"),
    ]
    with _fallback("error"):
        for make, match in cases:
            assert isinstance(on_both(make, match=match), RuntimeError)


def test_sobol_engine_steps_run_on_cpu_copies():
    dim = 3
    with _fallback("silent"):
        state = {}
        for d in ("cpu", "jax"):
            s = torch.zeros(dim, 30, dtype=torch.long, device=d)
            aten._sobol_engine_initialize_state_(s, dim)
            ltm = torch.randint(0, 2, (dim, 30, 30), generator=torch.Generator().manual_seed(3)).tril().to(d)
            aten._sobol_engine_scramble_(s, ltm, dim)
            quasi = torch.arange(dim, dtype=torch.long, device=d) * 7
            samples, quasi = aten._sobol_engine_draw(quasi, 5, s, dim, 0, torch.float64)
            aten._sobol_engine_ff_(quasi, 4, s, dim, 5)
            state[d] = (s, samples, quasi)
        for j, c in zip(state["jax"], state["cpu"]):
            assert_same(j, c)
        assert set(jaxdev.fallback_counts()) == {
            "aten::_sobol_engine_initialize_state_",
            "aten::_sobol_engine_scramble_",
            "aten::_sobol_engine_draw",
            "aten::_sobol_engine_ff_",
        }
    with _fallback("error"), pytest.raises(NotImplementedError, match="_sobol_engine_draw"):
        aten._sobol_engine_draw(torch.zeros(2, dtype=torch.long, device="jax"), 1, s, 2, 0, None)


def test_quantization_helpers_run_on_cpu_copies():
    g = torch.Generator().manual_seed(5)
    w = torch.randn(5, 4, generator=g)
    mask = torch.tensor([True, False, True, True, False])
    x = torch.randn(40, generator=g)
    with _fallback("silent"):
        on_both(lambda d: aten._rowwise_prune(w.to(d), mask.to(d), torch.int32))
        on_both(lambda d: aten._rowwise_prune(w.to(d), mask.to(d), torch.int64))
        on_both(lambda d: aten.choose_qparams_optimized(x.to(d), 40, 200, 0.16, 8))
        on_both(lambda d: aten.choose_qparams_optimized(x.to(d), 41, 200, 0.16, 8), match="out of the bound")
        on_both(lambda d: aten.fbgemm_linear_quantize_weight(w.to(d)))
        # built from raw memory on CPU: no grad_fn there, none here (not autograd's not-implemented node)
        leaf = w.to("jax").requires_grad_()
        for r in (
            *aten._rowwise_prune(leaf, mask.to("jax"), torch.int32),
            *aten.fbgemm_linear_quantize_weight(leaf)[:2],
        ):
            assert not r.requires_grad and r.grad_fn is None


def test_saturate_weight_to_fp16_in_place_as_cpu():
    values = torch.tensor([[1e5, -7e4, 3.0], [float("nan"), 65504.0, -float("inf")]])
    with _fallback("error"):
        for d in ("cpu", "jax"):
            w = values.to(d)
            r = aten._saturate_weight_to_fp16(w)
            assert r is w
        assert_same(w, r.cpu())
        assert_same(w, torch.tensor([[65504.0, -65504.0, 3.0], [float("nan"), 65504.0, -65504.0]]))
        strided = values.t().to("jax")  # not contiguous: CPU saturates a copy and returns it untouched
        assert aten._saturate_weight_to_fp16(strided) is strided
        assert_same(strided, values.t())
        for make in (lambda d: values.double().to(d), lambda d: torch.tensor([1e5], device=d)):
            on_both(lambda d: aten._saturate_weight_to_fp16(make(d)))  # noqa: B023  (RuntimeError, IndexError)
        assert jaxdev.fallback_counts() == {}


def test_range_out_underscore_as_cpu():
    with _fallback("silent"):
        for start, end, dtype in ((0, 5, torch.float32), (-2.5, 3, torch.float64), (1, 4, torch.int64)):
            on_both(lambda d: aten.range.out_(start, end, out=torch.empty(0, dtype=dtype, device=d)))  # noqa: B023


def test_fbgemm_packing_is_refused_not_a_crash():
    w = torch.randn(4, 4)
    q = torch.randint(-5, 5, (4, 4), dtype=torch.int8)
    x = torch.randn(2, 4)
    calls = [
        lambda j: aten.fbgemm_pack_gemm_matrix_fp16(j(w)),
        lambda j: aten.fbgemm_pack_quantized_matrix(j(q)),
        lambda j: aten.fbgemm_pack_quantized_matrix.KN(j(q), 4, 4),
        lambda j: aten.fbgemm_linear_fp16_weight(j(x), aten.fbgemm_pack_gemm_matrix_fp16(w), j(torch.zeros(4))),
        lambda j: aten.fbgemm_linear_fp16_weight_fp32_activation(j(x), aten.fbgemm_pack_gemm_matrix_fp16(w), None),
    ]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for call in calls:
            with pytest.raises(RuntimeError, match="packed by fbgemm"):
                call(lambda t: t.to("jax"))


def test_every_listed_raw_memory_composite_has_a_kernel():
    missing = sorted(registry.RAW_MEMORY_COMPOSITES - set(registry.KERNELS))
    assert missing == []
