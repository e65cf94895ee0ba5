"""torch.mode against CPU: the value and CPU's very index. CPU sorts (value, index) pairs with
libstdc++'s std::sort, which is not stable, and returns the index of the last pair of the modal value's
run; test_ops' compare_cpu found jaxdev's index (the last in the original order) at 2722 where CPU had
1019 on a 3000-element int64 sample. Rows of one call are independent, so each test puts many inputs
in one tensor (one compilation)."""

from __future__ import annotations

import pytest
import torch
from jaxdev_testing import JAX, assert_same


def _rows(n: int, generator: torch.Generator) -> torch.Tensor:
    """Inputs whose ties std::sort reorders differently: few values, random, sorted, reversed, constant,
    and an organ pipe (a median-of-three killer: its segments end in std::sort's heapsort)."""
    few = [torch.randint(-k, k + 1, (n,), generator=generator) for k in (1, 2, 4, 9, 30)]
    wide = torch.randint(-1000, 1000, (n,), generator=generator)
    ordered = torch.randint(-5, 5, (n,), generator=generator).sort().values
    half = torch.arange(n // 2)
    organ = torch.cat([half, half.flip(0), torch.zeros(n % 2, dtype=torch.long)])
    return torch.stack([*few, wide, ordered, ordered.flip(0), torch.zeros(n, dtype=torch.long), organ])


def _same(x: torch.Tensor, *args):
    values, indices = torch.mode(x.to(JAX), *args)
    expected = torch.mode(x, *args)
    assert_same(values, expected.values)
    assert_same(indices, expected.indices)


@pytest.mark.parametrize("n", [16, 17, 40, 3000])
def test_index_is_cpus(n):
    """Up to 16 elements std::sort is an insertion sort (stable); past that its partitions reorder
    ties, and a row still longer than 16 after 2 log2(n) levels is heapsorted (the organ pipe)."""
    _same(_rows(n, torch.Generator().manual_seed(n)))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.int8, torch.bool])
def test_dtypes(dtype):
    g = torch.Generator().manual_seed(1)
    _same(torch.randint(0, 4, (3, 50, 7), generator=g).to(dtype), 1)


def test_dims():
    g = torch.Generator().manual_seed(1)
    x = torch.randint(0, 4, (3, 50, 7), generator=g).float()
    _same(x, 1, True)
    _same(x.transpose(0, 2), 0)


def test_signed_zero_ties():
    """-0.0 equals 0.0 in CPU's comparison: one run, whose last pair gives the value's sign too."""
    g = torch.Generator().manual_seed(2)
    x = torch.randint(-1, 2, (6, 45), generator=g).float() * 0.0
    values, indices = torch.mode(x.to(JAX))
    expected = torch.mode(x)
    assert_same(indices, expected.indices)
    assert torch.equal(torch.signbit(values.cpu()), torch.signbit(expected.values))


@pytest.mark.parametrize("n", [12, 40])
def test_nan(n):
    """NaN is never less nor greater in CPU's comparisons: it stops the insertion sort's moves (and is
    its own run), and an element below the first of the first 16 jumps to the front past NaNs."""
    g = torch.Generator().manual_seed(n)
    x = torch.randint(0, 5, (40, n), generator=g).float()
    x[torch.rand(x.shape, generator=g) < torch.rand(40, 1, generator=g) * 0.5] = float("nan")
    _same(x)


def test_opinfo_samples():
    from torch.testing._internal.common_methods_invocations import op_db

    op = next(o for o in op_db if o.name == "mode")
    for sample in op.sample_inputs("cpu", torch.int64):
        _same(sample.input, *sample.args)
