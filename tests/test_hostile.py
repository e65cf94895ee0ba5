"""What a user can pass that CPU rejects, jax rejects the same way: never a crash."""

from __future__ import annotations

import pytest
import torch
from jaxdev_testing import on_both


@pytest.mark.parametrize(
    "make",
    [
        lambda d: torch.empty((), dtype=torch.float64, device=d).resize_([2, 4, 2**29, 2**29]),
        lambda d: torch.empty([2**62, 4], device=d),
        lambda d: torch.empty_strided([2**40, 2**30], [2**30, 1], device=d),
        lambda d: torch.empty([3, -1], device=d),
        lambda d: torch.zeros([-2], device=d),
        lambda d: torch.empty(2, 3, device=d).resize_([-2]),
        lambda d: torch.empty(2, 3, device=d).new_empty_strided([2**40, 2**40], [2**40, 1]),
    ],
)
def test_sizes_that_overflow_or_go_negative_raise_cpus_error(make):
    err = on_both(make)
    assert isinstance(err, RuntimeError)


@pytest.mark.per_op_mode("the allocation fails at the op; fused mode allocates at the flush (tests/test_fused.py)")
def test_out_of_memory_is_torchs_error_and_the_device_keeps_working():
    with pytest.raises(torch.OutOfMemoryError, match="jax:0 is out of memory"):
        torch.empty(2**40, dtype=torch.uint8, device="jax")  # 1 TiB
    with pytest.raises(torch.OutOfMemoryError):
        torch.ones(2**38, device="jax")
    assert (torch.ones(3, device="jax") + 1).cpu().tolist() == [2, 2, 2]


# --- sparse tensors on jax (jaxdev/ops/sparse.py) --------------------------------------------------

_I = torch.tensor([[0, 1, 1, 0], [2, 0, 0, 2]])  # (0,2) and (1,0) twice each: uncoalesced
_V = torch.tensor([1.0, 2.0, 3.0, -4.0])
_DENSE = torch.tensor([[0.0, 1.0, 0.0], [2.0, 0.0, 3.0]])


def _coo(d):
    return torch.sparse_coo_tensor(_I, _V, (2, 3), device=d)


def _sparse_parts(t):
    """A sparse tensor's layout and components on CPU, for comparison."""
    if t.layout == torch.sparse_coo:
        c = t.to("cpu")
        return ("coo", c._indices(), c._values(), c.is_coalesced(), tuple(c.shape))
    if t.layout == torch.sparse_csr:
        return ("csr", t.crow_indices().cpu(), t.col_indices().cpu(), t.values().cpu(), tuple(t.shape))
    return ("csc", t.ccol_indices().cpu(), t.row_indices().cpu(), t.values().cpu(), tuple(t.shape))


@pytest.fixture
def no_sparse_fallback(monkeypatch):
    monkeypatch.setenv("JAXDEV_FALLBACK", "error")
    import jaxdev

    jaxdev.reset_fallback_counts()
    yield
    assert jaxdev.fallback_counts() == {}


@pytest.mark.parametrize(
    "make",
    [
        _coo,
        lambda d: _coo(d).coalesce(),
        lambda d: _coo(d).t(),
        lambda d: _coo(d).transpose(0, 1).coalesce(),
        lambda d: _coo(d).clone(),
        lambda d: torch.sparse_coo_tensor((2, 2), device=d),
        lambda d: torch.zeros(2, 2, layout=torch.sparse_coo, device=d),
        lambda d: torch.sparse_coo_tensor(
            torch.tensor([[0, 1, 0]]), torch.tensor([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]), (2, 2), device=d
        ).coalesce(),  # hybrid: a dense dim
        lambda d: torch.sparse_coo_tensor(_I, torch.tensor([1, 2, 3, 4]), (2, 3), device=d).coalesce(),
        lambda d: _DENSE.to(d).to_sparse(),
        lambda d: _DENSE.to(d).to_sparse(1),
        lambda d: torch.tensor([[True, False]], device=d).to_sparse(),
        lambda d: torch.arange(8.0).reshape(2, 2, 2).sub(3).clamp(min=0).to(d).to_sparse(),
        lambda d: _DENSE.to(d).to_sparse_csr(),
        lambda d: _DENSE.to(d).to_sparse_csc(),
        lambda d: _DENSE.to(d).to_sparse_csr().t(),
        lambda d: _DENSE.to(d).to_sparse_csc().to_sparse(),
        lambda d: _DENSE.to(d).to_sparse_csr().to_sparse(),
        lambda d: _coo(d).to_sparse_csr(),
        lambda d: _coo(d).to_sparse_csc(),
        lambda d: torch.sparse_csr_tensor(
            torch.tensor([0, 1, 2]), torch.tensor([0, 1]), torch.tensor([1.0, 2.0]), (2, 2), device=d
        ),
        lambda d: torch.eye(2).to_sparse().to(d),
        lambda d: torch.eye(2).to_sparse_csr().to(d),
    ],
)
def test_sparse_tensors_on_jax_hold_what_cpu_holds(make, no_sparse_fallback):
    cpu, jax_ = make("cpu"), make("jax")
    assert jax_.device.type == "jax" and jax_.layout == cpu.layout
    for c, j in zip(_sparse_parts(cpu), _sparse_parts(jax_)):
        assert torch.equal(c, j) if isinstance(c, torch.Tensor) else c == j, (c, j)


