"""jaxdev/ops/indexing.py: stack/cat out=, gather with empty indices, embedding renorm, against CPU PyTorch."""

from __future__ import annotations

import math

import pytest
import torch
from jaxdev_testing import check, like_cpu, on_both

pytestmark = pytest.mark.usefixtures("no_fallback")  # tests/conftest.py

aten = torch.ops.aten


# --- _stack.out: CPU's kernel stacks (the default backend kernel concatenates) -------------------------


@pytest.mark.parametrize("dim", [0, 1, 2, -1, -3, 3])
def test_stack_out_stacks(dim):
    x, y = torch.randn(3, 4), torch.randn(3, 4)

    def run(d):
        out = torch.empty(0, device=d)
        r = aten._stack.out([x.to(d), y.to(d)], dim, out=out)
        assert r is out
        return out

    like_cpu(run)


@pytest.mark.parametrize(
    "out",
    [
        torch.empty(0, dtype=torch.float64),
        torch.empty(2, 3, 4, dtype=torch.float64),  # already the right shape: written in place
        torch.empty(4, 3, 2, dtype=torch.float64).transpose(0, 2),  # right shape, transposed strides
        torch.empty(5, dtype=torch.float64),  # resized (with the deprecation warning)
        torch.empty(0, dtype=torch.int64),  # float results can't be cast to int: TypeError
        torch.empty(0, dtype=torch.float16),
    ],
)
def test_stack_out_dtype_and_layout_like_cpu(out):
    x, y = torch.randn(3, 4), torch.randn(3, 4, dtype=torch.float64)
    like_cpu(lambda d: aten._stack.out([x.to(d), y.to(d)], 0, out=out.clone().to(d)))


def test_stack_out_errors_like_cpu():
    x, y = torch.randn(3, 3), torch.randn(3, 4)
    like_cpu(lambda d: aten._stack.out([x.to(d), y.to(d)], out=torch.empty(0, device=d)))
    like_cpu(lambda d: aten._stack.out([x.to(d), x.to(d)], 3, out=torch.empty(0, device=d)))


def test_cat_out_casts_each_input_to_out_dtype():
    # CPU copies each input straight into out: an int64 beside a float32 stays exact in a float64 out
    # (promoting to float32 first would round 2**40 + 1).
    a, b = torch.tensor([2**40 + 1]), torch.tensor([1.5])
    r = like_cpu(lambda d: torch.cat([a.to(d), b.to(d)], out=torch.empty(0, dtype=torch.float64, device=d)))
    assert r[0].item() == 2**40 + 1
    like_cpu(lambda d: torch.stack([a.to(d), b.to(d)], out=torch.empty(0, dtype=torch.float64, device=d)))
    x, z = torch.randn(2, 3), torch.randn(2, 3, dtype=torch.float64)
    like_cpu(lambda d: torch.cat([x.to(d), z.to(d)], out=torch.empty(0, dtype=torch.int64, device=d)))
    like_cpu(lambda d: torch.cat([x.int().to(d), x.bool().to(d)], out=torch.empty(0, dtype=torch.bool, device=d)))
    like_cpu(lambda d: torch.cat([x.to(d), z.to(d)], 1, out=torch.empty(3, 4, dtype=torch.float64, device=d).t()))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("norm_type", [1.0, 2.0, 3.0, float("inf")])
def test_embedding_renorm_runs_on_jax(dtype, norm_type):
    """nn.Embedding(max_norm=...) renormalises the looked-up rows in place (embedding_renorm_ ran on
    the CPU fallback): rows named twice are scaled once, rows within max_norm are left alone."""
    weight = (torch.randn(10, 4, generator=torch.Generator().manual_seed(3)) * 2).to(dtype)
    index = torch.tensor([1, 3, 3, 7, 0, 9])

    def renorm(d):
        w = weight.to(d)
        torch.embedding_renorm_(w, index.to(d), 1.5, norm_type)
        return w

    like_cpu(renorm, rtol=2e-7, atol=1e-6)  # float32: the norm's summation order, 1 ulp at most
    like_cpu(lambda d: torch.embedding_renorm_(weight.to(d), torch.tensor([-2, 4], device=d), 1.0, norm_type))
    for bad in ([3, 10, 12], [-11, 2]):
        like_cpu(lambda d, bad=bad: torch.embedding_renorm_(weight.to(d), torch.tensor(bad, device=d), 1.0, 2.0))


