"""In-place indexed writes (index_put_, index_copy_, index_add_, index_fill_, index_reduce_, scatter_
and its reductions, masked_scatter_, put_) write into their storage's own buffer when nothing else
can see it (jaxdev/ops/kit/indexed_writes.py), and keep CPU's values and aliasing everywhere: through a
view, into a storage other tensors view or share, beside an array handed out by `to_jax`, under
autograd and in fused eager mode."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch
from jaxdev_testing import on_both

import jaxdev
from jaxdev import tensor
from jaxdev.ops.kit import inplace, reduce_at

G = torch.Generator().manual_seed(0)
X = torch.randn(64, 32, generator=G)
ROWS = torch.tensor([5, 0, 55, 17])  # distinct, all inside x[8:] too
DUP = torch.tensor([5, 0, 5, 55, 17, 0])  # repeated: the writes that accumulate
COLS = torch.tensor([3, 31, 8])
SRC, SRC_DUP = torch.randn(4, 32, generator=G), torch.randn(6, 32, generator=G)
COLUMNS = torch.randn(56, 3, generator=G)
PERM = torch.argsort(torch.rand(56, 32, generator=G), dim=0)[:4]  # distinct rows in each column
MANY = torch.randint(0, 56, (6, 32), generator=G)  # rows that meet in a column
MASK = torch.rand(56, 32, generator=G) > 0.9
FLAT = torch.tensor([7, 0, 1791, 300, 7])

# name -> (write(x, on), exact): `on(t)` moves a constant to x's device; sums compare within rounding.
WRITES = {
    "index_put_": (lambda x, on: x.index_put_((on(ROWS),), on(SRC)), True),
    "index_put_ accumulate": (lambda x, on: x.index_put_((on(DUP),), on(SRC_DUP), accumulate=True), False),
    "x[rows] = src": (lambda x, on: x.__setitem__(on(ROWS), on(SRC)), True),
    "x[rows, cols] = v": (lambda x, on: x.__setitem__((on(ROWS[:3]), on(COLS)), on(SRC[0, :3])), True),
    "x[mask] = 2": (lambda x, on: x.__setitem__(on(MASK[:, 0]), 2.0), True),
    "index_copy_": (lambda x, on: x.index_copy_(0, on(ROWS), on(SRC)), True),
    "index_copy_ dim 1": (lambda x, on: x.index_copy_(1, on(COLS), on(COLUMNS)), True),
    "index_add_": (lambda x, on: x.index_add_(0, on(DUP), on(SRC_DUP), alpha=0.5), False),
    "index_fill_": (lambda x, on: x.index_fill_(1, on(COLS), -1.5), True),
    "index_reduce_": (lambda x, on: x.index_reduce_(0, on(DUP), on(SRC_DUP), "amax", include_self=False), True),
    "scatter_": (lambda x, on: x.scatter_(0, on(PERM), on(SRC)), True),
    "scatter_ value": (lambda x, on: x.scatter_(0, on(PERM), 3.0), True),
    "scatter_add_": (lambda x, on: x.scatter_add_(0, on(MANY), on(SRC_DUP)), False),
    "scatter_reduce_ sum": (lambda x, on: x.scatter_reduce_(0, on(MANY), on(SRC_DUP), "sum"), False),
    "scatter_reduce_ mean": (lambda x, on: x.scatter_reduce_(0, on(MANY), on(SRC_DUP), "mean"), False),
    "scatter_reduce_ amin": (
        lambda x, on: x.scatter_reduce_(0, on(MANY), on(SRC_DUP), "amin", include_self=False),
        True,
    ),
    "masked_scatter_": (lambda x, on: x.masked_scatter_(on(MASK), on(SRC_DUP)), True),
    "put_": (lambda x, on: x.put_(on(FLAT[:4]), on(SRC[0, :4])), True),
    "put_ accumulate": (lambda x, on: x.put_(on(FLAT), on(SRC[1, :5]), accumulate=True), False),
}


def buffer(t: torch.Tensor) -> int:
    return tensor.box_of(t)._array.unsafe_buffer_pointer()


def on_jax(t: torch.Tensor) -> torch.Tensor:
    return t.to("jax")


def on_cpu(t: torch.Tensor) -> torch.Tensor:
    return t


def check(actual: torch.Tensor, expected: torch.Tensor, exact: bool) -> None:
    tolerance = {} if not exact else {"rtol": 0, "atol": 0}
    torch.testing.assert_close(actual.cpu(), expected, **tolerance)


@pytest.fixture
def donate_all(monkeypatch):
    """Small tensors donate too (the tests' tensors are below inplace.DONATE_BYTES)."""
    monkeypatch.setattr(inplace, "DONATE_BYTES", 0)


def fresh(rows: int = 56) -> tuple[torch.Tensor, torch.Tensor]:
    """(a CPU tensor, its jax twin in a buffer XLA owns): `.to("jax")` may hand XLA the host copy's
    memory, which it will not give away; `+ 0` makes one of its own."""
    cpu = X[:rows].clone()
    return cpu, cpu.to("jax") + 0


@pytest.mark.per_op_mode("buffer donation")
@pytest.mark.parametrize("name", list(WRITES))
def test_a_write_into_a_storage_nothing_else_sees_reuses_its_buffer(name, donate_all):
    write, exact = WRITES[name]
    cpu, x = fresh()
    write(x, on_jax)  # the first call traces and compiles
    write(cpu, on_cpu)
    before, version = buffer(x), x._version
    write(x, on_jax)
    write(cpu, on_cpu)
    assert buffer(x) == before, "the write copied the storage"
    assert x._version == version + 1
    check(x, cpu, exact)


@pytest.mark.parametrize("name", list(WRITES))
def test_a_write_through_a_view_reaches_the_base_like_cpu(name, donate_all):
    write, exact = WRITES[name]
    base_cpu, base = fresh(64)
    write(base[8:], on_jax)  # rows 8.. of the storage: written back through the view's strides
    write(base_cpu[8:], on_cpu)
    check(base, base_cpu, exact)


@pytest.mark.parametrize("name", list(WRITES))
def test_a_write_keeps_views_and_shared_arrays_right(name, donate_all):
    write, exact = WRITES[name]
    cpu, x = fresh()
    view, view_cpu = x[1:20, 2:], cpu[1:20, 2:]  # sees the write
    clone = x.clone()  # may hold x's very array: keeps the old values
    held = jaxdev.to_jax(x)  # handed out: never given away
    old = cpu.clone()
    write(x, on_jax)
    write(cpu, on_cpu)
    check(view, view_cpu, exact)
    check(clone, old, True)
    assert not held.is_deleted()
    check(torch.from_numpy(jax.device_get(held).copy()), old, True)
    write(x, on_jax)  # the handed-out array is still the caller's after a second write
    assert not held.is_deleted()


@pytest.mark.per_op_mode("buffer donation")
def test_a_handed_out_array_stays_valid_and_later_writes_donate_again(donate_all):
    cpu, x = fresh()
    held = jaxdev.to_jax(x)
    x.index_copy_(0, ROWS.to("jax"), SRC.to("jax"))
    assert not held.is_deleted()
    check(torch.from_numpy(jax.device_get(held).copy()), X[:56], True)
    before = buffer(x)  # the box holds a new array now, seen by nobody else
    x.index_copy_(0, ROWS.to("jax"), SRC.to("jax") * 2)
    assert buffer(x) == before
    cpu[ROWS] = SRC * 2
    check(x, cpu, True)


def test_values_read_from_the_storage_written_keep_cpus_outcome(donate_all):
    """The values or the index lie on self's own storage: that write never gives the buffer away."""

    def own_rows(d):
        x = X[:56].to(d) + 0
        x[ROWS.to(d)] = x[10:14]
        x.index_add_(0, ROWS.to(d), x[20:24].clone())
        return x

    on_both(own_rows)


@pytest.mark.per_op_mode("an error raised at the op")
def test_a_failed_write_leaves_self_as_it_was(donate_all):
    cpu, x = fresh()
    for write in (
        lambda t: t.index_copy_(0, torch.tensor([0, 56]).to(t.device), SRC[:2].to(t.device)),
        lambda t: t.scatter_(0, torch.full((1, 32), -57).to(t.device), 1.0),
        lambda t: t.put_(torch.tensor([56 * 32]).to(t.device), SRC[0, :1].to(t.device)),
        lambda t: t.masked_scatter_(MASK.to(t.device), SRC[0, :1].to(t.device)),
    ):
        with pytest.raises((IndexError, RuntimeError)):
            write(cpu.clone())
        with pytest.raises((IndexError, RuntimeError)):
            write(x)
        check(x, cpu, True)
    x.index_copy_(0, ROWS.to("jax"), SRC.to("jax"))  # still usable
    cpu.index_copy_(0, ROWS, SRC)
    check(x, cpu, True)


def test_autograd_through_indexed_writes_like_cpu(donate_all):
    def grads(d):
        w = X[:56].clone().to(d).requires_grad_()
        src = SRC_DUP.clone().to(d).requires_grad_()
        y = w * 2
        y.index_add_(0, DUP.to(d), src)
        y[ROWS.to(d)] = y[ROWS.to(d)] * 3
        y.scatter_add_(0, MANY.to(d), src)
        (y * y).sum().backward()
        return w.grad, src.grad

    on_both(grads)


def test_a_write_into_a_saved_tensor_is_refused_by_backward(donate_all):
    w = X[:56].clone().to("jax").requires_grad_()
    y = w.exp()  # saves its result
    y.index_copy_(0, ROWS.to("jax"), SRC.to("jax"))
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.sum().backward()


@pytest.mark.parametrize("name", ["index_put_", "index_add_", "scatter_reduce_ mean", "masked_scatter_"])
def test_fused_eager_mode_keeps_the_values(name, donate_all):
    write, exact = WRITES[name]
    cpu, x = fresh()
    with jaxdev.eager_mode("fused"):
        y = x * 1  # pending: the write is recorded after it
        write(y, on_jax)
        write(y, on_jax)
        result = y.cpu()
    write(cpu, on_cpu)
    write(cpu, on_cpu)
    check(result, cpu, exact)


# --- reductions into few positions (jaxdev/ops/kit/reduce_at.py): the sparse path against the dense ---

REDUCE_DTYPES = [torch.float32, torch.float16, torch.bfloat16, torch.int64]


@pytest.mark.parametrize("dtype", REDUCE_DTYPES, ids=str)
@pytest.mark.parametrize("reduce", ["sum", "prod", "mean", "amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False])
@pytest.mark.parametrize("rows", [56, 2], ids=["sparse", "dense"])  # 6x32 values into 56x32 or 2x32
def test_scatter_reduce_into_few_or_many_positions_like_cpu(dtype, reduce, include_self, rows):
    def run(d):
        x = (X[:rows] * 4).to(dtype)
        src = (SRC_DUP * 4).to(dtype)
        if dtype.is_floating_point:
            x[0, 1] = src[2, 3] = float("nan")
        return x.to(d).scatter_reduce_(0, (MANY % rows).to(d), src.to(d), reduce, include_self=include_self)

    half = dtype in (torch.float16, torch.bfloat16)
    on_both(run, rtol=1e-2 if half else 1e-5, atol=1e-2 if half else 1e-5)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("rows", [56, 2], ids=["sparse", "dense"])
def test_half_precision_scatter_add_rounds_once_like_cpu(dtype, rows):
    def run(d):
        x = X[:rows].to(dtype).to(d)
        return x.scatter_add_(0, (MANY % rows).to(d), SRC_DUP.to(dtype).to(d))

    on_both(run, rtol=1e-2, atol=1e-2)


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.float16, jnp.bfloat16, jnp.int32, jnp.bool_], ids=str)
@pytest.mark.parametrize("reduce", ["sum", "prod", "mean", "amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False])
def test_the_sparse_path_computes_what_the_dense_one_does(dtype, reduce, include_self):
    """Bit for bit, NaNs and repeated positions included: only the work differs (a mean or a half sum
    makes the positions unique, the others scatter straight into x)."""
    if dtype == jnp.bool_ and reduce == "mean":
        pytest.skip("no mean of booleans")
    x = jnp.asarray((X[:56] * 4).numpy()).astype(dtype)
    s = jnp.asarray((SRC_DUP * 4).numpy()).astype(dtype)
    if jnp.issubdtype(dtype, jnp.floating):
        x, s = x.at[5, 1].set(jnp.nan), s.at[2, 3].set(jnp.nan)
    pos = reduce_at.positions(jnp.asarray(MANY.numpy()), 0)
    acc = jnp.float32 if dtype in (jnp.float16, jnp.bfloat16) else dtype
    args = (reduce, include_self, not jnp.issubdtype(dtype, jnp.inexact), acc)
    assert reduce_at.SPARSE * s.size <= x.size  # reduce_at takes a sparse path here
    sparse = jax.jit(lambda x, s: reduce_at.reduce_at(x, pos, s, *args))(x, s)
    dense = jax.jit(lambda x, s: reduce_at._dense(x, pos, s, *args))(x, s)
    assert np.array_equal(np.asarray(sparse.astype(jnp.float32)), np.asarray(dense.astype(jnp.float32)), equal_nan=True)