@pytest.mark.parametrize(
    "fn",
    [
        lambda d: _coo(d).to_dense(),
        lambda d: _coo(d).t().to_dense(),
        lambda d: _coo(d).coalesce().indices(),
        lambda d: _coo(d).coalesce().values(),
        lambda d: _coo(d)._nnz(),
        lambda d: torch.sparse_coo_tensor(
            torch.zeros(2, 0, dtype=torch.long), torch.zeros(0), (2, 2), device=d
        ).to_dense(),
        lambda d: _DENSE.to(d).to_sparse_csr().crow_indices(),
        lambda d: _DENSE.to(d).to_sparse_csr().col_indices(),
        lambda d: _DENSE.to(d).to_sparse_csr().to_dense(),
        lambda d: _DENSE.to(d).to_sparse_csc().to_dense(),
        lambda d: torch.sparse.mm(_coo(d), torch.arange(6.0).reshape(3, 2).to(d)),
        lambda d: _coo(d) @ torch.arange(6.0).reshape(3, 2).to(d),
        lambda d: _coo(d) @ torch.arange(3.0).to(d),
        lambda d: _DENSE.to(d).to_sparse_csr() @ torch.arange(6.0).reshape(3, 2).to(d),
        lambda d: _DENSE.to(d).to_sparse_csr() @ torch.arange(3.0).to(d),
        lambda d: _DENSE.to(d).to_sparse_csc() @ torch.arange(6.0).reshape(3, 2).to(d),
        lambda d: torch.addmm(torch.ones(2, 2, device=d), _coo(d), torch.ones(3, 2, device=d), beta=2, alpha=3),
        lambda d: torch.sparse.addmm(torch.ones(2, 2, device=d), _coo(d), torch.ones(3, 2, device=d)),
        # CPU's errors, with CPU's messages
        lambda d: _coo(d) @ torch.ones(2, 2, device=d),
        lambda d: _DENSE.to(d).to_sparse_csr() @ torch.ones(2, 2, device=d),
        lambda d: _coo(d) @ torch.ones(3, 2, dtype=torch.float64, device=d),
        lambda d: torch.addmm(torch.ones(3, 3, device=d), _coo(d), torch.ones(3, 2, device=d)),
        lambda d: torch.sparse_coo_tensor(
            torch.tensor([[0, 5]]), torch.tensor([1.0, 2.0]), (2,), device=d, check_invariants=True
        ),
        lambda d: _DENSE.to(d).to_sparse_csr().to_sparse(1),
    ],
)
def test_sparse_operations_on_jax_match_cpu(fn, no_sparse_fallback):
    on_both(fn)


def test_other_sparse_ops_run_on_cpu_under_the_fallback_policy_never_a_dispatcher_dump(monkeypatch):
    import jaxdev

    monkeypatch.setenv("JAXDEV_FALLBACK", "error")
    with pytest.raises(NotImplementedError, match=r"aten::mul\.Tensor has no jax kernel for sparse_coo tensors"):
        _coo("jax") * 2
    monkeypatch.setenv("JAXDEV_FALLBACK", "silent")
    jaxdev.reset_fallback_counts()
    doubled = _coo("jax") * 2
    assert doubled.device.type == "jax" and doubled.layout == torch.sparse_coo
    assert torch.equal(doubled.to_dense().cpu(), (_coo("cpu") * 2).to_dense())
    assert torch.equal((_coo("jax") + _coo("jax")).to_dense().cpu(), (_coo("cpu") * 2).to_dense())
    assert jaxdev.fallback_counts() == {"aten::mul.Tensor": 1}  # sparse add has a jax kernel (ops/sparse_add.py)
    # a view CPU has no sparse kernel for either (narrow is as_strided): CPU's first sentence, not its dump
    with pytest.raises(
        NotImplementedError, match=r"^Could not run 'aten::as_strided' with .* on sparse_coo tensors either$"
    ):
        torch.sparse_coo_tensor(_I, _V, (2, 3), device="jax").narrow(0, 0, 1)


