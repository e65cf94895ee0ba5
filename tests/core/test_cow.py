"""Copy-on-write storages (Tensor._lazy_clone, jaxdev/csrc/cow.cpp) on jax against CPU PyTorch: what
`torch._C._is_cow_tensor` and the addresses say after each step, and that a write to one side never
reaches the other, whichever kernel writes."""

from __future__ import annotations

import copy
import gc

import pytest
import torch
from jaxdev_testing import CPU, JAX

import jaxdev
from jaxdev import native, tensor

pytestmark = [
    pytest.mark.usefixtures("no_fallback"),
    pytest.mark.skipif(native.module is None, reason="copy-on-write sharing needs jaxdev's native module"),
]

cow = torch._C._is_cow_tensor
data = torch._C._data_address
storage_of = torch._C._storage_address


def _observe(device, dtype) -> list:
    """PyTorch's test_lazy_clone_view_materialize, as a list of what each check saw."""
    seen = []
    t = torch.tensor([[0, 1], [2, 3]], device=device, dtype=dtype)
    t_storage, t_data = storage_of(t), data(t)
    clone = t._lazy_clone()
    view = t.view([4])
    seen += [cow(t), cow(view), cow(clone), data(clone) == t_data, storage_of(clone) != t_storage]
    t + clone  # a read materializes nothing
    seen += [cow(t), cow(clone)]
    view += torch.ones(1, device=device, dtype=dtype)
    seen += [cow(t), cow(view), cow(clone), storage_of(t) == t_storage, data(t) != t_data]
    seen += [data(view) == data(t), data(clone) == t_data]
    clone += torch.ones(1, device=device, dtype=dtype)  # the last reference keeps the original data
    seen += [cow(clone), data(clone) == t_data, t.tolist(), clone.tolist()]
    return seen


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.bool, torch.bfloat16, torch.complex64])
@pytest.mark.parametrize("fused", [False, True], ids=["op", "fused"])
def test_lazy_clone_observed_as_cpu(dtype, fused):
    """Fused eager too: recording `t + clone` left neither side shared (its keys read each storage's
    address through Python's data_ptr(), which asks for the mutable pointer and materializes it)."""
    with jaxdev.eager_mode("fused" if fused else jaxdev.get_eager_mode()):
        seen = _observe(JAX, dtype)
    assert seen == _observe(CPU, dtype)


def _write_t(t, c):
    t.add_(10)


def _write_clone_index(t, c):
    c[0, 1] = 7


def _write_clone_copy(t, c):
    c.copy_(torch.full((2, 3), 5.0))


def _write_clone_out(t, c):
    torch.mul(t, 3, out=c)


def _write_t_view(t, c):
    t[:, 1:].fill_(-1)


def _write_t_index_put(t, c):
    t.index_put_((torch.tensor([1, 0]),), torch.tensor(9.0), accumulate=True)


def _write_clone_transposed(t, c):
    c.t().mul_(2)


def _write_t_through_lazy_clone_of_view(t, c):
    v = t[1]._lazy_clone()
    v.sub_(1)
    t[0].zero_()


def _write_t_reading_clone(t, c):
    t.add_(c)  # one op on both storages: only the written one is materialized


def _write_clone_reading_t(t, c):
    torch.mul(t, c, out=c)


def _write_t_foreach_reading_clone(t, c):
    torch._foreach_mul_([t], [c])


def _write_clone_index_put_reading_t(t, c):
    c.index_put_((torch.tensor([1]),), t[0], accumulate=True)


def _write_t_after_a_read_of_t(t, c):
    (t * 2).sum()  # the segment reads the shared data through t's storage object before t is written
    t.add_(1)
    c.mul_(3)


WRITES = [
    _write_t_reading_clone,
    _write_clone_reading_t,
    _write_t_foreach_reading_clone,
    _write_clone_index_put_reading_t,
    _write_t_after_a_read_of_t,
    _write_t,
    _write_clone_index,
    _write_clone_copy,
    _write_clone_out,
    _write_t_view,
    _write_t_index_put,
    _write_clone_transposed,
    _write_t_through_lazy_clone_of_view,
]


def _after(device, write, fused: bool) -> tuple:
    t = torch.arange(6.0, device=device).reshape(2, 3)
    c = t._lazy_clone()
    with jaxdev.eager_mode("fused" if fused else jaxdev.get_eager_mode()):
        write(t, c)
        shared = cow(t), cow(c)  # before a read: in fused mode the writes are still pending
    return shared, t.cpu().tolist(), c.cpu().tolist()


