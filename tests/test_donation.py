"""Writes into part of a storage give the storage's buffer to the result when nothing else can see it
(tensor._sole_holder), and never otherwise: an array a user holds, an alias of one, a tensor sharing
the array, and a computation still reading the buffer all keep their values."""

import jax
import numpy as np
import pytest
import torch

import jaxdev
from jaxdev import tensor


def buffer(t: torch.Tensor) -> int:
    return tensor.box_of(t)._array.unsafe_buffer_pointer()


@pytest.mark.parametrize(
    "write",
    [
        lambda x: x.__setitem__((slice(None), 3), 1.0),  # a column: strided
        lambda x: x.diagonal().copy_(torch.ones(64, device="jax")),  # sparse: a scatter
        lambda x: x[5].add_(2.0),  # a row: in place through a view
        lambda x: x[:, ::2].mul_(3.0),
    ],
    ids=["column", "diagonal", "row add_", "strided mul_"],
)
def test_a_write_nothing_else_sees_reuses_the_buffer(write):
    ref = torch.arange(64 * 64, dtype=torch.float32).reshape(64, 64)
    # `.to("jax")` may hand XLA the numpy copy's memory, which it will not give away: the first write
    # copies, into a buffer of XLA's own.
    x = ref.to("jax")
    write(x)
    write(ref)
    before = buffer(x)
    write(x)
    write(ref)
    assert buffer(x) == before  # donated: the write cost the part written
    torch.testing.assert_close(x.cpu(), ref, rtol=0, atol=0)


def test_an_exported_array_and_its_alias_keep_their_values():
    x = torch.zeros(64, 64, device="jax")
    held = jaxdev.to_jax(x)
    x[:, 1] = 5.0
    assert not held.is_deleted() and float(held[0, 1]) == 0.0
    # An alias sharing the buffer under another Python object, the original dropped.
    y = torch.zeros(64, 64, device="jax")
    alias = jax.device_put(jaxdev.to_jax(y), jax.devices()[0])
    y[:, 2] = 7.0
    assert not alias.is_deleted() and float(alias[0, 2]) == 0.0
    assert float(y[0, 2].item()) == 7.0
    # Once the box holds a new array, the pin is gone and later writes donate again.
    before = buffer(y)
    y[:, 3] = 1.0
    assert buffer(y) == before


def test_an_imported_array_keeps_its_values():
    a = jax.numpy.zeros((32, 32), jax.numpy.float32)
    alias = jax.device_put(a, jax.devices()[0])
    t = jaxdev.from_jax(a)
    del a
    t[:, 0] = 3.0
    assert not alias.is_deleted() and float(alias[0, 0]) == 0.0
    assert float(t[0, 0].item()) == 3.0


def test_tensors_sharing_an_array_keep_their_own_values():
    x = torch.randn(64, 64).to("jax")
    y = x.clone()  # may hold the very same array
    expect = y.cpu()
    x[:, 0] = 9.0
    torch.testing.assert_close(y.cpu(), expect, rtol=0, atol=0)
    assert (x[:, 0].cpu() == 9.0).all()


def test_a_pending_read_of_the_buffer_sees_the_old_values():
    big = torch.randn(1024, 1024).to("jax")
    old = big.cpu()
    reads = [big[i].clone() * 2 for i in range(4)] + [big.sum(0)]  # queued asynchronously
    for i in range(4):
        big[i] = float(i)
    for i in range(4):
        torch.testing.assert_close(reads[i].cpu(), old[i] * 2, rtol=0, atol=0)
    torch.testing.assert_close(reads[4].cpu(), old.sum(0), rtol=1e-5, atol=1e-4)  # summation order
    assert (big[:4].cpu() == torch.arange(4.0)[:, None]).all()


def test_a_numpy_view_of_the_buffer_keeps_its_values():
    x = torch.zeros(64, 64, device="jax")
    view = np.asarray(jaxdev.to_jax(x))
    x[:, 0] = 1.0
    assert view[0, 0] == 0.0


def test_a_kv_cache_written_step_by_step_matches_cpu():
    gen = torch.Generator().manual_seed(0)
    cache_cpu = torch.zeros(2, 4, 16, 8)
    cache = cache_cpu.to("jax") + 0  # a buffer of XLA's own (see above)
    start = buffer(cache)
    for pos in range(16):
        k = torch.randn(2, 4, 8, generator=gen)
        cache_cpu[:, :, pos] = k
        cache[:, :, pos] = k.to("jax")
        # What a decoder reads back each step: everything written so far.
        torch.testing.assert_close(cache[:, :, : pos + 1].cpu(), cache_cpu[:, :, : pos + 1], rtol=0, atol=0)
    assert buffer(cache) == start


def test_autograd_still_sees_writes_into_saved_tensors():
    w = torch.randn(8, 8).to("jax").requires_grad_()
    x = torch.randn(8, 8).to("jax")
    y = (w * 2).exp()
    y[:, 0] = 0.0  # exp saved its result: backward must refuse, as on CPU
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.sum().backward()
    z = w @ x
    z.sum().backward()
    torch.testing.assert_close(w.grad.cpu(), torch.ones(8, 8) @ x.cpu().t())
