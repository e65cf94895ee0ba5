"""Writes through overlapping memory refused or allowed as CPU does (jaxdev/core/limits.py:
check_no_internal_overlap, check_no_partial_overlap): an expanded tensor written in place or as out=,
an input that partly overlaps the written tensor.
"""

from __future__ import annotations

import torch
from jaxdev_testing import on_both


def test_expanded_write_is_an_error_like_cpu():
    def inplace(device):
        torch.zeros(3, device=device).expand(2, 3).add_(1)

    def fill(device):
        torch.zeros(3, device=device).expand(2, 3).mul_(2)

    def out(device):
        torch.add(torch.ones(2, 3, device=device), 1, out=torch.zeros(3, device=device).expand(2, 3))

    def copy(device):
        torch.zeros(3, device=device).expand(2, 3).copy_(torch.ones(2, 3))

    for scenario in (inplace, fill, out, copy):
        err = on_both(scenario, match="more than one element of the written-to tensor")
        assert isinstance(err, RuntimeError), f"{scenario.__name__}: CPU raised nothing?"


def test_partially_overlapping_input_and_output_like_cpu():
    def add(device):
        x = torch.arange(6.0, device=device)
        x[1:].add_(x[:-1])
        return x

    def copy(device):
        x = torch.arange(6.0, device=device)
        x[1:].copy_(x[:-1])
        return x

    def transposed_self(device):
        x = torch.arange(9.0, device=device).reshape(3, 3)
        x.add_(x.t())
        return x

    def same_memory(device):
        x = torch.arange(6.0, device=device).reshape(2, 3)
        x.mul_(x)
        torch.add(x, x[0], out=x)
        return x

    on_both(add, match="refer to a single memory location")
    on_both(copy)
    on_both(transposed_self)
    on_both(same_memory)
