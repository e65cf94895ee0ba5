"""Facts of an emulated float64 (a TPU's: float32 pairs, float32's exponent range), run here under the
TPU's policy (`tpu_policy`: tests/ops/conftest.py) and as they are on a TPU: kernels that read float64's
IEEE bits refused, hash_tensor's float64 bits of narrow floats made without float64 arithmetic."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from jaxdev_testing import JAX

import jaxdev
from jaxdev.ops.kit import capabilities

_ON_CPU = capabilities.platform() == "cpu"


@pytest.mark.tpu_fact("float64 is emulated: its bits are a float32 pair's, hi << 32 | lo")
def test_float64_bit_readers_are_refused_where_float64_is_emulated(tpu_policy):
    """frexp, nextafter and hash_tensor read float64's IEEE bits, which a TPU's float32 pairs do not have
    (the v5e bitcast 1/3 to 0x3eaaaaabb22aaaab): refused in one sentence there, never garbage."""
    x = torch.tensor([1 / 3, -0.0, 2.5], dtype=torch.float64).to(JAX)
    for call in (torch.frexp, torch.hash_tensor, lambda v: torch.nextafter(v, v + 1)):
        with pytest.raises(jaxdev.PlatformDtypeError, match="emulated there as float32 pairs"):
            call(x)
    assert torch.frexp(x.float())[1].cpu().tolist() == [-1, 0, 2]  # float32 keeps its bits


def _narrow_bits(dtype, rng):
    """Every special class of `dtype` (zeros, subnormals, normals, infinities, quiet and signalling NaNs
    with payloads, both signs) and random bit patterns, as a `dtype` tensor."""
    width = {torch.float32: 32}.get(dtype, 16)
    m = {torch.float16: 10, torch.bfloat16: 7, torch.float32: 23}[dtype]
    top = (1 << (width - 1)) - (1 << m)  # +infinity's bits
    special = [0, 1, 2, 3, (1 << m) - 1, 1 << m, top - 1, top, top + 1, top + (1 << (m - 1)), top + 5, (1 << width) - 1]
    special += [b | (1 << (width - 1)) for b in special]
    signed = np.int32 if width == 32 else np.int16
    random = rng.integers(0, 1 << width, 4000, dtype=np.int64)
    bits = np.concatenate([np.array(special, np.int64), random]).astype(np.uint32 if width == 32 else np.uint16)
    return torch.from_numpy(bits.view(signed).copy()).view(dtype)


@pytest.mark.tpu_fact("float64 is emulated: a float32 widened to float64 has the pair's bits, not IEEE's")
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32], ids=str)
def test_hash_tensor_of_narrow_floats_is_cpus_where_float64_is_emulated(tpu_policy, dtype):
    """hash_tensor xors the elements' float64 bits; where float64 is float32 pairs (a TPU) they are made
    from the narrow float's bits, NaN payloads and subnormals as CPU's widening gives them."""
    x = _narrow_bits(dtype, np.random.default_rng(0))
    if not _ON_CPU:  # the chip flushes narrow subnormals and drops NaN payloads on the way in (the v5e)
        v = x.float()
        x = x[(v == 0) | v.isinf() | (v.abs() >= torch.finfo(dtype).tiny)]
    for i in range(len(x)):  # each element's bits alone, then all of them xor-ed along a dim
        if i < 24 or i % 97 == 0:
            got, want = torch.hash_tensor(x[i : i + 1].to(JAX)).cpu(), torch.hash_tensor(x[i : i + 1])
            assert got.item() == want.item(), (
                i,
                x[i : i + 1].view(torch.int16 if dtype != torch.float32 else torch.int32),
            )
    grid = x[: len(x) // 100 * 100].reshape(-1, 100)  # the chip's filter above leaves fewer than 4,000
    assert torch.equal(torch.hash_tensor(grid.to(JAX), dim=1).cpu(), torch.hash_tensor(grid, dim=1))
    assert torch.hash_tensor(x.to(JAX)).item() == torch.hash_tensor(x).item()
    assert not [pair for pair in tpu_policy if pair[1] == np.float64]  # no float64 value made


def test_hash_tensor_widens_through_float64_where_float64_is_ieees(monkeypatch):
    from jaxdev.ops.reductions import logical

    if capabilities.fact("float64_emulated"):
        pytest.skip("this platform's float64 is emulated")
    called = []
    monkeypatch.setattr(logical, "_float64_bits_of", lambda x: called.append(x))
    x = torch.randn(64).to(JAX)
    assert torch.hash_tensor(x).item() == torch.hash_tensor(x.cpu()).item()
    assert not called  # CPU's widening as XLA's convert does it: CPU's bits, no integer program
