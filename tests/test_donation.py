"""Writes into part of a storage give the storage's buffer to the result when nothing else can see it
(tensor.sole_holder), and never otherwise: an array a user holds, an alias of one, a tensor sharing
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


@pytest.mark.per_op_mode("each write reuses the buffer as it runs (fused eager writes at the flush)")
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


# --- in-place pointwise ops (ops/kit/inplace.py) -----------------------------------------------------

INPLACE = {
    "add_": lambda x, y: x.add_(y),
    "add_ alpha": lambda x, y: x.add_(y, alpha=-0.25),
    "sub_ scalar": lambda x, y: x.sub_(1.5),
    "mul_ -0.0": lambda x, y: x.mul_(-0.0),
    "mul_ 0.0": lambda x, y: x.mul_(0.0),
    "div_": lambda x, y: x.div_(y.abs() + 1),
    "lerp_": lambda x, y: x.lerp_(y, 0.1),
    "addcmul_": lambda x, y: x.addcmul_(y, y, value=0.01),
    "addcdiv_": lambda x, y: x.addcdiv_(y, y.abs() + 1, value=-0.3),
    "clamp_": lambda x, y: x.clamp_(-0.5, 0.5),
    "relu_": lambda x, y: x.relu_(),
    "sqrt_ abs": lambda x, y: x.abs_().sqrt_(),
    "exp_": lambda x, y: x.exp_(),
    "lt_": lambda x, y: x.lt_(y),
    "copysign_": lambda x, y: x.copysign_(y),
    "add_ broadcast row": lambda x, y: x.add_(y[0]),
}


@pytest.fixture
def donate_all(monkeypatch):
    from jaxdev.ops.kit import inplace

    monkeypatch.setattr(inplace, "DONATE_BYTES", 0)
    return inplace


@pytest.mark.parametrize("name", list(INPLACE))
def test_inplace_pointwise_ops_write_their_own_buffer_like_cpu(name, donate_all):
    op = INPLACE[name]
    gen = torch.Generator().manual_seed(0)
    x_cpu, y_cpu = torch.randn(16, 32, generator=gen), torch.randn(16, 32, generator=gen)
    x, y = x_cpu.to("jax") + 0, y_cpu.to("jax")
    copied = x.clone() + 0
    op(x, y)  # warm: the first call traces
    op(x_cpu, y_cpu)
    before = buffer(x)
    op(x, y)
    op(x_cpu, y_cpu)
    assert buffer(x) == before
    torch.testing.assert_close(x.cpu(), x_cpu, rtol=1e-5, atol=1e-6)
    assert torch.equal(torch.signbit(x.cpu()), torch.signbit(x_cpu)) or name not in ("mul_ -0.0", "mul_ 0.0")
    # The same values as the copying path, bit for bit.
    donate_all.DONATE_BYTES = 1 << 60
    op(copied, y)
    op(copied, y)
    assert torch.equal(copied.cpu(), x.cpu())


@pytest.mark.per_op_mode("a value error raised at the op (fused eager: tests/test_fused_donation.py)")
def test_inplace_ops_keep_cpus_errors_and_leave_self_unchanged(donate_all):
    i = torch.randint(1, 5, (16, 16), dtype=torch.int32).to("jax") + 0
    zero = torch.zeros(16, 16, dtype=torch.int32).to("jax")
    before = i.cpu()
    for op in (lambda t, z: t.div_(z, rounding_mode="floor"), lambda t, z: t.remainder_(z)):
        with pytest.raises(Exception) as on_cpu:
            op(before.clone(), zero.cpu())
        with pytest.raises(on_cpu.type, match="ZeroDivisionError"):
            op(i, zero)
        assert torch.equal(i.cpu(), before)
    with pytest.raises(RuntimeError, match="can't be cast to the desired output type Int"):
        i.add_(1.5)
    i.add_(1)  # an int 1 is not a float 1.0
    assert torch.equal(i.cpu(), before + 1)
    row = i[0] + 0
    with pytest.raises(RuntimeError, match="doesn't match the broadcast shape"):
        row.add_(i)
    assert torch.equal(row.cpu(), before[0] + 1)


def test_inplace_ops_spare_arrays_others_hold(donate_all):
    x = torch.randn(16, 16).to("jax") + 0
    held = jaxdev.to_jax(x)
    x.add_(1.0)
    assert not held.is_deleted()
    pending = x * 2  # queued before the in-place op that follows
    expect = x.cpu() * 2
    x.mul_(3.0)
    torch.testing.assert_close(pending.cpu(), expect, rtol=0, atol=0)
    y = x.clone()  # may share x's array
    expect = y.cpu()
    x.sub_(1.0)
    torch.testing.assert_close(y.cpu(), expect, rtol=0, atol=0)


def test_an_optimizer_with_a_new_step_size_each_step_compiles_a_bounded_number_of_programs(donate_all):
    torch.manual_seed(0)
    model = torch.nn.Linear(32, 32)
    ref = torch.nn.Linear(32, 32)
    ref.load_state_dict(model.state_dict())
    model.to("jax")
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    opt_ref = torch.optim.Adam(ref.parameters(), lr=1e-2)
    x = torch.randn(8, 32)
    programs = []
    for _ in range(12):
        for m, o, inp in ((model, opt, x.to("jax")), (ref, opt_ref, x)):
            o.zero_grad()
            m(inp).pow(2).mean().backward()
            o.step()
        programs.append(len(donate_all._PROGRAMS))
    torch.testing.assert_close(model.weight.detach().cpu(), ref.weight.detach(), rtol=1e-5, atol=1e-6)
    # Adam's step size changes every step: its addcdiv_ stops getting programs after a few.
    assert programs[-1] == programs[5]


def test_an_exported_array_stays_safe_when_another_tensor_takes_it_over():
    """The mark is on the array, not on the tensor that exported it: a plain clone or a whole copy_
    shares the very array object, and writes into that tensor must spare the caller's alias too."""
    for hand_over in (lambda t: t.clone(), lambda t: torch.empty(32, 32, device="jax").copy_(t)):
        a = jax.numpy.ones((32, 32), jax.numpy.float32)
        t = jaxdev.from_jax(a)
        alias = jax.device_put(a, jax.devices()[0])
        del a
        u = hand_over(t)
        del t
        u[:, 1:] = 0.0
        u.add_(1.0)
        assert not alias.is_deleted() and float(alias.sum()) == 32 * 32


def test_an_exported_array_stays_safe_through_shard_and_unshard():
    """jaxdev.shard and unshard place the storage with jax.device_put, which may return an alias of the
    array the user holds: the alias carries the mark."""
    a = jax.numpy.ones((32, 32), jax.numpy.float32)
    t = jaxdev.from_jax(a)
    jaxdev.shard(t, None, mesh={"data": 1})
    jaxdev.unshard(t)
    t[:, 1:] = 0.0
    assert not a.is_deleted() and float(a.sum()) == 32 * 32
    assert float(t.sum().item()) == 32


def test_inplace_programs_follow_the_default_dtype(donate_all):
    """`int_tensor.eq_(python_float)` compares in the default dtype, read while the program is traced."""
    before = torch.get_default_dtype()
    try:
        for default in (torch.float32, torch.float64, torch.float32):
            torch.set_default_dtype(default)
            x_cpu = torch.full((64,), 16777217, dtype=torch.int64)
            x = x_cpu.to("jax") + 0
            x_cpu.eq_(16777216.0)
            x.eq_(16777216.0)
            assert torch.equal(x.cpu(), x_cpu), default
    finally:
        torch.set_default_dtype(before)
