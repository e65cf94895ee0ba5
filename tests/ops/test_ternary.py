"""jaxdev/ops/ternary.py: clamp's dtype checks and lerp's values against CPU PyTorch."""

from __future__ import annotations

import math

import pytest
import torch
from jaxdev_testing import on_both

pytestmark = pytest.mark.usefixtures("no_fallback")  # tests/conftest.py


_B = torch.tensor(True)


@pytest.mark.parametrize(
    "lo,hi", [(True, True), (True, None), (None, False), (_B, _B), (_B, None), (None, _B), (0, None), (1, _B)]
)
def test_clamp_of_bool_tensors_is_refused_as_on_cpu(lo, hi):
    def fn(d):
        on = [v.to(d) if isinstance(v, torch.Tensor) else v for v in (lo, hi)]
        return torch.clamp(torch.tensor([True, False], device=d), *on)

    on_both(fn)


@pytest.mark.parametrize("lo,hi", [(-math.inf, torch.tensor(1 + 1j)), (1 + 1j, None), (1 + 0j, None), (None, 2j)])
def test_clamp_with_a_complex_bound_is_not_implemented(lo, hi):
    def fn(d):
        on = [v.to(d) if isinstance(v, torch.Tensor) else v for v in (lo, hi)]
        return torch.clamp(torch.tensor([3, -2], dtype=torch.int8, device=d), *on)

    on_both(fn)


# --- lerp: CPU's two formulas, self + w (end - self) for |w| < 0.5, else end + (w - 1)(end - self) ---


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.float16, torch.complex64])
@pytest.mark.parametrize("weight", [0.3, 0.5, 0.7, 1.0, -0.6, 1.5, "tensor"])
def test_lerp_is_cpus_bit_for_bit(dtype, weight):
    """The weight >= 0.5 side was self + w (end - self) too: ~39 % of float32 elements an ulp off CPU's
    at w = 0.7, and lerp(x, y, 1) not y."""
    if dtype.is_complex and weight == "tensor":
        pytest.skip("a complex weight's products round otherwise than CPU's complex fmadd (13 % an ulp off)")
    gen = torch.Generator().manual_seed(0)
    a = (torch.randn(1000, dtype=torch.float64, generator=gen) * 3).to(dtype)
    b = torch.randn(1000, dtype=torch.float64, generator=gen).to(dtype)
    w = (torch.rand(1000, generator=gen, dtype=torch.float64) * 1.6 - 0.3).to(dtype) if weight == "tensor" else weight
    on_both(lambda d: torch.lerp(a.to(d), b.to(d), w.to(d) if isinstance(w, torch.Tensor) else w))


def test_lerp_of_an_infinite_self_past_half_weight_is_cpus():
    """end + (w - 1)(end - inf) is inf where self + w (end - self) was inf - inf = NaN."""
    a = torch.tensor([math.inf, -math.inf, 1.0, 2.0])
    b = torch.tensor([1.0, 2.0, math.inf, 3.0])
    for w in (0.3, 0.7, 1.0):
        on_both(lambda d, w=w: torch.lerp(a.to(d), b.to(d), w))