@pytest.mark.parametrize("write", WRITES, ids=lambda f: f.__name__[1:])
@pytest.mark.parametrize("fused", [False, True], ids=["op", "fused"])
def test_a_write_to_one_side_stays_there(write, fused):
    """Each kernel family that writes (in-place math, index writes, copy_, out=, views, transposed
    views): a copy-on-write pair holds exactly what CPU's holds after it, one op at a time and fused,
    and the side not written stays copy-on-write as on CPU (fused eager used to unshare both sides at
    any op that read either)."""
    assert _after(JAX, write, fused) == _after(CPU, write, False)


def _compiled_read(t, c):
    return c * 2 + t


def _compiled_write_clone(t, c):
    c.add_(1)
    return c * 2


def _compiled_write_view(t, c):
    c[1].mul_(3)
    return t + 1


@pytest.mark.parametrize(
    "body", [_compiled_read, _compiled_write_clone, _compiled_write_view], ids=lambda f: f.__name__
)
def test_a_compiled_call_keeps_sharing_as_eager_cpu(body):
    """torch.compile(backend="jax"): a graph that only reads a copy-on-write input leaves it shared (its
    inputs' addresses were read through Python's data_ptr(), which materialized it), and one that writes
    it makes that side its own before the write, so the other side keeps its values, as CPU eager does."""

    def run(device, fn):
        t = torch.arange(6.0, device=device).reshape(2, 3)
        c = t._lazy_clone()
        out = [fn(t, c) for _ in range(2)]  # the second call through the specialisation made by the first
        return cow(t), cow(c), t.cpu().tolist(), c.cpu().tolist(), [o.cpu().tolist() for o in out]

    torch._dynamo.reset()
    assert run(JAX, torch.compile(body, backend="jax")) == run(CPU, body)


def _copies_kept_shared(device) -> list:
    """A storage clone, a deepcopy and a storage's copy to CPU read a copy-on-write tensor: CPU leaves it
    shared; the copies hold its values and are their own."""
    t = torch.arange(6.0, device=device)
    c = t._lazy_clone()
    seen = []
    copies = (
        lambda: torch.tensor([], device=device).set_(c.untyped_storage().clone()),
        lambda: copy.deepcopy(c),
    )
    for copy_of in copies:
        made = copy_of()
        made.add_(1)
        seen += [cow(t), cow(c), made.cpu().tolist(), c.cpu().tolist()]
    # On CPU a CPU storage's .cpu() is itself: only its bytes compare
    seen += [bytes(c.untyped_storage().cpu()), c.untyped_storage().tolist()[:4], cow(t), cow(c)]
    return seen


@pytest.mark.parametrize("fused", [False, True], ids=["op", "fused"])
def test_storage_clone_and_deepcopy_keep_sharing(fused):
    """`UntypedStorage.clone()` (deepcopy's way for a storage) took the source's address with Python's
    data_ptr(), which materialized a copy-on-write storage it only read; so did `set_` to a storage (a
    storage's `.cpu()` and `.tolist()` set a tensor to it), retyping its box."""
    with jaxdev.eager_mode("fused" if fused else jaxdev.get_eager_mode()):
        seen = _copies_kept_shared(JAX)
    assert seen == _copies_kept_shared(CPU)


def test_shared_box_lives_as_long_as_either_side():
    """The box two storages share outlives the first to die, and goes with the last: sweeps (which
    follow weak references) never drop it while one side lives."""
    gc.collect()  # tensors of earlier tests that reference cycles still hold
    tensor.sweep()
    before = set(tensor.BOXES)  # boxes an earlier test left may still die meanwhile: only new ones count
    t = torch.arange(4.0, device=JAX)
    c = t._lazy_clone()
    del t
    gc.collect()
    tensor.sweep()
    assert c.tolist() == [0.0, 1.0, 2.0, 3.0] and cow(c)
    c2 = c._lazy_clone()  # a third storage on the same data
    c.add_(1)  # materialized: a box of its own, the shared one stays for c2
    tensor.sweep()
    assert (c.tolist(), c2.tolist()) == ([1.0, 2.0, 3.0, 4.0], [0.0, 1.0, 2.0, 3.0])
    del c, c2
    gc.collect()
    tensor.sweep()  # a storage that dies with the GIL released leaves its box to the next sweep
    assert not set(tensor.BOXES) - before


def test_parallel_materialize_raises_as_cpu():
    """Materializing inside at::parallel_for's loop is refused as on CPU (PyTorch's own check)."""
    for device in (CPU, JAX):
        a = torch.ones(2, 2, device=device)._lazy_clone()
        with pytest.raises(RuntimeError, match="Materializing a storage"):
            torch._test_parallel_materialize(a, 1, False)
        b = torch.ones(2, 2, device=device)
        torch._test_parallel_materialize(b, 1, False)