@pytest.mark.parametrize(
    "make",
    [
        lambda: torch.eye(2, device="jax").to_sparse_bsr((1, 1)),
        lambda: torch.eye(2, device="jax").to_sparse(layout=torch.sparse_bsc, blocksize=(1, 1)),
        lambda: torch.eye(2).to_sparse_bsr((1, 1)).to("jax").to_dense(),  # moves (metadata), computes nothing
        lambda: torch.eye(2, device="jax").to_mkldnn(),
    ],
)
def test_layouts_jax_does_not_hold_raise_one_sentence_naming_the_layout(make, monkeypatch):
    import jaxdev

    monkeypatch.setenv("JAXDEV_FALLBACK", "silent")
    with pytest.raises(jaxdev.UnsupportedLayoutError, match=r"layout \S+ is not supported on (device 'jax'|jax)"):
        make()


# --- resize_ / resize_as_ keep strides when the sizes do not change (as CPU's resize_impl_cpu_) ----


@pytest.mark.parametrize(
    "fn",
    [
        lambda d: (
            torch.empty(2, 3, device=d).t().resize_as_(torch.empty(2, 3, device=d).t())
        ),  # test_resize_as_preserves_strides
        lambda d: torch.empty(2, 3, device=d).t().resize_([3, 2]),
        lambda d: torch.empty(2, 3, device=d).t().resize_([6]),
        lambda d: torch.empty(2, 3, device=d).t().resize_([3, 2], memory_format=torch.contiguous_format),
        lambda d: torch.empty(2, 3, device=d).resize_([3, 2], memory_format=torch.preserve_format),
        lambda d: torch.randn(10, device=d).resize_as_(
            torch.empty(1, 2, 5, 1, device=d, memory_format=torch.channels_last), memory_format=torch.preserve_format
        ),
    ],
)
def test_resize_keeps_cpus_strides(fn):
    on_both(lambda d: fn(d).stride())  # (values: uninitialised on CPU)


# --- compile storms (issue 14 item 6): random draws compile per size bucket, not per shape --------------


def test_random_draws_compile_once_per_size_bucket_and_keep_the_stream():
    import jax
    import jax.numpy as jnp

    from jaxdev import rng
    from jaxdev.ops import random as jrandom

    before = jrandom._flat_normal.cache_info().currsize
    shapes = [(a, b) for a in range(5, 11) for b in range(5, 8)]  # 18 shapes, 25..70 elements
    for s in shapes:
        torch.randn(s, dtype=torch.complex128, device="jax")
    assert jrandom._flat_normal.cache_info().currsize - before <= 3  # 50..140 parts: buckets 64, 128, 256
    # The bucketed draw is the draw of the tensor's own shape (JAX's threefry is partitionable).
    torch.manual_seed(7)
    got = torch.randn(5, 7, device="jax", dtype=torch.float64).cpu().numpy()
    torch.manual_seed(7)
    want = jax.random.normal(rng.next_key(), (5, 7), jnp.float64)
    assert abs(got - jax.device_get(want)).max() <= 1e-15


@pytest.mark.parametrize("a, b", [((5, 2, 3), (4, 2, 4)), ((2, 3), (3, 4)), ((7, 1, 5), (4, 6))])
def test_broadcast_errors_name_the_last_mismatching_dim_as_cpu(a, b):
    messages = []
    for device in ("cpu", "jax"):
        with pytest.raises(RuntimeError) as info:
            torch.ones(a, device=device) + torch.ones(b, device=device)
        messages.append(str(info.value))
    assert messages[0] == messages[1]


_PUTS = [
    # a value that cannot broadcast to an empty indexing result
    lambda d: torch.zeros(1, 0, dtype=torch.int16, device=d).index_put_(
        (torch.tensor(0, device=d), torch.tensor(False, device=d)), torch.ones(4, dtype=torch.int16, device=d)
    ),
    lambda d: torch.zeros(4, 3, device=d).index_put_(
        (torch.tensor([], dtype=torch.long, device=d),), torch.ones(2, device=d)
    ),
    # int16 / int8 indices are refused (long, int, byte or bool only), for reads too
    lambda d: torch.zeros(3, device=d).index_put_(
        (torch.tensor([1], dtype=torch.int16, device=d),), torch.tensor(1.0, device=d)
    ),
    lambda d: torch.zeros(3, device=d)[torch.tensor([1], dtype=torch.int8, device=d)],
    # CPU's order: an index into a size-0 dim, then the value's dtype, then the bounds
    lambda d: torch.zeros(4, 0, 2, dtype=torch.complex64, device=d).index_put_(
        (torch.tensor([0, 1], device=d), torch.tensor([0, 0], device=d)), torch.ones(2, dtype=torch.int32, device=d)
    ),
    lambda d: torch.zeros(1, 1, 2, device=d).index_put_(
        (torch.tensor([0], device=d), torch.tensor([-4], device=d)), torch.tensor(True, device=d)
    ),
]


@pytest.mark.parametrize("make", _PUTS)
def test_index_put_checks_as_cpu(make):
    messages = []
    for device in ("cpu", "jax"):
        with pytest.raises((RuntimeError, IndexError)) as info:
            make(device)
        messages.append((type(info.value), str(info.value).split(":")[0]))
    assert messages[0][0] is messages[1][0], messages