def test_embedding_with_max_norm_trains_on_jax():
    def step(d):
        torch.manual_seed(0)
        emb = torch.nn.Embedding(12, 5, max_norm=1.0).to(d)
        out = emb(torch.tensor([[1, 2, 2], [11, 0, 5]], device=d))
        out.pow(2).sum().backward()
        return out.detach(), emb.weight.detach(), emb.weight.grad

    like_cpu(step, rtol=1e-6, atol=1e-6)


def test_empty_index_of_any_dtype_is_accepted_like_cpu():
    src = torch.randn(3, 4)
    empty = torch.empty(3, 0, dtype=torch.uint8)
    check(lambda s, i: torch.gather(s, 1, i), src, empty, grad=False)
    check(lambda s, i: torch.scatter_reduce(s, 1, i, torch.zeros(3, 0, device=s.device), "sum"), src, empty, grad=False)


@pytest.mark.parametrize("dtype", [torch.int32, torch.uint8, torch.bool, torch.float16])
@pytest.mark.parametrize("value", [2**31, -(2**31) - 1, math.inf, math.nan, 1e10, 2.5, 1 + 1j, 300, -1])
def test_masked_fill_checks_a_scalar_value_whatever_the_mask(dtype, value):
    for mask in ([True, False, True], [False, False, False]):
        on_both(lambda d, m=mask: torch.zeros(3, dtype=dtype, device=d).masked_fill(torch.tensor(m, device=d), value))


@pytest.mark.parametrize("dtype", [torch.int8, torch.uint8, torch.int32, torch.float16, torch.float32, torch.bool])
@pytest.mark.parametrize(
    "value",
    [(300.0, torch.bfloat16), (100.7, torch.float32), (-129, torch.int64), (-5, torch.int64), (1e6, torch.float64),
     (math.inf, torch.float32), (math.nan, torch.float64), (1 + 2j, torch.complex64), (3.0 + 0j, torch.complex128),
     (7, torch.int16)],
    ids=str,
)  # fmt: skip
def test_a_zero_dim_tensor_value_is_checked_like_cpus_scalar(dtype, value):
    """masked_fill with a 0-dim tensor value, and index_put_ of one through a bool mask (masked_fill on
    CPU): CPU reads the value and converts it with c10's checked conversion (300.0 into int8 raises)."""
    v, vdt = value
    mask = [True, False, True, False]
    on_both(
        lambda d: torch.zeros(4, dtype=dtype, device=d).masked_fill(
            torch.tensor(mask, device=d), torch.tensor(v, dtype=vdt, device=d)
        )
    )
    on_both(
        lambda d: torch.zeros(4, dtype=dtype, device=d).index_put_(
            (torch.tensor(mask, device=d),), torch.tensor(v, dtype=vdt, device=d)
        )
    )


def test_a_zero_dim_tensor_value_is_checked_inside_a_compiled_program():
    def fill(x, m, v):
        return x.masked_fill(m, v) + 1

    compiled = torch.compile(fill, backend="jax", fullgraph=True)
    x, m = torch.zeros(4, dtype=torch.int8, device="jax"), torch.tensor([True, False, True, False], device="jax")
    assert compiled(x, m, torch.tensor(7.9, device="jax")).tolist() == [8, 1, 8, 1]
    with pytest.raises(RuntimeError, match="value cannot be converted to type int8_t without overflow"):
        compiled(x, m, torch.tensor(300.0, device="jax")).tolist()  # a program's checks are read with its values


@pytest.mark.parametrize("second", ["channels_last", "contiguous"])
def test_cat_into_an_empty_out_takes_the_inputs_memory_format(second):
    """CPU's cat restrides a resized out to its inputs' memory format (channels_last when all are); jax
    made it contiguous."""
    results = {}
    for d in ("cpu", "jax"):
        a = torch.arange(48.0).reshape(2, 3, 2, 4).to(d).contiguous(memory_format=torch.channels_last)
        b = a if second == "channels_last" else a.contiguous()
        out = torch.cat([a, b], 1, out=torch.empty(0, device=d))
        results[d] = (out.stride(), out.cpu())
    assert results["jax"][0] == results["cpu"][0]
    assert torch.equal(results["jax"][1], results["cpu"][1])
