"""jaxdev/ops/complex.py against CPU."""

from __future__ import annotations

import torch


def test_conj_physical_into_an_empty_out_is_laid_out_as_its_input():
    """conj_physical(out=) is a TensorIterator on CPU: a resized out lies as the input does (jax: contiguous)."""
    results = {}
    for d in ("cpu", "jax"):
        x = torch.tensor([[1 + 2j, 3 - 1j, 0j], [4j, -1 + 0j, 2 + 2j]], device=d).t()
        out = torch.conj_physical(x, out=torch.empty(0, dtype=torch.complex64, device=d))
        results[d] = (out.stride(), out.cpu())
    assert results["jax"][0] == results["cpu"][0]
    assert torch.equal(results["jax"][1], results["cpu"][1])
